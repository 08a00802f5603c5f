"""The table a crash run watches, wherever it is: :class:`WatchedTable` gives the crash harness a local folder
holding the table's files as they are now (the table's own folder, or an :class:`~tests.harness.s3_mirror.S3Mirror`
of a table on S3 brought up to date at each :meth:`WatchedTable.refresh`), what readers are given to reach the
table itself (Hudi's worker, hudi-rs, ``validate_files``), and who holds the table's lock (:class:`LockWatch`).

Lock watches: :class:`FileLockWatch` reads the owner of ``.hoodie/lock`` (``<host>:<pid>:...``, the daemon's and
Hudi's file-system lock); :class:`ZooKeeperLockWatch` lists the lock nodes under ``<base_path>/<lock_key>`` and
reads the first one's data in Curator's order (a daemon's node data is ``application_id=<hoodie.write.lock.app_id>``,
so a daemon given an app id of its own is told apart from Hudi's writers and from the daemon killed before it).
A daemon holds the lock when the watch's :meth:`~LockWatch.holder` is the daemon's ``lock_identity``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hudi_clusterd.lock import LOCK_FILE, FileSystemLockProvider, LockOptions
from hudi_clusterd.lock.zookeeper import curator_order
from hudi_clusterd.storage import StorageSpec, open_storage

LOCK_STALE_S = 4.0
"""The staleness of the daemon's file-system lock in crash runs (``clusterd.lock.stale.seconds``)."""


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def lock_owner_pid(base: Path) -> int | None:
    """The pid named by ``.hoodie/lock`` when it is held by a process of this host, else None."""
    try:
        owner = str(json.loads((base / LOCK_FILE).read_bytes()).get("owner", ""))
    except (OSError, ValueError, AttributeError):
        return None
    host, pid, *_ = [*owner.split(":"), "", ""]
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def pid_identity(pid: int) -> str:
    """How :class:`FileLockWatch` names a holder of this host: a daemon's ``lock_identity`` on a local table."""
    return f"pid {pid}"


class LockWatch(Protocol):
    """Who holds a table's lock, read from the lock's own store."""

    def holder(self) -> str | None:
        """The identity of the lock's holder (a daemon's ``lock_identity`` when it is a daemon's), None when free."""
        ...

    def pending(self) -> list[str]:
        """``lock held by ...`` entries of a lock held by a process that may still use it (empty at rest)."""
        ...

    def assert_takeable(self, what: str) -> None:
        """Fail (naming ``what``) unless a new writer can take the lock now."""
        ...


@dataclass(frozen=True)
class FileLockWatch:
    """The file-system lock ``.hoodie/lock`` of a local table at ``base``."""

    base: Path

    def holder(self) -> str | None:
        pid = lock_owner_pid(self.base)
        return None if pid is None else pid_identity(pid)

    def pending(self) -> list[str]:
        """The lock file, when its owner is a live process of this host or of another host (a lock file of a
        dead process is not work: the next writer takes it over once stale)."""
        if not (self.base / LOCK_FILE).exists():
            return []
        pid = lock_owner_pid(self.base)
        if pid is None or process_alive(pid):
            return [f"lock held by {'another host' if pid is None else pid}"]
        return []

    def assert_takeable(self, what: str) -> None:
        options = LockOptions(timeout_s=LOCK_STALE_S + 10, stale_s=LOCK_STALE_S)
        with FileSystemLockProvider(open_storage(str(self.base)), options).held():
            pass


@dataclass
class ZooKeeperLockWatch:
    """Hudi's ZooKeeper lock at ``lock_path`` (``<base_path>/<lock_key>``), read through the started kazoo client
    ``client``. A node stays as long as its session: a killed holder's node until its session expires."""

    client: Any
    lock_path: str

    def nodes(self) -> list[tuple[str, str]]:
        """(node, data) of the lock's contenders in Curator's order: the first holds the lock."""
        from kazoo.exceptions import NoNodeError

        try:
            children = self.client.get_children(self.lock_path)
        except NoNodeError:
            return []
        out: list[tuple[str, str]] = []
        for node in curator_order(children):
            try:
                data, _ = self.client.get(f"{self.lock_path}/{node}")
            except NoNodeError:
                continue
            out.append((node, bytes(data or b"").decode(errors="replace")))
        return out

    def holder(self) -> str | None:
        nodes = self.nodes()
        return nodes[0][1] if nodes else None

    def pending(self) -> list[str]:
        return [f"lock held by ZooKeeper node {self.lock_path}/{n} ({data})" for n, data in self.nodes()]

    def assert_takeable(self, what: str) -> None:
        left = self.nodes()
        assert not left, f"{what}: ZooKeeper lock nodes left under {self.lock_path}: {left}"


@dataclass
class WatchedTable:
    """A table as the crash harness reads it.

    ``root``: a local folder holding the table's files (as of the last :meth:`refresh`); ``location``: what the
    table's readers are given (the folder, or a ``StorageSpec`` of the table's URI); ``uri``: where Apache Hudi
    finds it (the folder, or the ``s3a://`` URI its writers have); ``rs_options``: hudi-rs's storage options
    reaching ``uri``; ``lock``: its lock."""

    root: Path
    location: Path | StorageSpec
    uri: Path | str
    lock: LockWatch
    rs_options: Mapping[str, str] | None = None
    _sync: Callable[[str], object] | None = field(default=None, repr=False)
    _exists: Callable[[str], bool] | None = field(default=None, repr=False)

    @property
    def local(self) -> bool:
        """A local folder: files grow as they are written. On an object store a file appears whole, once written."""
        return self._sync is None

    def refresh(self, under: str = "") -> Path:
        """Bring ``root`` up to date with the table (only the paths starting with ``under`` when given: a folder
        ``"a/b/"`` or a prefix of names; nothing to do for a local table); returns ``root``."""
        if self._sync is not None:
            self._sync(under)
        return self.root

    def exists(self, rel: str) -> bool:
        """Whether the table holds the file ``rel`` (relative to its base path) now, not as of the last refresh."""
        return self._exists(rel) if self._exists is not None else (self.root / rel).exists()


def local_table(base: Path) -> WatchedTable:
    """A table in the local folder ``base`` with the file-system lock."""
    return WatchedTable(root=base, location=base, uri=base, lock=FileLockWatch(base))


def s3_table(s3: Any, uri: str, mirror_root: Path, lock: LockWatch) -> WatchedTable:
    """The table at ``uri`` (``s3a://`` or ``s3://``) on the S3 test server ``s3`` (a
    ``tests.harness.servers.S3Server``), mirrored into ``mirror_root`` at each refresh, with the lock ``lock``."""
    from tests.harness.hudi_rs_checks import s3_storage_options
    from tests.harness.s3_mirror import S3Mirror

    mirror = S3Mirror(s3, uri, mirror_root)
    mirror.sync()
    return WatchedTable(root=mirror_root, location=StorageSpec(uri, s3.storage_options()), uri=uri, lock=lock,
                        rs_options=s3_storage_options(s3), _sync=mirror.sync, _exists=mirror.exists)


def as_watched(table: Path | WatchedTable) -> WatchedTable:
    """``table``, a local folder taken as :func:`local_table`."""
    return table if isinstance(table, WatchedTable) else local_table(table)
