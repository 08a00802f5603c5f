"""Interoperability tests against real Apache Hudi (released Spark bundles) run by the harness."""
