"""The client of one bucket: its obstore store, built on first use from a spec's options (`object_config`), and
the requests made through it (`RequestCounts`); an `ObjectStorage` and its children share one."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hudi_clusterd.storage.object_config import Location, MemoryBuckets, StoreSetup, build_store
from hudi_clusterd.storage.requests import RequestCounts

if TYPE_CHECKING:
    from obstore.store import ObjectStore


class ObjectClient:
    """The store of one bucket as a spec's options configure it (built on first use) and the requests made to it;
    shared by a storage and its children."""

    def __init__(self, location: Location, options: Mapping[str, str], memory: MemoryBuckets) -> None:
        self.location = location
        self.options = dict(options)
        self.requests = RequestCounts()
        self._memory = memory
        self._setup: StoreSetup | None = None
        self._lock = threading.Lock()

    def setup(self) -> StoreSetup:
        if self._setup is None:
            with self._lock:
                if self._setup is None:
                    self._setup = build_store(self.location, self.options, self._memory)
        return self._setup

    @property
    def store(self) -> ObjectStore:
        return self.setup().store

    @property
    def endpoint(self) -> str:
        """Where requests go (for messages); the scheme and bucket before the client is built."""
        return self._setup.endpoint if self._setup is not None else f"{self.location.scheme}://{self.location.bucket}"


__all__ = ["ObjectClient"]
