"""The object storage on a real S3 server (SeaweedFS, ``s3_server``): races of conditional writes, directory
markers, errors naming bucket, endpoint and key, ranged reads, s3/s3a, configuration from the environment, and the
requests it counts, checked against a counting proxy in front of the server; and what opening an object costs,
there and on Azure (Azurite), where the size is asked first."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import PreconditionFailed, StorageAccessError, StorageError
from hudi_clusterd.storage import ObjectStorage, PutMode, StorageSpec, open_storage
from hudi_clusterd.storage.object_config import MAX_RETRIES
from hudi_clusterd.storage.object_io import MIN_FETCH, PART_BYTES
from hudi_clusterd.storage.requests import difference
from hudi_clusterd.table.hoodie_table import HoodieTable
from hudi_clusterd.table.listing import scan_files
from tests.builders import TableGen
from tests.harness.process_lock import ProcessLock
from tests.harness.s3_proxy import CountingS3Proxy
from tests.harness.servers import free_port
from tests.support import race


def _storage(s3_server: Any, prefix: str = "it", **overrides: str) -> ObjectStorage:
    storage = open_storage(StorageSpec(s3_server.fresh_uri(prefix), {**s3_server.storage_options(), **overrides}))
    assert isinstance(storage, ObjectStorage)
    return storage




def _key(storage: ObjectStorage, rel: str) -> str:
    return storage.full_path(rel).split("/", 1)[1]


# --- conditional writes --------------------------------------------------------------------------------------------


def test_eight_creators_race_and_exactly_one_wins_each_round(s3_server: Any) -> None:
    storage = _storage(s3_server)
    for round_ in range(5):
        before = storage.requests.snapshot()
        results = race(8, lambda i, r=round_: storage.put(f"lock-{r}", f"{r}:{i}".encode(), mode=PutMode.CREATE))
        winners = [i for i, r in enumerate(results) if r is not None]
        assert len(winners) == 1, results
        assert not any(isinstance(r, Exception) for r in results), results
        assert storage.read_bytes(f"lock-{round_}") == f"{round_}:{winners[0]}".encode()
        # each loser reads the file back (HEAD, then GET: the same size as its own bytes), which tells another
        # writer's file from its own write landed on a try whose answer was lost (storage/settle.py)
        assert difference(storage.requests.snapshot(), before) == {"PUT": 8, "precondition_failed": 7, "HEAD": 7,
                                                                   "GET": 8}


def test_eight_updaters_race_on_one_version_and_exactly_one_wins_each_round(s3_server: Any) -> None:
    storage = _storage(s3_server)
    base = storage.put("counter", b"start")
    assert base is not None and base.version is not None
    version = base.version
    for round_ in range(3):
        results = race(8, lambda i, r=round_, v=version: storage.put("counter", f"{r}:{i}".encode(), if_match=v))
        won = [(i, r) for i, r in enumerate(results) if not isinstance(r, Exception)]
        assert len(won) == 1, results
        assert all(isinstance(r, PreconditionFailed) for r in results if isinstance(r, Exception)), results
        winner, info = won[0]
        assert storage.read_bytes("counter") == f"{round_}:{winner}".encode()
        assert info is not None and info.version == storage.info("counter").version  # type: ignore[union-attr, attr-defined]
        version = info.version  # type: ignore[attr-defined]
    with pytest.raises(PreconditionFailed):  # an update of a missing object (SeaweedFS: 412; AWS: 404)
        storage.put("missing", b"x", if_match=version)


# --- directory markers -------------------------------------------------------------------------------------------


def test_directory_markers_are_folders_and_never_instants(s3_server: Any) -> None:
    # Given a table on S3 with two commits (the second one's requested file is empty, as Hudi writes it)
    storage = _storage(s3_server, "markers")
    gen = TableGen(Path("unused"), storage=storage, lock_provider=ProcessLock())
    for _ in range(2):
        gen.commit({"p1": [1.0, 2.0]})
    before = [(i.time, i.action, i.state) for i in gen.table.timeline()]
    listed_before = {f.name for f in gen.table.timeline_store.list_files()}
    # And the directory markers Hadoop's S3A connector leaves for empty folders (zero-byte keys ending in "/")
    client = s3_server.boto3()
    for folder in (".hoodie/.schema", ".hoodie/archived", ".hoodie/.aux/.bootstrap/.partitions", "p9"):
        client.put_object(Bucket=s3_server.bucket, Key=_key(storage, folder) + "/", Body=b"")
    # Then a listing shows them as folders, never as files
    entries = {f.name: f for f in storage.list_dir(".hoodie")}
    assert entries[".schema"].is_dir and entries["archived"].is_dir and entries[".aux"].is_dir
    assert not [f for f in storage.list_dir(".hoodie") if not f.is_dir and f.name in (".schema", "archived")]
    assert storage.list_dir(".hoodie/.schema") == [] and storage.list_dir(".hoodie/archived") == []
    assert [f.name for f in storage.list_dir(".hoodie/.aux/.bootstrap")] == [".partitions"]
    # info says "folder" (the HEAD finds no object of that name; the listing finds the marker below it)
    for folder in (".hoodie/.schema", ".hoodie/archived", "p9"):
        info = storage.info(folder)
        assert info is not None and info.is_dir and info.version is None, folder
    # And the timeline is unchanged: no marker is taken for an instant file, an empty instant file still is one
    table = HoodieTable.open(storage.base_uri, storage, lock_provider=ProcessLock())
    assert [(i.time, i.action, i.state) for i in table.timeline()] == before
    assert {f.name for f in table.timeline_store.list_files()} == listed_before
    assert not {".schema", "archived"} & {f.name for f in table.timeline_store.listed}
    requested = [f for f in table.timeline_store.listed if f.name.endswith(".commit.requested")]
    assert requested and all(f.size == 0 and not f.is_dir for f in requested)
    # and the empty partition folder's marker is no partition
    assert scan_files(storage)[0] == ["p1"]


# --- errors ------------------------------------------------------------------------------------------------------


def test_wrong_credentials_are_one_line_naming_bucket_endpoint_and_key(s3_server: Any) -> None:
    storage = _storage(s3_server, secret_access_key="wrong-secret-value")
    for action in (lambda: storage.put("x/f", b"1"), lambda: storage.list_dir("x"), lambda: storage.read_bytes("x/f"),
                   lambda: storage.info("x/f")):
        with pytest.raises(StorageAccessError) as denied:
            action()
        message = str(denied.value)
        assert "\n" not in message and "access denied (HTTP 403" in message, message
        assert storage.uri("x") in message and f"(endpoint {s3_server.endpoint})" in message, message
        assert "wrong-secret-value" not in message and s3_server.access_key not in message
        assert not denied.value.retryable


def test_a_missing_bucket_is_named(s3_server: Any) -> None:
    storage = open_storage(StorageSpec("s3://no-such-bucket-here/t", s3_server.storage_options()))
    with pytest.raises(StorageAccessError, match=r"list s3://no-such-bucket-here/t/\.hoodie \(endpoint http://"
                                                 r"127\.0\.0\.1:\d+\): the bucket does not exist"):
        storage.list_dir(".hoodie")
    with pytest.raises(StorageAccessError, match="the bucket does not exist"):
        storage.info(".hoodie/hoodie.properties")  # the HEAD's 404 says nothing; the listing that follows does


def test_an_unreachable_endpoint_fails_within_seconds(s3_server: Any) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    storage = _storage(s3_server, endpoint=endpoint)
    started = time.monotonic()
    with pytest.raises(StorageError, match=rf"list s3://.* \(endpoint {endpoint}\): cannot reach the endpoint"):
        storage.list_dir("")
    assert time.monotonic() - started < 5  # four quick retries, not object_store's three minutes


# --- reads, writes, requests -----------------------------------------------------------------------------------


# the client's own tries: its first; every one of them (max_retries after the first), so the client gives up
@pytest.mark.parametrize(("how", "times"), [("close", 1), ("500", 1), ("close", 1 + int(MAX_RETRIES.default or 0))])
def test_writes_whose_answers_were_lost_are_settled_by_reading_them_back(s3_server: Any, how: Literal["close", "500"],
                                                                         times: int) -> None:
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        storage = _storage(s3_server, "settle", endpoint=proxy.endpoint)
        # Given a store that carries out a create and a compare-and-swap but loses their answers (the answers of
        # the client's own tries again too, up to ``times``)
        create = proxy.lose_answers("PUT", r"/c$", how=how, times=times)
        swap = proxy.lose_answers("PUT", r"/s$", nth=2, how=how, times=times)
        # When the daemon's storage writes them
        created = storage.put("c", b"ours", mode=PutMode.CREATE)
        first = storage.put("s", b"v1", mode=PutMode.CREATE)
        assert first is not None and first.version is not None
        swapped = storage.put("s", b"v2", if_match=first.version)
        # Then each landed, and the call says so with the version our bytes have: no collision, no lost race
        assert created is not None and created.version == storage.info("c").version  # type: ignore[union-attr]
        assert swapped is not None and swapped.version == storage.info("s").version  # type: ignore[union-attr]
        assert storage.read_bytes("c") == b"ours" and storage.read_bytes("s") == b"v2"
        # and a write on the version our lost answer left fails as another writer's would not
        with pytest.raises(PreconditionFailed):
            storage.put("s", b"v3", if_match=first.version)
    assert create.fired == swap.fired == times, (create, swap)
    assert [status for _, status in create.hits] == [200] + [412] * (times - 1), create.hits
    # (another writer's bytes found there instead are the other writer's win: tests/contract/)
    assert storage.put("c", b"theirs", mode=PutMode.CREATE) is None


def test_requests_counted_are_the_requests_the_server_got(s3_server: Any) -> None:
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        storage = _storage(s3_server, endpoint=proxy.endpoint)
        table = pa.table({"id": pa.array(range(100_000), pa.int64())})
        with proxy.measure() as seen:
            storage.put("a/f", b"1")
            assert storage.put("a/f", b"2", mode=PutMode.CREATE) is None
            storage.info("a/f")
            storage.info("a")
            storage.list_dir("a")
            storage.read_bytes("a/f")
            storage.touch("a/f")
            with storage.open_output("p/f.parquet") as f:
                pq.write_table(table, f, row_group_size=10_000)
            with storage.open_input_file("p/f.parquet") as f:
                assert pq.ParquetFile(f).metadata.num_rows == 100_000
            storage.delete("a/f")
            storage.delete("a/f")
            storage.delete_dir("p")
        counted = {k: v for k, v in storage.requests.snapshot().items() if v}
    assert counted == seen, (counted, seen)
    # the create that found a file read it back (HEAD, GET) to tell another writer's from ours
    assert counted == {"PUT": 4, "precondition_failed": 1, "HEAD": 5, "LIST": 3, "GET": 4, "DELETE": 2}


def test_a_multipart_upload_appears_on_close_and_is_counted(s3_server: Any) -> None:
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        storage = _storage(s3_server, endpoint=proxy.endpoint)
        data = bytes(range(256)) * ((PART_BYTES + 1024 * 1024) // 256)
        with proxy.measure() as seen:
            f = storage.open_output("big.bin")
            f.write(data)
            assert not storage.exists("big.bin")  # parts uploaded, the object not yet there
            f.close()
        counted = {k: v for k, v in storage.requests.snapshot().items() if v}
        assert storage.info("big.bin").size == len(data)  # type: ignore[union-attr]
    assert counted == {"POST": 2, "PUT": 2, "HEAD": 1, "LIST": 1} == seen


def test_reading_a_parquet_footer_downloads_the_footer_only(s3_server: Any) -> None:
    storage = _storage(s3_server)
    n = 300_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "x": pa.array([i / 3 for i in range(n)])})
    with storage.open_output("f.parquet") as f:
        pq.write_table(table, f, row_group_size=30_000, compression="none")
    size = storage.info("f.parquet").size  # type: ignore[union-attr]
    before, read_before = storage.requests.snapshot(), storage.requests.bytes_read
    with storage.open_input_file("f.parquet") as f:
        md = pq.ParquetFile(f).metadata
    assert md.num_rows == n and md.num_row_groups == 10
    assert difference(storage.requests.snapshot(), before) == {"GET": 1}  # its size came with its last bytes
    assert storage.requests.bytes_read - read_before == MIN_FETCH and size > 50 * MIN_FETCH


@pytest.mark.parametrize(("server", "size", "cost"), [
    ("s3_server", 0, {"GET": 1, "HEAD": 1}),  # S3 refuses a suffix range of an empty object: its size is asked
    ("s3_server", 100, {"GET": 1}),  # the suffix range tells the size and brings the whole object
    ("azurite_server", 0, {"HEAD": 1}),  # no suffix ranges on Azure: the size, then ranges as asked
    ("azurite_server", 100, {"HEAD": 1, "GET": 1}),
])
def test_opening_an_object_asks_its_size_only_where_the_suffix_range_cannot(
        server: str, size: int, cost: dict[str, int], request: pytest.FixtureRequest) -> None:
    store = request.getfixturevalue(server)
    storage = open_storage(StorageSpec(store.fresh_uri("open"), store.storage_options()))
    assert isinstance(storage, ObjectStorage)
    storage.put("o", b"z" * size)
    before = storage.requests.snapshot()
    with storage.open_input_file("o") as f:
        assert f.read() == b"z" * size
    assert difference(storage.requests.snapshot(), before) == cost


def test_s3_and_s3a_open_the_same_objects(s3_server: Any) -> None:
    s3 = _storage(s3_server)
    s3a = open_storage(StorageSpec(s3.base_uri.replace("s3://", "s3a://", 1), s3.spec.options))
    s3a.put("p/f", b"written through s3a")
    assert s3.read_bytes("p/f") == b"written through s3a"
    assert [f.name for f in s3.list_dir("p")] == ["f"]
    assert s3.rel_from_uri(s3a.uri("p/f")) == "p/f" and s3a.rel_from_uri(s3.uri("p/f")) == "p/f"
    assert s3a.uri("p/f").startswith("s3a://") and s3.uri("p/f").startswith("s3://")


# --- configuration ---------------------------------------------------------------------------------------------


def test_the_environment_configures_a_spec_without_options(s3_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    storage = open_storage(s3_server.fresh_uri("env"))
    storage.put("f", b"env")
    assert storage.read_bytes("f") == b"env"
    # an option wins over AWS_ENDPOINT_URL_S3 (here a closed port)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StorageError, match="cannot reach"):
        open_storage(storage.base_uri).read_bytes("f")
    assert open_storage(StorageSpec(storage.base_uri, {"endpoint": s3_server.endpoint})).read_bytes("f") == b"env"
    # and without keys anywhere, boto3's chain reads them from a shared credentials file
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = {s3_server.access_key}\n"
                           f"aws_secret_access_key = {s3_server.secret_key}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    assert open_storage(storage.base_uri).read_bytes("f") == b"env"
