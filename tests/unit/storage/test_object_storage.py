"""The object storage over obstore's in-memory store: the requests each operation makes, reads by ranges, writes
that appear on close, the refusals (rename, conditional delete), and errors in one line."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.errors import (
    PreconditionFailed,
    StorageAccessError,
    StorageError,
    ThrottledError,
    TransientStorageError,
)
from hudi_clusterd.storage import ObjectStorage, PutMode, RequestCounts, StorageSpec, open_storage
from hudi_clusterd.storage.object_io import MIN_FETCH, PART_BYTES, RangeReader, upload_requests
from hudi_clusterd.storage.requests import KINDS, difference, object_error


@pytest.fixture
def storage() -> Iterator[ObjectStorage]:
    bucket = f"unit-{uuid.uuid4().hex[:12]}"
    table = open_storage(StorageSpec(f"s3a://{bucket}/t", {"store": "memory"}))
    assert isinstance(table, ObjectStorage)
    yield table
    ObjectStorage.memory_buckets.drop(bucket)


def _cost(storage: ObjectStorage, action: Callable[[], object]) -> dict[str, int]:
    before = storage.requests.snapshot()
    action()
    return difference(storage.requests.snapshot(), before)


def test_every_operation_costs_the_requests_it_names(storage: ObjectStorage) -> None:
    assert _cost(storage, lambda: storage.put("a/f", b"1")) == {"PUT": 1}
    # a create that finds the file reads it back (our own write, landed with its answer lost, is a success): a
    # HEAD, and a GET only where the sizes agree
    assert _cost(storage, lambda: storage.put("a/f", b"2", mode=PutMode.CREATE)) == {
        "PUT": 1, "precondition_failed": 1, "HEAD": 1, "GET": 1}
    assert _cost(storage, lambda: storage.put("a/f", b"22", mode=PutMode.CREATE)) == {
        "PUT": 1, "precondition_failed": 1, "HEAD": 1}
    assert _cost(storage, lambda: storage.info("a/f")) == {"HEAD": 1}
    assert _cost(storage, lambda: storage.info("a")) == {"HEAD": 1, "LIST": 1}
    assert _cost(storage, lambda: storage.list_dir("a")) == {"LIST": 1}
    assert _cost(storage, lambda: storage.read_bytes("a/f")) == {"GET": 1}
    assert _cost(storage, lambda: storage.touch("a/f")) == {"GET": 1, "PUT": 1}
    assert _cost(storage, lambda: storage.delete("a/f")) == {"HEAD": 1, "DELETE": 1}
    assert _cost(storage, lambda: storage.delete("a/f")) == {"HEAD": 1}
    assert _cost(storage, lambda: storage.makedirs("b/c")) == {}
    for i in range(3):
        storage.put(f"d/{i}/f", b"x")
    assert _cost(storage, lambda: storage.delete_dir("d")) == {"LIST": 1, "DELETE": 1}
    assert storage.list_dir("d") == [] and not storage.exists("d")
    assert set(storage.requests.snapshot()) == set(KINDS)


def test_children_share_the_client_and_its_counts(storage: ObjectStorage) -> None:
    child = storage.child(".hoodie/metadata")
    assert child.client is storage.client and child.requests is storage.requests
    child.put("files/x", b"1")
    assert storage.read_bytes(".hoodie/metadata/files/x") == b"1"
    assert storage.requests.snapshot()["PUT"] == 1 and storage.requests.snapshot()["GET"] == 1


def test_counts_are_thread_safe_and_kinds_are_checked() -> None:
    counts = RequestCounts()
    threads = [threading.Thread(target=lambda: [counts.add("GET") for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts.snapshot()["GET"] == 8000 and counts.total() == 8000
    with pytest.raises(ValueError, match="unknown request kind"):
        counts.add("PATCH")


def test_a_parquet_footer_is_read_by_ranges(storage: ObjectStorage) -> None:
    # Given a Parquet file of several hundred KB with many row groups
    n = 200_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "x": pa.array([i * 0.5 for i in range(n)])})
    with storage.open_output("p/f.parquet") as f:
        pq.write_table(table, f, row_group_size=20_000, compression="none")
    size = storage.info("p/f.parquet").size  # type: ignore[union-attr]
    assert size > 10 * MIN_FETCH
    # When its footer is read
    before, bytes_before = storage.requests.snapshot(), storage.requests.bytes_read
    with storage.open_input_file("p/f.parquet") as f:
        assert pq.ParquetFile(f).metadata.num_row_groups == 10
    # Then one suffix-range GET fetched the end of the file (and told its size), not the file; no HEAD
    assert difference(storage.requests.snapshot(), before) == {"GET": 1}
    assert storage.requests.bytes_read - bytes_before == MIN_FETCH < size
    # And one column of one row group reads that chunk, not the others
    before = storage.requests.bytes_read
    with storage.open_input_file("p/f.parquet") as f:
        assert pq.ParquetFile(f).read_row_group(3, columns=["x"]).column("x")[0].as_py() == 30_000
    assert storage.requests.bytes_read - before < size / 5


@pytest.mark.parametrize("size", [0, 1, MIN_FETCH - 1, MIN_FETCH, MIN_FETCH + 1, 3 * MIN_FETCH + 7])
def test_an_opened_object_reads_exactly_its_bytes(storage: ObjectStorage, size: int) -> None:
    data = bytes(i * 7 % 251 for i in range(size))
    storage.put("o/b", data)
    before = storage.requests.snapshot()
    with storage.open_input_file("o/b") as f:
        assert f.size() == size
        cost = difference(storage.requests.snapshot(), before)
        assert f.read() == data
        f.seek(max(0, size - 5))
        assert f.read(100) == data[-5:]
    # the object's last MIN_FETCH bytes came with the open, so a small object costs that one GET only
    assert cost == {"GET": 1}
    assert difference(storage.requests.snapshot(), before)["GET"] == (1 if size <= MIN_FETCH else 2)


def test_opening_a_missing_object_names_it(storage: ObjectStorage) -> None:
    with pytest.raises(StorageError, match=r"file not found: s3a://.*/t/o/none"):
        storage.open_input_file("o/none")


def _recorded_fetch() -> tuple[bytes, list[tuple[int, int]], Callable[[int, int], bytes]]:
    """An object's bytes, the ranges fetched from it so far, and the fetch that records them."""
    data = bytes(range(256)) * 1024
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    return data, fetched, fetch


def test_range_reader_serves_the_tail_it_starts_with() -> None:
    data, fetched, fetch = _recorded_fetch()
    reader = RangeReader(fetch, len(data), "s3://b/k", tail=data[-MIN_FETCH:])
    reader.seek(-8, 2)
    assert reader.read(8) == data[-8:] and fetched == []
    reader.seek(len(data) - MIN_FETCH - 2)
    assert reader.read(4) == data[-MIN_FETCH - 2:-MIN_FETCH + 2] and len(fetched) == 1
    with pytest.raises(ValueError, match="a tail of 3 bytes for an object of 2"):
        RangeReader(fetch, 2, "s3://b/k", tail=b"abc")


def test_range_reader_seeks_reads_and_buffers() -> None:
    data, fetched, fetch = _recorded_fetch()
    reader = RangeReader(fetch, len(data), "s3://b/k")
    assert reader.seek(-10, 2) == len(data) - 10 and reader.read(100) == data[-10:] and reader.read(5) == b""
    reader.seek(1000)
    assert reader.read(10) == data[1000:1010] and reader.read(10) == data[1010:1020]
    assert fetched[-1] == (1000, 1000 + MIN_FETCH)  # the second read came from the buffer
    assert len(fetched) == 2
    reader.seek(0)
    assert reader.readall() == data
    with pytest.raises(OSError, match="before the start"):
        reader.seek(-1)
    short = RangeReader(lambda s, e: data[s:e][:3], 100, "s3://b/short")
    with pytest.raises(OSError, match="ended after"):
        short.read(10)


def test_output_appears_whole_on_close_only(storage: ObjectStorage) -> None:
    f = storage.open_output("p/out.bin")
    f.write(b"abc" * 10)
    assert f.tell() == 30
    assert not storage.exists("p/out.bin") and storage.list_dir("p") == []
    f.close()
    assert storage.read_bytes("p/out.bin") == b"abc" * 10
    assert upload_requests(30) == {"PUT": 1}
    assert upload_requests(PART_BYTES + 1) == {"POST": 2, "PUT": 2}


def test_rename_is_refused_naming_both_paths(storage: ObjectStorage) -> None:
    storage.put("r/src", b"x")
    with pytest.raises(StorageError, match=r"rename s3a://.*/t/r/src to s3a://.*/t/r/dst: object stores cannot rename"):
        storage.rename("r/src", "r/dst")
    assert storage.read_bytes("r/src") == b"x" and not storage.exists("r/dst")


def test_conditional_writes_and_the_refused_conditional_delete(storage: ObjectStorage) -> None:
    first = storage.put("c", b"one")
    assert first is not None and first.version is not None and first.version.startswith('"')
    second = storage.put("c", b"two", if_match=first.version)
    assert second is not None
    with pytest.raises(PreconditionFailed, match=r"s3a://.*/t/c: version .* expected"):
        storage.put("c", b"three", if_match=first.version)
    with pytest.raises(PreconditionFailed):
        storage.put("gone", b"x", if_match=first.version)
    assert storage.requests.snapshot()["precondition_failed"] == 2
    with pytest.raises(StorageError, match="cannot delete a file conditionally"):
        storage.delete("c", if_match=second.version)
    assert storage.read_bytes("c") == b"two"


def test_touch_does_not_bring_back_a_deleted_file(storage: ObjectStorage) -> None:
    with pytest.raises(StorageError, match=r"touch .*/t/hb: not found"):
        storage.touch("hb")
    assert not storage.exists("hb")


def test_an_objects_own_folder_marker_is_not_listed_as_a_file(storage: ObjectStorage) -> None:
    # obstore shows the key "t/.hoodie/.schema/" as an object named "t/.hoodie/.schema": in the memory store that
    # is what such a marker becomes
    import obstore as obs

    obs.put(storage.client.store, "t/.hoodie/.schema", b"")
    obs.put(storage.client.store, "t/.hoodie/.schema/x.avsc", b"{}")
    assert [(f.name, f.is_dir) for f in storage.list_dir(".hoodie")] == [(".schema", True)]
    assert [f.name for f in storage.list_dir(".hoodie/.schema")] == ["x.avsc"]


class _Fake(Exception):
    pass


@pytest.mark.parametrize(("error", "kind", "says"), [
    (_Fake("Error performing GET http://h/b?list-type=2 - Server returned non-2xx status code: 403 Forbidden: "
           "<Error><Code>SignatureDoesNotMatch</Code><AWSAccessKeyId>AKIALEAK</AWSAccessKeyId>"
           "<StringToSign>AWS4-HMAC-SHA256 leak</StringToSign></Error>\n\nDebug source: ..."),
     StorageAccessError, r"access denied \(HTTP 403 SignatureDoesNotMatch\); check the credentials"),
    (_Fake("Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchBucket</Code></Error>"),
     StorageAccessError, r"the bucket does not exist \(HTTP 404 NoSuchBucket\)"),
    (_Fake("Error performing HEAD http://127.0.0.1:1/b/x in 1ms, after 4 retries - HTTP error: error sending "
           "request\n ConnectError(\"tcp connect error\", Connection refused)"),
     TransientStorageError, r"cannot reach the endpoint \(connection refused\)"),
    (_Fake("Server returned non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"),
     ThrottledError, r"throttled by the store \(HTTP 503 SlowDown\)"),
    (_Fake("Server returned non-2xx status code: 500 Internal Server Error: <Error><Code>InternalError</Code>"),
     TransientStorageError, r"the store failed \(HTTP 500 InternalError\)"),
])
def test_errors_are_one_line_naming_object_and_endpoint_only(error: Exception, kind: type[StorageError],
                                                             says: str) -> None:
    e = object_error("list", "s3://b/t/.hoodie", "http://127.0.0.1:9000", error)
    assert type(e) is kind and "\n" not in str(e)
    assert str(e).startswith("list s3://b/t/.hoodie (endpoint http://127.0.0.1:9000): ")
    assert re.search(says, str(e)), str(e)
    assert "AKIALEAK" not in str(e) and "StringToSign" not in str(e) and "AWS4" not in str(e)
