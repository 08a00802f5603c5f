"""The Apache Hudi setups every interop test runs for, and the session's Hudi workers.

Every test that uses ``hudi_setup`` (directly, or through ``apache_hudi``) runs once per setup of
:data:`tests.harness.hudi_versions.SETUPS` except those writing table version 8: Hudi 0.15 (version 6), Hudi 1.2
keeping version 6, Hudi 1.2 writing its default version 9. A test marked ``hudi_v8`` also runs for Hudi 1.2
writing version 8 (same timeline layout as 9, other table properties); the ids name the setup (``hudi-1.2-v9``).

A module may list in ``SLOW_SETUPS`` the setups whose runs of it only the long run (``-m slow``) makes: Hudi 1.2
keeping version 6 repeats, for the harness, lock, update-strategy, our-tables, plans-and-services and streaming
tests, what Hudi 0.15 (version 6) and Hudi 1.2 (version 9) show between them; Hudi 1.2 writing version 8 repeats
version 9's timeline layout in the our-tables tests.

One worker (one JVM) per bundle serves every setup of that bundle, so Hudi 1.2's three setups share one; pytest
groups the tests by setup (a session-scoped parameter), and at most one worker runs at a time. A setup whose cache
is missing skips its tests, or fails them under ``CLUSTERD_REQUIRE_HUDI=1`` (see ``tests/harness/apache_hudi.py``).

Tables are shared the same way where that is sound: ``events_table`` gives each test a copy of the three-insert
table its setup's worker writes once per session (the plan and update-strategy tests start from it);
``mor_written`` gives the merge-on-read workload table each release writes once per session, with its snapshot
read and a compacted copy (the MOR merge-oracle and MOR clustering tests read and copy it, never write to it).

Tests marked ``hudi_s3`` run Hudi on the S3 test server through ``s3_hudi`` (``tests/harness/hudi_s3.py``): a worker
of their own profile, so they run after the other tests of their bundle (one more worker start per bundle).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import EVENTS_SCHEMA, event_rows
from tests.harness.apache_hudi import HudiWorker, HudiWorkers, events_writer_options
from tests.harness.daemon_harness import assert_default_metadata_table, assert_layout
from tests.harness.hudi_s3 import s3_worker
from tests.harness.hudi_versions import HUDI_0_15, SETUPS, HudiSetup
from tests.harness.mor_clustered import WrittenMor, write_mor_table

EventsTable = tuple[Path, list[list[dict[str, Any]]]]
EVENTS_BATCHES = 3

V8_MARKER = "hudi_v8"
S3_MARKER = "hudi_s3"

# Every interop test's setups; a test marked hudi_v8 runs for every setup. The version-8 setup comes last in
# SETUPS, so the setups common to both lists keep their place (pytest groups tests by the setup's value anyway).
DEFAULT_SETUPS: tuple[HudiSetup, ...] = tuple(s for s in SETUPS if s.table_version != 8)
V8_SETUPS: tuple[HudiSetup, ...] = SETUPS


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{V8_MARKER}: also run for Hudi 1.2 writing table version 8 (tests/interop/conftest.py)"
    )
    config.addinivalue_line(
        "markers", f"{S3_MARKER}: runs Hudi on the S3 test server (its own worker, after its bundle's other tests)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hudi_setup" not in metafunc.fixturenames:
        return
    setups = V8_SETUPS if metafunc.definition.get_closest_marker(V8_MARKER) else DEFAULT_SETUPS
    # a module may name setups whose runs of it are long-run only (``-m slow``): SLOW_SETUPS = ("hudi-1.2-v6",)
    slow = set(getattr(metafunc.module, "SLOW_SETUPS", ()))
    params = [pytest.param(s, marks=pytest.mark.slow) if s.name in slow else s for s in setups]
    metafunc.parametrize("hudi_setup", params, ids=[s.name for s in setups], indirect=True, scope="session")


def _runs_hudi_0_15(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return any(isinstance(p, HudiSetup) and p.hudi_version == HUDI_0_15.hudi_version for p in params)


@pytest.hookimpl(trylast=True)  # after pytest grouped the tests by their session-scoped setup
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The interop tests of Hudi 0.15's bundle first, then the others (Hudi 1.2's, whichever way they name their
    setup: ``hudi_setup``, a module's own parameter, or a fixed setup), each group in pytest's order, its tests on
    S3 (marked ``hudi_s3``) last: at most one worker runs at a time, so each bundle's worker (and its worker on S3)
    starts once instead of at every switch (five starts before)."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in item.path.parents]
    ordered = sorted((items[i] for i in slots),
                     key=lambda item: (not _runs_hudi_0_15(item), item.get_closest_marker(S3_MARKER) is not None))
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


@pytest.fixture(scope="session")
def hudi_setup(request: pytest.FixtureRequest) -> HudiSetup:
    """The Hudi setup under test (parametrises every test that uses it, see :func:`pytest_generate_tests`)."""
    setup: HudiSetup = request.param
    return setup


@pytest.fixture(scope="session")
def hudi_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HudiWorkers]:
    """The session's Hudi workers, one per bundle, at most one running; stopped when the session ends."""
    workers = HudiWorkers(lambda name: tmp_path_factory.mktemp(f"{name}-worker"))
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture(scope="session")
def apache_hudi(hudi_setup: HudiSetup, hudi_workers: HudiWorkers) -> HudiWorker:
    """A running Hudi worker for ``hudi_setup``: its bundle's worker, seen as a worker of this setup."""
    return hudi_workers.for_setup(hudi_setup)


@pytest.fixture(scope="session")
def s3_hudi(hudi_workers: HudiWorkers, s3_server: Any) -> Callable[[HudiSetup], HudiWorker]:
    """Factory: the running worker of a setup whose writers reach the S3 test server (``s3a://hudi/...``) and take
    the DynamoDB and ZooKeeper locks (``tests/harness/hudi_s3.py``); one per bundle, shared by the session."""
    return lambda setup: s3_worker(hudi_workers, setup, s3_server)


@pytest.fixture(scope="session")
def _events_originals(tmp_path_factory: pytest.TempPathFactory) -> dict[HudiSetup, Path]:
    """The events table each setup's worker wrote, by setup (written on first use, never written to again)."""
    return {}


@pytest.fixture
def events_table(apache_hudi: HudiWorker, _events_originals: dict[HudiSetup, Path],
                 tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> EventsTable:
    """A table Hudi wrote in three inserts of ``tests.builders.event_rows`` (two new file groups each, one per
    partition; ``events_writer_options``) and the batches it wrote, the test's own to change: a copy of the table
    the setup's worker wrote once per session. A copy is the table (Hudi keeps no absolute path in it; the copy
    keeps the files' modification times), and saves each test three writes through Hudi."""
    setup = apache_hudi.setup
    original = _events_originals.get(setup)
    if original is None:
        original = tmp_path_factory.mktemp(f"events-{setup.name}") / "events"
        options = {**events_writer_options(setup), "hoodie.datasource.write.operation": "insert"}
        for b in range(EVENTS_BATCHES):
            apache_hudi.write(event_rows(b), original, options, schema=EVENTS_SCHEMA)
        # the setup writes what it says: its table version, timeline layout and default metadata table (checked
        # here in every run; tests/interop/test_hudi_harness.py checks it per harness feature in the long run)
        assert_layout(original, setup)
        assert_default_metadata_table(original, setup)
        _events_originals[setup] = original
    base = tmp_path / "events"
    shutil.copytree(original, base)
    return base, [event_rows(b) for b in range(EVENTS_BATCHES)]


@pytest.fixture(scope="session")
def mor_written(hudi_workers: HudiWorkers, tmp_path_factory: pytest.TempPathFactory
                ) -> Callable[[HudiSetup], WrittenMor]:
    """Factory: the merge-on-read workload table ``setup``'s worker wrote, its snapshot read and a copy Hudi
    compacted (``tests/harness/mor_clustered.py``), written on first use, once per session; read or copy it, never
    write to it."""
    written: dict[str, WrittenMor] = {}

    def get(setup: HudiSetup) -> WrittenMor:
        if setup.name not in written:
            hudi = hudi_workers.for_setup(setup)
            written[setup.name] = write_mor_table(hudi, tmp_path_factory.mktemp(f"mor_{setup.name}"))
        return written[setup.name]

    return get
