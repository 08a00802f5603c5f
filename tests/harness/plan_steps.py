"""Plans crossing both ways between Apache Hudi and the daemon, as steps shared by the tests on a local table
(``tests/interop/test_plans_and_table_services.py``) and on S3 (``tests/interop/test_table_services_s3.py``).

A step takes a :class:`SharedTable`: where Hudi and the daemon reach the table (a folder, or an ``s3a://`` URI),
how to see its files as a local folder at that moment (the folder itself, or an ``S3Mirror`` brought up to date),
Hudi's writer options, the daemon's properties file (the writers' lock, the clustering keys), and how hudi-rs
reaches it. The daemon's side runs as its CLI (``clusterd``), Hudi's through the worker's ``run_clustering``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.formats.avro import decode_requested_replace
from tests.builders import events_by_key, expected_events
from tests.harness.apache_hudi import HudiWorker, read_hoodie_properties
from tests.harness.daemon_harness import (
    clusterd,
    clustering_plan_path,
    clusterings,
    instant_names,
    pending_clusterings,
    replacecommits,
)
from tests.harness.hudi_rs_checks import hudi_rs_rows
from tests.harness.hudi_versions import table_service_options
from tests.harness.metadata_checks import validate_files

Batches = list[list[dict[str, Any]]]


@dataclass
class SharedTable:
    """A table Hudi's writers and the daemon share, as the steps reach it."""

    uri: str  # what Hudi's writers and procedures, the daemon and hudi-rs are given
    files: Callable[[], Path]  # the table's files as a local folder, as they are now
    writer: Mapping[str, str]  # Hudi's writer options (its lock among them)
    props: Path  # the daemon's properties file: the writers' lock, hoodie.clustering.* keys
    rs_options: Mapping[str, str] | None = None  # hudi-rs's storage options (None: a local folder)
    names: list[str] = field(default_factory=list)  # the names the table was registered under in Hudi's session

    @property
    def is_local(self) -> bool:
        return not self.uri.startswith(("s3://", "s3a://"))

    def validate(self, hudi: HudiWorker, what: str) -> None:
        """Hudi's metadata table lists exactly the data files storage holds (``validate_files``), registered under
        a fresh name (the worker's catalog outlives the test)."""
        name = f"{what}_{uuid.uuid4().hex[:8]}"
        self.names.append(name)
        validate_files(hudi, self.files(), name, uri=None if self.is_local else self.uri).assert_clean()


def local_table(base: Path, writer: Mapping[str, str], sort_columns: str = "val") -> SharedTable:
    """A table in the folder ``base``, the daemon's properties beside it sorting its plans by ``sort_columns``."""
    props = base.parent / "clustering.properties"
    props.write_text(f"hoodie.clustering.plan.strategy.sort.columns={sort_columns}\n")
    return SharedTable(str(base), lambda: base, writer, props)


def requested_plan(base: Path, instant: str) -> RequestedReplaceMetadata:
    """The requested plan of clustering ``instant``, decoded."""
    path = clustering_plan_path(base, instant)
    meta = decode_requested_replace(path.read_bytes(), str(path))
    assert meta is not None and meta.clustering_plan is not None
    return meta


def scheduled_instant(out: str) -> str:
    """The instant ``hudi-clusterd schedule`` printed (``scheduled clustering <T>: ...``)."""
    return out.split("scheduled clustering ", 1)[1].split(":", 1)[0]


def assert_reads(hudi: HudiWorker, table: SharedTable, batches: Sequence[Sequence[Mapping[str, Any]]],
                 columns: Sequence[str] | None = None) -> Any:
    """Hudi's snapshot holds exactly the rows ``batches`` leave, and so does hudi-rs's; returns Hudi's read (with
    ``columns`` when given, beside the events' own)."""
    expected = expected_events(batches)
    read = hudi.read(table.uri, columns=list(columns) if columns else None)
    events = read.drop_columns([c for c in read.column_names if c not in ("id", "part", "val", "ts")])
    assert events_by_key(events) == expected
    rs = hudi_rs_rows(table.uri, ["id", "part", "val", "ts"], "id", storage_options=table.rs_options)
    assert {r["id"]: (r["part"], r["val"], r["ts"]) for r in rs} == expected and len(rs) == len(expected)
    return read


def hudi_executes_our_plan(hudi: HudiWorker, table: SharedTable, batches: Batches) -> str:
    """hudi-clusterd schedules a plan (sorted by ``val``), Apache Hudi executes it; returns the plan's instant."""
    # Given a plan scheduled by hudi-clusterd (sorted by val), as the layout names it (T.replacecommit.requested
    # in .hoodie/ on version 6, T.clustering.requested in .hoodie/timeline/ on versions 8 and 9)
    out = clusterd("schedule", "--base-path", table.uri, "--force", "--props", str(table.props))
    instant = scheduled_instant(out)
    base = table.files()
    assert pending_clusterings(base) == [instant], instant_names(base)
    plan = requested_plan(base, instant).clustering_plan
    assert plan is not None and plan.strategy.work_order.sort_columns == ("val",)
    # When Apache Hudi executes it
    hudi.run_clustering(table.uri, "execute", options=table_service_options(table.writer), instants=[instant])
    # Then the plan completed as a clustering that replaced every planned file group, and every row reads once
    base = table.files()
    meta = replacecommits(base)[instant]
    assert meta["operationType"] == "CLUSTER"
    replaced = {(p, f) for p, ids in meta["partitionToReplaceFileIds"].items() for f in ids}
    assert replaced == set(plan.group_ids())
    assert_reads(hudi, table, batches)
    assert read_hoodie_properties(base)["hoodie.table.version"] == str(hudi.setup.table_version)
    table.validate(hudi, "ours_by_hudi")
    return instant


def daemon_executes_hudis_plan(hudi: HudiWorker, table: SharedTable, batches: Batches) -> str:
    """Apache Hudi schedules a plan, hudi-clusterd executes it; returns the plan's instant."""
    before = events_by_key(hudi.read(table.uri))
    earlier = clusterings(table.files())
    # Given a plan Apache Hudi scheduled without executing it
    hudi.run_clustering(table.uri, "schedule", options=table_service_options(table.writer))
    base = table.files()
    pending = pending_clusterings(base)
    assert len(pending) == 1, instant_names(base)
    instant = pending[0]
    assert clustering_plan_path(base, instant).exists(), instant_names(base)
    # When hudi-clusterd executes it
    out = clusterd("execute", "--base-path", table.uri, "--instant", instant, "--props", str(table.props))
    assert f"completed {instant}" in out, out
    # Then it is completed by us, Hudi (and hudi-rs) read every row once, with the commit times it had
    base = table.files()
    assert clusterings(base) == [*earlier, instant]
    after = assert_reads(hudi, table, batches, columns=["id", "part", "val", "ts", "_hoodie_commit_time"])
    assert events_by_key(after.drop_columns(["_hoodie_commit_time"])) == before == expected_events(batches)
    assert instant not in set(after.column("_hoodie_commit_time").to_pylist())
    assert read_hoodie_properties(base)["hoodie.table.version"] == str(hudi.setup.table_version)
    # and the metadata table Hudi keeps lists exactly what storage holds
    table.validate(hudi, "hudis_by_us")
    return instant
