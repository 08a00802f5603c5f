"""Checks of a table's metadata table (MDT) against real Apache Hudi, for the interop tests of the daemon's MDT
writes: each helper takes a running :class:`~tests.harness.apache_hudi.HudiWorker` and a table's base path (and a
name to register the table under, for Hudi's procedures, which take a table name and never a path).

What Hudi's procedures give, in both bundles (0.15.0 and 1.2.0, read from the bundle classes):

- ``validate_metadata_table_files(table => <name>, verbose => false)`` returns ``partition, file_name,
  is_present_in_fs, is_present_in_metadata, fs_size, metadata_size``, every file with ``verbose => true`` and the
  mismatches only without. **It never lists storage**: its "file system" reader is a ``HoodieBackedTableMetadata``
  built with ``hoodie.metadata.enable=false``, but that reader decides from ``hoodie.table.metadata.partitions``
  alone that the MDT is available and reads it too, so the procedure compares the MDT with itself and reports no
  difference even for a deleted or an unlisted data file. :func:`validate_files` therefore takes the MDT's view from
  its verbose rows and compares it with its own listing of storage (names and sizes).
- ``show_metadata_table_column_stats(table, path, partition, targetColumns, filter)`` (1.2 only; 0.15 has no such
  procedure) returns ``file_name, column_name, min_value, max_value, null_number`` for the base files of the latest
  file slices, min and max as Java's ``String.valueOf`` of the stored value; without ``targetColumns`` it returns
  nothing, and a column that is not indexed silently has no rows.
"""

from __future__ import annotations

import decimal
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_clusterd.storage import Storage, StorageSpec, open_storage
from hudi_clusterd.table.hoodie_table import HoodieTable
from tests.harness.apache_hudi import HudiRequestError, HudiWorker, read_hoodie_properties

# Hudi's data files (``FSUtils.isDataFile``): base files by extension, log files by FSUtils.LOG_FILE_PATTERN.
_BASE_FILE_EXTENSIONS = (".parquet", ".orc", ".hfile")
_LOG_FILE = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?$")
_PARTITION_METADATA = ".hoodie_partition_metadata"
_META_PREFIX = "_hoodie_"

_MDT_COMPACTION_V1 = re.compile(r"^(\d+)\.commit$")  # .hoodie/metadata/.hoodie/<t>.commit
_MDT_COMPACTION_V2 = re.compile(r"^(\d+)_(\d+)\.commit$")  # .hoodie/metadata/.hoodie/timeline/<t>_<c>.commit

SKIPPING_ON: Mapping[str, str] = {"hoodie.metadata.enable": "true", "hoodie.enable.data.skipping": "true"}
SKIPPING_OFF: Mapping[str, str] = {"hoodie.metadata.enable": "false", "hoodie.enable.data.skipping": "false"}


class MetadataCheckUnavailable(Exception):
    """The check cannot run on this bundle or table (e.g. column stats on Hudi 0.15, or a table without them)."""


# -- hoodie.properties and the MDT timeline ---------------------------------------------------------------------


def metadata_partitions(base: Path | StorageSpec) -> list[str]:
    """The MDT partitions the table says are built (``hoodie.table.metadata.partitions``), sorted."""
    raw = read_hoodie_properties(base).get("hoodie.table.metadata.partitions", "")
    return sorted(p.strip() for p in raw.split(",") if p.strip())


def mdt_compactions(base: Path) -> list[str]:
    """The instant times of the completed compactions in the MDT's active timeline, sorted (layout 1:
    ``.hoodie/metadata/.hoodie/<t>.commit``; layout 2: ``.hoodie/metadata/.hoodie/timeline/<t>_<c>.commit``). A
    completed ``commit`` in the MDT, a merge-on-read table written by deltacommits, is a compaction."""
    meta = base / ".hoodie" / "metadata" / ".hoodie"
    found: set[str] = set()
    for folder, pattern in ((meta, _MDT_COMPACTION_V1), (meta / "timeline", _MDT_COMPACTION_V2)):
        if folder.is_dir():
            found.update(m.group(1) for name in os.listdir(folder) if (m := pattern.match(name)))
    return sorted(found)


# -- table names ------------------------------------------------------------------------------------------------


def _local(location: str) -> Path:
    """A ``file:`` URI or a path as a resolved local path."""
    text = re.sub(r"^file:(//)?", "", location)
    return Path(text).resolve()


def _same_location(location: str, base: Path | StorageSpec | str) -> bool:
    if isinstance(base, Path):
        return _local(location) == base.resolve()
    uri = base.uri if isinstance(base, StorageSpec) else base
    return location.rstrip("/") == uri.rstrip("/")


def ensure_registered(worker: HudiWorker, name: str, base: Path | StorageSpec | str) -> None:
    """Make ``name`` refer to the table at ``base`` (a folder, or a URI or ``StorageSpec`` the worker reaches, such
    as ``s3a://hudi/t``) in the worker's session (registered by the first call); a name already given to another
    table fails rather than check the wrong table."""
    if not any(r.get("tableName") == name for r in worker.sql(f"SHOW TABLES LIKE '{name}'")):
        worker.register_table(name, base.uri if isinstance(base, StorageSpec) else base)
        return
    rows = worker.sql(f"DESCRIBE TABLE EXTENDED {name}")
    location = next((r["data_type"] for r in rows if r.get("col_name") == "Location"), None)
    if location is None or not _same_location(location, base):
        raise ValueError(f"table name {name!r} is registered for {location}, not {base}: use a fresh name per table")


# -- validate_metadata_table_files ------------------------------------------------------------------------------


def committed_base_files(table: HoodieTable) -> dict[str, dict[str, int]]:
    """Every base file on storage of a completed instant, by partition (what the files partition must list until
    the cleaner deletes replaced files)."""
    completed = {i.time for i in table.timeline().completed()}
    out: dict[str, dict[str, int]] = {}
    for bf in table.list_base_files():
        if bf.instant_time in completed:
            out.setdefault(bf.partition_path, {})[bf.file_name] = bf.size
    return out


def _is_data_file(name: str) -> bool:
    if name.endswith(".crc") or name.startswith(_PARTITION_METADATA):
        return False
    if name.startswith("."):
        return _LOG_FILE.match(name) is not None
    return name.endswith(_BASE_FILE_EXTENSIONS)


def storage_files(base: Path | StorageSpec) -> dict[str, dict[str, int]]:
    """The data files in storage by partition (``""`` for a non-partitioned table): file name -> size. Partitions
    are the folders holding a ``.hoodie_partition_metadata`` (as Hudi's storage listing finds them). ``base``: a
    local folder, or a ``StorageSpec`` listed through the daemon's ``open_storage`` (an object store)."""
    if not isinstance(base, Path):
        return _listed_files(open_storage(base))
    found: dict[str, dict[str, int]] = {}
    for folder, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if not any(n.startswith(_PARTITION_METADATA) and not n.endswith(".crc") for n in names):
            continue
        partition = Path(folder).relative_to(base).as_posix()
        found[partition if partition != "." else ""] = {
            n: os.path.getsize(os.path.join(folder, n)) for n in names if _is_data_file(n)
        }
    return found


def _listed_files(storage: Storage) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    folders = [""]
    while folders:
        folder = folders.pop()
        entries = storage.list_dir(folder)
        folders += [e.path for e in entries if e.is_dir and not e.name.startswith(".")]
        files = [e for e in entries if not e.is_dir]
        if any(e.name.startswith(_PARTITION_METADATA) and not e.name.endswith(".crc") for e in files):
            found[folder] = {e.name: e.size for e in files if _is_data_file(e.name)}
    return found


@dataclass(frozen=True)
class MetadataValidation:
    """The MDT's file listing compared with storage, file by file, in the columns of Hudi's procedure.

    ``rows``: one per file in the MDT or in storage (``is_present_in_fs``/``fs_size`` from our own listing of
    storage, ``is_present_in_metadata``/``metadata_size`` from the procedure's verbose rows); ``differences``: the
    rows where presence or size differ, plus any row Hudi itself reported as a mismatch; ``procedure_rows``: the
    procedure's rows as returned (both sides read from the MDT, see the module docstring); the partition lists of
    the MDT (``show_metadata_table_partitions``) and of storage."""

    table: str
    rows: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    procedure_rows: list[dict[str, Any]]
    metadata_partitions: list[str]
    storage_partitions: list[str]

    @property
    def clean(self) -> bool:
        return not self.differences and self.metadata_partitions == self.storage_partitions

    def assert_clean(self) -> None:
        """Raise ``AssertionError`` naming every difference between the MDT and storage."""
        if self.clean:
            return
        lines = [json.dumps(row, sort_keys=True) for row in self.differences]
        if self.metadata_partitions != self.storage_partitions:
            lines.append(f"partitions: metadata {self.metadata_partitions} vs storage {self.storage_partitions}")
        raise AssertionError(f"the metadata table of {self.table} differs from storage:\n" + "\n".join(lines))


def _differs(row: Mapping[str, Any]) -> bool:
    return bool(row["is_present_in_fs"] != row["is_present_in_metadata"] or row["fs_size"] != row["metadata_size"])


def validate_files(worker: HudiWorker, base: Path | StorageSpec, name: str, *, uri: str | None = None
                   ) -> MetadataValidation:
    """``CALL validate_metadata_table_files(table => name, verbose => true)`` for the MDT's view of every file, set
    against storage. Proves that the MDT's ``files`` partition lists exactly the data files in storage, with their
    sizes, in every partition, and that it lists exactly the partitions in storage (run it with no writer in
    flight: files of a pending instant are in storage and rightly not in the MDT).

    ``uri``: where Hudi finds the table when ``base`` is a copy of it (a table on an object store, ``base`` its
    current mirror, ``tests/harness/s3_mirror.py``)."""
    ensure_registered(worker, name, base if uri is None else uri)
    procedure_rows = worker.sql(f"CALL validate_metadata_table_files(table => '{name}', verbose => true)")
    in_metadata: dict[tuple[str, str], int] = {}
    for row in procedure_rows:
        if row["is_present_in_metadata"]:
            in_metadata[(row["partition"], row["file_name"])] = int(row["metadata_size"])
    storage = storage_files(base)
    in_storage = {(p, f): size for p, files in storage.items() for f, size in files.items()}
    rows = [
        {
            "partition": partition,
            "file_name": file_name,
            "is_present_in_fs": (partition, file_name) in in_storage,
            "is_present_in_metadata": (partition, file_name) in in_metadata,
            "fs_size": in_storage.get((partition, file_name), 0),
            "metadata_size": in_metadata.get((partition, file_name), 0),
        }
        for partition, file_name in sorted(in_storage.keys() | in_metadata.keys())
    ]
    differences = [r for r in rows if _differs(r)]
    differences += [{**r, "reported_by": "hudi"} for r in procedure_rows if _differs(r)]
    listed = worker.sql(f"CALL show_metadata_table_partitions(table => '{name}')")
    return MetadataValidation(
        table=name,
        rows=rows,
        differences=differences,
        procedure_rows=procedure_rows,
        metadata_partitions=sorted(str(r["partition"]) for r in listed),
        storage_partitions=sorted(storage),
    )


# -- show_metadata_table_column_stats ---------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class ColumnStat:
    """One column of one base file: min and max as Hudi prints them (Java's ``String.valueOf``; ``"null"`` when
    the file has no value), and the null count."""

    file_name: str
    column_name: str
    min_value: str | None
    max_value: str | None
    null_count: int


def _data_columns(base: Path) -> list[str]:
    """The non-meta columns of the table's base files (the schema of the newest parquet file)."""
    newest = max((p for p in base.rglob("*.parquet") if ".hoodie" not in p.relative_to(base).parts),
                 key=lambda p: p.stat().st_mtime, default=None)
    if newest is None:
        raise MetadataCheckUnavailable(f"{base} has no parquet base file")
    return [n for n in pq.read_schema(newest).names if not n.startswith(_META_PREFIX)]


def column_stats(
    worker: HudiWorker,
    base: Path,
    name: str,
    files: Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
) -> list[ColumnStat]:
    """The MDT's ``column_stats`` of the latest base files (``files``: only these file names), for ``columns``
    (default: the table's non-meta columns), sorted. Only Hudi 1.x has the procedure:
    :class:`MetadataCheckUnavailable` on 0.15, and on a table whose MDT has no ``column_stats`` partition."""
    if "column_stats" not in metadata_partitions(base):
        raise MetadataCheckUnavailable(f"{base} has no column_stats metadata partition ({metadata_partitions(base)})")
    ensure_registered(worker, name, base)
    wanted = list(columns) if columns else _data_columns(base)
    try:
        rows = worker.sql(f"CALL show_metadata_table_column_stats(table => '{name}', "
                          f"targetColumns => '{','.join(wanted)}')")
    except HudiRequestError as exc:
        if "show_metadata_table_column_stats is not exists" in str(exc.java_message):
            raise MetadataCheckUnavailable(
                f"Hudi {worker.setup.hudi_version} has no show_metadata_table_column_stats procedure") from exc
        raise
    keep = None if files is None else set(files)
    return sorted(
        ColumnStat(r["file_name"], r["column_name"], r["min_value"], r["max_value"], int(r["null_number"]))
        for r in rows
        if keep is None or r["file_name"] in keep
    )


def _java_string(value: Any) -> str:
    """``value`` as Java's ``String.valueOf`` prints the boxed value Hudi keeps (for the types handled here)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):  # Double.toString: shortest digits, plain in [1e-3, 1e7), else d.dddE<n>
        if math.isnan(value) or math.isinf(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        if value == 0 or 1e-3 <= abs(value) < 1e7:
            return repr(value)
        number = decimal.Decimal(repr(value))
        digits = "".join(map(str, number.as_tuple().digits)).rstrip("0") or "0"
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{number.adjusted()}"
    raise TypeError(f"no Java rendering for {type(value).__name__} values here")


def _renderable(column: str, values: pa.ChunkedArray) -> None:
    kind = values.type
    if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_boolean(kind) or pa.types.is_float64(kind)):
        raise TypeError(f"column {column!r} is {kind}: compare its stats otherwise (integers, strings, booleans and "
                        "doubles only)")


def parquet_column_stats(base: Path, files: Iterable[str], columns: Sequence[str]) -> list[ColumnStat]:
    """The true min, max and null count of ``columns`` in the named base files (found under ``base``), computed by
    pyarrow from the values themselves (not the footers), rendered as Hudi prints them; sorted."""
    by_name = {p.name: p for p in base.rglob("*") if p.is_file() and ".hoodie" not in p.relative_to(base).parts}
    stats: list[ColumnStat] = []
    for file_name in files:
        table = pq.read_table(by_name[file_name], columns=list(columns))
        for column in columns:
            values: pa.ChunkedArray = table.column(column)
            _renderable(column, values)
            bounds = pc.min_max(values)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            stats.append(ColumnStat(file_name, column, _java_string(low), _java_string(high), values.null_count))
    return sorted(stats)


# -- data skipping ----------------------------------------------------------------------------------------------


def _relative(base: Path, files: Iterable[str]) -> list[str]:
    root = base.resolve()
    return sorted(_local(f).relative_to(root).as_posix() for f in files)


def _sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


@dataclass(frozen=True)
class SkippingResult:
    """A filtered read through the MDT with data skipping, against the same filter over a storage-listed scan
    without it.

    ``files_scanned``: Spark's "number of files read" (the ``numFiles`` metric of the FileSourceScanExec, the files
    Hudi's file index kept after partition pruning and data skipping) of the skipping read;
    ``files_scanned_without_skipping``: the same metric for the baseline read; ``files_total``: the files of the
    latest snapshot (the baseline's file index, listed from storage); ``snapshot_files_metadata``: the same list as
    the skipping read's file index listed it through the MDT (relative paths)."""

    predicate: str
    rows: list[dict[str, Any]]
    expected: list[dict[str, Any]]
    files_scanned: int
    files_scanned_without_skipping: int
    files_total: int
    snapshot_files_metadata: list[str]
    snapshot_files_storage: list[str]
    scans: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.rows == self.expected and self.snapshot_files_metadata == self.snapshot_files_storage

    def assert_exact(self) -> None:
        """Raise ``AssertionError`` if the skipping read's rows, or its snapshot's files, differ from the baseline."""
        problems = []
        if self.rows != self.expected:
            problems.append(f"{len(self.rows)} rows with data skipping, {len(self.expected)} without; "
                            f"only with: {[r for r in self.rows if r not in self.expected][:5]}; "
                            f"only without: {[r for r in self.expected if r not in self.rows][:5]}")
        if self.snapshot_files_metadata != self.snapshot_files_storage:
            problems.append(f"snapshot files through the MDT {self.snapshot_files_metadata} vs storage "
                            f"{self.snapshot_files_storage}")
        if problems:
            raise AssertionError(f"data skipping read of {self.predicate!r} is not exact: " + "; ".join(problems))


def _files_read(scans: Sequence[Mapping[str, Any]]) -> int:
    """The files the scans of a read read; a scan without the metric fails rather than count as none."""
    missing = [s for s in scans if "numFiles" not in s]
    if missing:
        raise AssertionError(f"file scans without a numFiles metric: {missing}")
    return sum(int(s["numFiles"]) for s in scans)


def data_skipping_check(
    worker: HudiWorker,
    base: Path,
    predicate_sql: str,
    *,
    columns: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
) -> SkippingResult:
    """Read ``base`` filtered by ``predicate_sql`` twice: through the MDT with data skipping
    (``hoodie.metadata.enable=true``, ``hoodie.enable.data.skipping=true``, plus ``options``) and listed from storage
    without it. Proves, with :meth:`SkippingResult.assert_exact`, that the index-driven read returns exactly the
    rows of the plain one; ``files_scanned`` against ``files_total`` shows what it skipped."""
    rows, stats = worker.read_stats(base, predicate=predicate_sql, options={**SKIPPING_ON, **(options or {})},
                                    columns=columns)
    expected, baseline = worker.read_stats(base, predicate=predicate_sql, options=SKIPPING_OFF, columns=columns)
    return SkippingResult(
        predicate=predicate_sql,
        rows=_sorted_rows(rows),
        expected=_sorted_rows(expected),
        files_scanned=_files_read(stats["scans"]),
        files_scanned_without_skipping=_files_read(baseline["scans"]),
        files_total=len(baseline["input_files"]),
        snapshot_files_metadata=_relative(base, stats["input_files"]),
        snapshot_files_storage=_relative(base, baseline["input_files"]),
        scans=list(stats["scans"]),
    )
