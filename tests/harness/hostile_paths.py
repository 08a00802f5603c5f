"""Hostile paths planted where a table's timeline names paths, and the CLI command that reads each: the tests that
show every such path refused in one line, with nothing beside the table touched, on local disk and on S3.

The paths are the usual escapes (`HOSTILE_PATHS`); the canary the tests keep beside a table is named ``x``, so
``../x`` names it exactly. Each `Place` writes a path, verbatim, into one field of a table's files:

- ``plan-partition``: a requested clustering plan whose slice's ``partitionPath`` names it (and its
  ``dataFilePath`` a base file in it), read by ``execute --instant``;
- ``plan-file``: a plan whose slice's ``dataFilePath`` names a base file in it (the slice's partition is the
  table's), read by ``execute --instant``;
- ``write-stats``: the newest commit's write stat ``path``, read by ``cluster --force`` (which checks the sort
  column against the newest commit's schema);
- ``rollback-plan``: an interrupted rollback of a pending clustering whose ``filesToBeDeleted`` names it (beside a
  file the clustering wrote), read by ``rollback --instant``;
- ``marker``: a marker (Hudi's timeline-server ``MARKERS0``) of a pending clustering naming it as the data file
  written, read by ``rollback --instant``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hudi_clusterd.domain.instant import Action, Instant, State
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.formats.avro import _requested_replace_writer, encode_ocf, encode_record
from hudi_clusterd.ops.schedule import schedule
from hudi_clusterd.table.markers import marker_dir
from tests.builders import TableGen, make_policy

__all__ = ["CANARY", "HOSTILE_PATHS", "PLACES", "Planted", "as_uri", "plant"]

CANARY = "x"
"""The name of the canary beside a table (``../x`` from the table names it)."""

HOSTILE_PATHS: dict[str, str] = {
    "dotdot": "../x",
    "absolute": "/etc/x",
    "backslash": "a\\..\\b",
    "other-bucket": "s3://other-bucket/x",
    "nul": "x\x00",
}

PLACES = ("plan-partition", "plan-file", "write-stats", "rollback-plan", "marker")


@dataclass(frozen=True, slots=True)
class Planted:
    """A hostile path in a table's files: the CLI arguments that read it, and the name of the file naming it."""

    argv: list[str]
    file: str


def as_uri(base_uri: str, path: str) -> str:
    """``path`` as a field holding a full path names it: a URI or an absolute path as it is, anything else below
    the table's base URI (``../x`` becomes ``<base>/../x``)."""
    return path if "://" in path or path.startswith("/") else f"{base_uri}/{path}"


def plant(gen: TableGen, place: str, path: str, props: str) -> Planted:
    """Write ``path`` into ``place`` (see the module docstring) of ``gen``'s table; ``props`` is the properties file
    the command reads (the table's lock, the sort column)."""
    base = gen.table.storage.base_uri
    common = ["--base-path", base, "--props", props]
    if place in ("plan-partition", "plan-file"):
        t = _plan_naming(gen, path, partition_too=place == "plan-partition")
        return Planted(["execute", *common, "--instant", t], f"{t}.replacecommit.requested")
    if place == "write-stats":
        return Planted(["cluster", *common, "--force"], _commit_naming(gen, path))
    t = _pending_clustering(gen)
    if place == "rollback-plan":
        return Planted(["rollback", *common, "--instant", t], _rollback_plan_naming(gen, t, path))
    if place == "marker":
        folder = marker_dir(t)
        gen.table.storage.put(f"{folder}/MARKERS.type", b"TIMELINE_SERVER_BASED")
        gen.table.storage.put(f"{folder}/MARKERS0", f"{path}.marker.CREATE\n".encode())
        return Planted(["rollback", *common, "--instant", t], "MARKERS0")
    raise ValueError(f"unknown place {place!r}")


def _plan_naming(gen: TableGen, path: str, *, partition_too: bool) -> str:
    planned = schedule(gen.table, make_policy(), force=True, dry_run=True).plan
    assert planned is not None
    record: dict[str, Any] = RequestedReplaceMetadata.for_plan(planned).to_avro()
    first = record["clusteringPlan"]["inputGroups"][0]["slices"][0]
    name = first["dataFilePath"].rsplit("/", 1)[-1]  # a base file's name, in a folder the path names
    first["dataFilePath"] = as_uri(gen.table.storage.base_uri, f"{path}/{name}")
    if partition_too:
        first["partitionPath"] = path
    text, parsed = _requested_replace_writer()
    t = gen.next_time()
    gen.table.timeline_store.create(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED),
                                    encode_ocf(text, parsed, record))
    return t


def _commit_naming(gen: TableGen, path: str) -> str:
    store = gen.table.timeline_store
    newest = gen.table.timeline().commits().completed().instants[-1]
    rel = store.path(newest)
    doc = json.loads(gen.table.storage.read_bytes(rel))
    stats = next(iter(doc["partitionToWriteStats"].values()))
    stats[0]["path"] = path
    gen.table.storage.put(rel, json.dumps(doc).encode())
    return rel.rsplit("/", 1)[-1]


def _pending_clustering(gen: TableGen) -> str:
    """A clustering left inflight by a dead executor (its plan saved, nothing written)."""
    scheduled = schedule(gen.table, make_policy(), force=True)
    assert scheduled.instant is not None
    gen.table.timeline_store.create(Instant(scheduled.instant, Action.REPLACE_COMMIT, State.INFLIGHT), b"")
    return scheduled.instant


def _rollback_plan_naming(gen: TableGen, t: str, path: str) -> str:
    storage = gen.table.storage
    own = f"p1/0000own-0_0-1-2_{t}.parquet"  # a file the clustering wrote
    storage.put(own, b"written by the failed clustering")
    plan = {"instantToRollback": {"commitTime": t, "action": Action.REPLACE_COMMIT.value},
            "RollbackRequests": [{"partitionPath": "p1", "fileId": "0000own-0", "latestBaseInstant": t,
                                  "filesToBeDeleted": [storage.uri(own), as_uri(storage.base_uri, path)],
                                  "logBlocksToBeDeleted": None}],
            "version": 1}
    r = gen.next_time()
    gen.table.timeline_store.create(Instant(r, Action.ROLLBACK, State.REQUESTED),
                                    encode_record("HoodieRollbackPlan", plan))
    return f"{r}.rollback.requested"
