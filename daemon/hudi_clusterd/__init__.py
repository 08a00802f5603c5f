"""hudi-clusterd: an asynchronous clustering daemon for Apache Hudi copy-on-write tables (table versions 6, 8 and 9)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
