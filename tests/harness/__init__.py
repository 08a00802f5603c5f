"""Test harness that runs released Apache Hudi Spark bundles in a separate process, beside the daemon."""
