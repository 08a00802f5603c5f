"""Apache Hudi metadata-table (MDT) file formats: log blocks and HFiles."""
