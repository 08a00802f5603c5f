"""Test harnesses: released Apache Hudi Spark bundles run in a separate process beside the daemon
(``apache_hudi``, ``hudi_setup``, ``hudi_versions``, ``hudi_worker``; on the S3 test server with its locks,
``hudi_s3``), daemon processes and a table's timeline in either layout (``daemon_harness``), the crash harness
(``crash_harness``; the table it watches, local or on S3, ``crash_table``; Hudi's streaming writer as its
ingestion and the run beside it, ``crash_stream``, ``crash_stream_run``), hudi-rs and on-disk checks of a table
(``hudi_rs_checks``) and a Spark standalone cluster (``spark_cluster``)."""
