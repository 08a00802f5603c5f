"""Crash points in this process: a table storage that dies at its k-th write, and a clustering engine without a JVM.

`FaultyStorage` is the table's local `hudi_clusterd.storage.Storage` (pass it to ``HoodieTable.open(..., storage=)``)
counting every call that changes storage (``put``, which ``write_bytes`` goes through, ``rename``, ``delete``,
``delete_dir``, ``makedirs``).
With ``crash_at=k`` the k-th such call raises `SimulatedCrash` before it changes anything, and so does every later
one: a dead process writes nothing more, not even in its ``finally`` blocks (its lock release, its heartbeat
deletion). `SimulatedCrash` is a ``BaseException``, so no ``except Exception`` of the code under test takes it for
an ordinary failure it could clean up after. Reads go on (they change nothing). ``touch`` (heartbeat refreshes, made
by background threads at times of their own) is not counted, so that the k-th call is the same in every run; after
the crash it fails with ``StorageError``, as the heartbeat threads of a dying process would see it.

Writes are atomic in `Storage` (a temporary file linked or renamed into place), so "before the k-th call" for every
k, plus a run without a crash, is every state a kill can leave between two storage operations. A SIGKILL in the
middle of an atomic write leaves a hidden temporary file besides; the SIGKILL harness
(``tests/harness/crash_harness.py``) shows those are harmless and counts them.

`ArrowGroupRunner` is a `hudi_clusterd.ops.ports.GroupRunner` on pyarrow: it reads a group's base files through
the table's storage, sorts the rows by the plan's sort columns and writes them, meta columns kept and
``_hoodie_file_name`` rewritten, as ``files_per_group`` new file groups, each after its marker, through the same
storage (so a crash can fall between a marker and its file, or between two files). A slice with log files
(``deltaFilePaths``) is read merged under the ``merge`` given, through the same storage, as the Spark tasks read it
(`hudi_clusterd.engine.clustering.merged.merge_slice`).
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.domain.commit import WriteStat
from hudi_clusterd.domain.file_group import BaseFile, base_file_name, join_partition
from hudi_clusterd.domain.plan import ClusteringPlan
from hudi_clusterd.engine.clustering.merged import MergedSlice, merge_slice
from hudi_clusterd.errors import ExecutionError, StorageError
from hudi_clusterd.formats.log import SliceMerge
from hudi_clusterd.storage import PutMode, Storage
from hudi_clusterd.storage.base import FileInfo
from hudi_clusterd.storage.local import LocalStorage
from hudi_clusterd.table.markers import create_marker
from hudi_clusterd.table.table_ref import TableRef


class SimulatedCrash(BaseException):
    """The process died at this storage call."""


class FaultyStorage(LocalStorage):
    """`Storage` that dies at its ``crash_at``-th mutating call (see the module's text); ``calls`` lists every
    mutating call made (``"write .hoodie/T.replacecommit.requested"``), the crashing one included."""

    def __init__(self, base_uri: str, crash_at: int | None = None) -> None:
        super().__init__(base_uri)
        self.crash_at = crash_at
        self.calls: list[str] = []
        self.crashed: str | None = None
        self._guard = threading.Lock()

    def _mutation(self, op: str, rel: str) -> None:
        with self._guard:
            if self.crashed is not None:
                raise SimulatedCrash(f"{op} {rel} after the crash at {self.crashed}")
            self.calls.append(f"{op} {rel}")
            if self.crash_at is not None and len(self.calls) >= self.crash_at:
                self.crashed = f"call {len(self.calls)} ({op} {rel})"
                raise SimulatedCrash(self.crashed)

    def put(self, rel: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, if_match: str | None = None
            ) -> FileInfo | None:
        self._mutation("write", rel)
        return super().put(rel, data, mode=mode, if_match=if_match)

    def rename(self, src: str, dst: str) -> None:
        self._mutation("rename", f"{src} -> {dst}")
        super().rename(src, dst)

    def delete(self, rel: str, *, if_match: str | None = None, missing_ok: bool = True) -> bool:
        self._mutation("delete", rel)
        return super().delete(rel, if_match=if_match, missing_ok=missing_ok)

    def delete_dir(self, rel: str) -> None:
        self._mutation("delete folder", rel)
        super().delete_dir(rel)

    def makedirs(self, rel: str) -> None:
        self._mutation("mkdir", rel)
        super().makedirs(rel)

    def touch(self, rel: str) -> None:
        if self.crashed is not None:
            raise StorageError(f"touch {self.full_path(rel)}: the process died at {self.crashed}")
        super().touch(rel)


FILE_NAME_COLUMN = "_hoodie_file_name"


class ArrowGroupRunner:
    """Clustering groups rewritten with pyarrow through the table's storage (see the module's text)."""

    def __init__(self, storage: Storage | None = None, files_per_group: int = 2) -> None:
        self.storage = storage
        """The storage the groups are read and written through (default: the table's, opened from its ref)."""
        self.files_per_group = files_per_group

    def run_group(self, table: TableRef, instant: str, plan: ClusteringPlan, index: int,
                  files: Sequence[BaseFile], merge: SliceMerge | None = None) -> list[WriteStat]:
        storage = self.storage or table.open_storage()
        group = plan.input_groups[index]
        partition = group.partition_path
        logs = {storage.rel_from_uri(s.data_file_path): tuple(storage.rel_from_uri(p) for p in s.delta_file_paths)
                for s in group.slices if s.delta_file_paths and s.data_file_path}
        parts: list[pa.Table] = []
        for bf in files:
            slice_logs = logs.get(bf.relative_path)
            if not slice_logs:
                parts.append(pq.read_table(io.BytesIO(storage.read_bytes(bf.relative_path))))
            elif merge is None:
                raise ExecutionError(f"{storage.full_path(slice_logs[0])}: a log file and no merge to read it with")
            else:
                parts.append(merge_slice(storage, MergedSlice(bf.relative_path, slice_logs), merge))
        rows = pa.concat_tables(parts, promote_options="default")
        columns = [c for c in plan.strategy.work_order.sort_columns if c in rows.column_names]
        if columns:
            rows = rows.sort_by([(c, "ascending") for c in columns])
        n = self.files_per_group
        per_file = -(-rows.num_rows // n)
        stats: list[WriteStat] = []
        for part in range(n):
            chunk = rows.slice(part * per_file, per_file)
            if chunk.num_rows == 0:
                continue
            file_id = f"{uuid.uuid4()}-0"
            name = base_file_name(file_id, f"{index}-{part}-1", instant)
            position = chunk.schema.get_field_index(FILE_NAME_COLUMN)
            chunk = chunk.set_column(position, FILE_NAME_COLUMN, pa.array([name] * chunk.num_rows, pa.string()))
            buffer = io.BytesIO()
            pq.write_table(chunk, buffer)
            data = buffer.getvalue()
            create_marker(storage, instant, partition, name)
            storage.write_bytes(join_partition(partition, name), data, overwrite=True)
            stats.append(WriteStat(file_id, join_partition(partition, name), partition, num_writes=chunk.num_rows,
                                   num_inserts=chunk.num_rows, total_write_bytes=len(data),
                                   file_size_in_bytes=len(data)))
        return stats

    def cancel(self, table: TableRef, instant: str) -> None:
        return None

    def close(self) -> None:
        return None
