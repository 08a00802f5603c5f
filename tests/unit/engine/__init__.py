"""Unit tests for hudi_clusterd.engine (no JVM)."""
