"""The driver's heap: large blocks go back to the system when freed.

Every Parquet footer the driver reads (planning reads the small files' sort-column ranges, a clustering's figures
read the footers before and after) carries Hudi's bloom filter, a string of about 430 KB on a base file of 20,000
rows. glibc serves such a block with ``mmap`` and unmaps it when freed, but it then raises its mmap threshold to
that block's size, so the next footers land in the heap, where freeing them keeps the memory in the process
(reading 120 such footers left 115 MiB behind). Fixing the threshold at glibc's default of 128 KiB keeps every
large block mapped on its own, returned to the system when it is freed.
"""

from __future__ import annotations

import ctypes
import sys

import structlog

log = structlog.get_logger(__name__)

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's ``malloc.h``)."""

MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's initial threshold; setting it explicitly also stops glibc from raising it."""


def map_large_blocks() -> bool:
    """Fix the C library's mmap threshold at `MMAP_THRESHOLD_BYTES`; False where it cannot be set (not Linux,
    or a C library without ``mallopt``, such as musl, which maps large blocks on its own)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    if not done:
        log.debug("mmap threshold not set; freed footers may stay in the heap")
    return done


__all__ = ["MMAP_THRESHOLD_BYTES", "map_large_blocks"]
