"""The Apache Hudi releases the interop tests run against: the one place their versions are pinned.

Each setup is a released Hudi Spark bundle from Maven Central plus the PySpark release it runs on (in its own
virtual environment, apart from the daemon's PySpark 4). Spark 4 bundles of Hudi are not served by Maven Central,
so both setups run on Spark 3.5; the table they write is what the daemon sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class MavenArtifact:
    """One jar on Maven Central, named by its coordinates."""

    group_id: str
    artifact_id: str
    version: str

    @property
    def coordinates(self) -> str:
        """``group:artifact:version``, as ``mvn dependency:copy -Dartifact=...`` takes it."""
        return f"{self.group_id}:{self.artifact_id}:{self.version}"

    @property
    def jar_name(self) -> str:
        """The file name Maven gives the jar."""
        return f"{self.artifact_id}-{self.version}.jar"


@dataclass(frozen=True, slots=True)
class HudiSetup:
    """A released Hudi Spark bundle, the PySpark it runs on, and the writer options that keep tables at version 6."""

    name: str
    hudi_version: str
    bundle: MavenArtifact
    pyspark_version: str
    table_v6_options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    notes: str = ""


def _frozen(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


# One PySpark for both bundles, so both share one virtual environment. 3.5.1 is the Spark Hudi 0.15.0 was built
# against (1.2.0 was built against 3.5.5 and runs on 3.5.1 too); later 3.5.x releases changed internal APIs that
# 0.15.0 calls in places (apache/hudi#12099).
PYSPARK_VERSION = "3.5.1"

HUDI_0_15 = HudiSetup(
    name="hudi-0.15",
    hudi_version="0.15.0",
    bundle=MavenArtifact("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "0.15.0"),
    pyspark_version=PYSPARK_VERSION,
    table_v6_options=_frozen({}),
    notes="Writes table version 6, timeline layout 1 by default.",
)

HUDI_1_2 = HudiSetup(
    name="hudi-1.2",
    hudi_version="1.2.0",
    bundle=MavenArtifact("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "1.2.0"),
    pyspark_version=PYSPARK_VERSION,
    table_v6_options=_frozen(
        {
            "hoodie.write.table.version": "6",
            "hoodie.write.auto.upgrade": "false",
        }
    ),
    notes=(
        "Creates tables of a newer version by default; the options above make it create and keep version 6 with "
        "timeline layout 1. Its hoodie.properties still differs from 0.x's: hoodie.archivelog.folder=history, "
        "hoodie.table.ordering.fields instead of hoodie.table.precombine.field, hoodie.table.keygenerator.type "
        "instead of hoodie.table.keygenerator.class."
    ),
)

SETUPS: tuple[HudiSetup, ...] = (HUDI_0_15, HUDI_1_2)

# How writers treat upserts into file groups under a pending clustering plan of the daemon's: let them through
# (the default SparkRejectUpdateStrategy fails them), never roll the plan back, and resolve conflicts preferring
# the writer (with the default Simple strategy Hudi 1.2 fails them at its commit, counting every pending plan as a
# concurrent writer); the daemon leaves the moved group out when it commits (tests/interop/test_update_strategies.py).
ALLOW_UPDATES_OPTIONS: Mapping[str, str] = _frozen(
    {
        "hoodie.clustering.updates.strategy":
            "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy",
        "hoodie.clustering.rollback.pending.replacecommit.on.conflict": "false",
        "hoodie.write.lock.conflict.resolution.strategy":
            "org.apache.hudi.client.transaction.PreferWriterConflictResolutionStrategy",
    }
)

# What the project tells users to set on every Hudi writer that shares a table with the daemon.
PROJECT_WRITER_OPTIONS: Mapping[str, str] = _frozen(
    {
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.clustering.inline": "false",
        "hoodie.clustering.async.enabled": "false",
        "hoodie.clustering.schedule.inline": "false",
        "hoodie.metadata.enable": "false",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        **ALLOW_UPDATES_OPTIONS,
    }
)


def setup_named(name: str) -> HudiSetup:
    """The setup called ``name`` (e.g. ``"hudi-0.15"``); ``KeyError`` lists the known names."""
    for setup in SETUPS:
        if setup.name == name:
            return setup
    raise KeyError(f"unknown Hudi setup {name!r}; known: {', '.join(s.name for s in SETUPS)}")


def shared_table_writer_options(setup: HudiSetup) -> dict[str, str]:
    """The project's writer settings plus what ``setup`` needs to keep the table at version 6."""
    return {**PROJECT_WRITER_OPTIONS, **setup.table_v6_options}


CONFLICT_RESOLUTION_KEY = "hoodie.write.lock.conflict.resolution.strategy"


def table_service_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` for a job that runs Hudi's own clustering (``CALL run_clustering``) rather than ingestion:
    without the conflict resolution strategy, whose PreferWriterConflictResolutionStrategy makes Hudi 1.2's
    clustering fail its own commit on a version-6 table (``HoodieClusteringException``: it finds its own
    requested plan a conflicting operation)."""
    return {k: v for k, v in options.items() if k != CONFLICT_RESOLUTION_KEY}
