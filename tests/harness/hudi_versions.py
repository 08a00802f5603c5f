"""The Apache Hudi releases the interop tests run against: the one place their versions are pinned.

Each setup is a released Hudi Spark bundle from Maven Central, the PySpark release it runs on (in its own virtual
environment, apart from the daemon's PySpark 4), and the table version its writers create and keep. Spark 4 bundles
of Hudi are not served by Maven Central, so every setup runs on Spark 3.5; the table they write is what the daemon
sees. Two bundles every interop test runs: Hudi 0.15 (table version 6) and Hudi 1.2 (versions 6, 8 and 9, one setup
each: the version is a writer option, so the three share one jar and one worker process). A third, Hudi 1.0.2 (table
version 8 as its users have it), is in ``ALL_SETUPS`` only: the tests that need it name it themselves.
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
class MavenDependency:
    """One direct dependency of a :class:`MavenRuntime`: the artifact, whether its own dependencies come along,
    and the ``group:artifact`` patterns (``*`` for any part) left out of them."""

    artifact: MavenArtifact
    transitive: bool = True
    exclusions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MavenRuntime:
    """A set of jars put beside a Hudi bundle on ``spark.jars``: what Maven resolves from a few direct dependencies
    (``python -m tests.harness.hudi_setup`` resolves it with a throw-away pom and copies the jars to the cache)."""

    name: str
    dependencies: tuple[MavenDependency, ...]
    purpose: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class HudiSetup:
    """A released Hudi Spark bundle, the PySpark it runs on, the table version its writers create and keep, and the
    writer options that make them do so (``table_version_options``, added to the project's writer options)."""

    name: str
    hudi_version: str
    bundle: MavenArtifact
    pyspark_version: str
    table_version: int
    # (left out of equality and hashing: a mapping proxy has no hash, and pytest groups tests by setup value)
    table_version_options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    notes: str = field(default="", compare=False)
    s3_runtimes: tuple[MavenRuntime, ...] = field(default=(), compare=False)
    """What a worker of this setup adds to ``spark.jars`` to reach tables on S3 (``s3a://`` through Hadoop's S3A
    connector) and to take the locks Hudi users run there (``tests/harness/hudi_s3.py``)."""

    @property
    def timeline_layout_version(self) -> int:
        """The timeline layout of the tables this setup writes: 1 up to table version 7, 2 from version 8 on."""
        return 2 if self.table_version >= 8 else 1


def _frozen(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


# One PySpark for both bundles, so every setup shares one virtual environment. 3.5.1 is the Spark Hudi 0.15.0 was built
# against (1.2.0 was built against 3.5.5 and runs on 3.5.1 too); later 3.5.x releases changed internal APIs that
# 0.15.0 calls in places (apache/hudi#12099).
PYSPARK_VERSION = "3.5.1"

HUDI_0_15_BUNDLE = MavenArtifact("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "0.15.0")
HUDI_1_2_BUNDLE = MavenArtifact("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "1.2.0")
HUDI_1_0_BUNDLE = MavenArtifact("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "1.0.2")

# Hadoop's S3A connector for the Hadoop that PySpark 3.5.1 ships (hadoop-client-api/runtime 3.3.4), with the AWS SDK
# it was built against; both as they are, without their dependencies (Spark has the rest).
_NO_DEPENDENCIES = ("*:*",)
S3A_RUNTIME = MavenRuntime(
    name="s3a-hadoop-3.3.4",
    dependencies=(
        MavenDependency(MavenArtifact("org.apache.hadoop", "hadoop-aws", "3.3.4"), exclusions=_NO_DEPENDENCIES),
        MavenDependency(MavenArtifact("com.amazonaws", "aws-java-sdk-bundle", "1.12.262"), exclusions=_NO_DEPENDENCIES),
    ),
    purpose="Hadoop's S3A file system (s3a:// and s3:// tables) for PySpark 3.5.1",
)

# What Hudi 0.15.0's DynamoDBBasedLockProvider needs beside the Spark bundle (hudi-aws is not in the bundles): hudi-aws
# and the lock client alone, and the AWS SDK v2 DynamoDB client with its dependencies except those Spark ships
# (netty, Apache HttpClient, logging). hudi-aws 1.x is not on Maven Central, so Hudi 1.2 has no DynamoDB lock here.
HUDI_AWS_0_15_RUNTIME = MavenRuntime(
    name="hudi-aws-0.15.0",
    dependencies=(
        MavenDependency(MavenArtifact("org.apache.hudi", "hudi-aws", "0.15.0"), exclusions=_NO_DEPENDENCIES),
        MavenDependency(MavenArtifact("com.amazonaws", "dynamodb-lock-client", "1.2.0"), exclusions=_NO_DEPENDENCIES),
        MavenDependency(
            MavenArtifact("software.amazon.awssdk", "dynamodb", "2.18.40"),
            exclusions=("software.amazon.awssdk:netty-nio-client", "io.netty:*", "org.apache.httpcomponents:*",
                        "commons-logging:*", "org.slf4j:*"),
        ),
    ),
    purpose="Hudi 0.15.0's DynamoDBBasedLockProvider (hudi-aws, dynamodb-lock-client, AWS SDK v2 DynamoDB)",
)

HUDI_0_15 = HudiSetup(
    name="hudi-0.15",
    hudi_version="0.15.0",
    bundle=HUDI_0_15_BUNDLE,
    pyspark_version=PYSPARK_VERSION,
    table_version=6,
    table_version_options=_frozen({}),
    notes="Writes table version 6, timeline layout 1 by default.",
    s3_runtimes=(S3A_RUNTIME, HUDI_AWS_0_15_RUNTIME),
)

HUDI_1_2_V6 = HudiSetup(
    name="hudi-1.2-v6",
    hudi_version="1.2.0",
    bundle=HUDI_1_2_BUNDLE,
    pyspark_version=PYSPARK_VERSION,
    table_version=6,
    table_version_options=_frozen(
        {
            "hoodie.write.table.version": "6",
            "hoodie.write.auto.upgrade": "false",
        }
    ),
    notes=(
        "Creates tables of version 9 by default; the options above make it create and keep version 6 with "
        "timeline layout 1. Its hoodie.properties still differs from 0.x's: hoodie.archivelog.folder=history, "
        "hoodie.table.ordering.fields instead of hoodie.table.precombine.field, hoodie.table.keygenerator.type "
        "instead of hoodie.table.keygenerator.class."
    ),
    s3_runtimes=(S3A_RUNTIME,),
)

HUDI_1_2_V9 = HudiSetup(
    name="hudi-1.2-v9",
    hudi_version="1.2.0",
    bundle=HUDI_1_2_BUNDLE,
    pyspark_version=PYSPARK_VERSION,
    table_version=9,
    table_version_options=_frozen({}),
    notes=(
        "Hudi 1.2's default: table version 9, timeline layout 2 (instants in .hoodie/timeline/, completed ones "
        "named <requested>_<completion>.<action> and written as Avro). hoodie.write.auto.upgrade stays at its "
        "default (true): a version-6 or version-8 table a writer of this setup touches is upgraded to 9."
    ),
    s3_runtimes=(S3A_RUNTIME,),
)

HUDI_1_2_V8 = HudiSetup(
    name="hudi-1.2-v8",
    hudi_version="1.2.0",
    bundle=HUDI_1_2_BUNDLE,
    pyspark_version=PYSPARK_VERSION,
    table_version=8,
    table_version_options=_frozen(
        {
            "hoodie.write.table.version": "8",
            "hoodie.write.auto.upgrade": "false",
        }
    ),
    notes=(
        "Table version 8 (what Hudi 1.0.x writes), timeline layout 2, written by Hudi 1.2 told to create and keep "
        "that version."
    ),
    s3_runtimes=(S3A_RUNTIME,),
)

HUDI_1_0_2 = HudiSetup(
    name="hudi-1.0.2",
    hudi_version="1.0.2",
    bundle=HUDI_1_0_BUNDLE,
    pyspark_version=PYSPARK_VERSION,
    table_version=8,
    table_version_options=_frozen({}),
    notes=(
        "The last 1.0.x release: table version 8 (its default and newest), timeline layout 2, and its own "
        "HoodieMetadataRecord schema (ColumnStatsMetadata without valueType, no ArrayWrapper), which its "
        "compactions put into the metadata table's base HFiles. Built against Spark 3.5.3; runs on 3.5.1. Not in "
        "SETUPS: only tests/interop/test_metadata_table_v8.py runs it."
    ),
    s3_runtimes=(S3A_RUNTIME,),
)

# Setups sharing a bundle (and a PySpark) run in one worker process: the table version is a per-write option.
# Keep them next to each other, so that the tests of one bundle run together (the fixtures start one worker at a
# time, see tests/interop/conftest.py).
SETUPS: tuple[HudiSetup, ...] = (HUDI_0_15, HUDI_1_2_V6, HUDI_1_2_V9, HUDI_1_2_V8)
"""The setups the interop tests run over (tests/interop/conftest.py)."""
ALL_SETUPS: tuple[HudiSetup, ...] = (*SETUPS, HUDI_1_0_2)
"""Every setup ``python -m tests.harness.hudi_setup`` fetches: ``SETUPS`` and those single tests name."""

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
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.cleaner.policy.failed.writes": "LAZY",
        **ALLOW_UPDATES_OPTIONS,
    }
)


def setup_named(name: str) -> HudiSetup:
    """The setup called ``name`` (e.g. ``"hudi-0.15"``); ``KeyError`` lists the known names."""
    for setup in ALL_SETUPS:
        if setup.name == name:
            return setup
    raise KeyError(f"unknown Hudi setup {name!r}; known: {', '.join(s.name for s in ALL_SETUPS)}")


def shared_table_writer_options(setup: HudiSetup) -> dict[str, str]:
    """The project's writer settings plus what ``setup`` needs to create and keep its table version."""
    return {**PROJECT_WRITER_OPTIONS, **setup.table_version_options}


CONFLICT_RESOLUTION_KEY = "hoodie.write.lock.conflict.resolution.strategy"


def table_service_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` for a job that runs Hudi's own clustering (``CALL run_clustering``) rather than ingestion:
    without the conflict resolution strategy, whose PreferWriterConflictResolutionStrategy makes Hudi 1.2's
    clustering fail its own commit on a version-6 table (``HoodieClusteringException``: it finds its own
    requested plan a conflicting operation)."""
    return {k: v for k, v in options.items() if k != CONFLICT_RESOLUTION_KEY}
