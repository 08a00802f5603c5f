"""Ingestion: the commit protocol of a write, inserts, upserts, the streaming sink and snapshot reads."""
