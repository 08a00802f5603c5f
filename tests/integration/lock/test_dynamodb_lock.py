"""The DynamoDB lock against moto's DynamoDB server: the dynamodb-lock-client 1.2.0 protocol as Apache Hudi uses
it (the item, the heartbeat, the waiters' take-over rule), leases that are not fences (a stolen or expired lease
fails its check, including in a process stopped past its lease), lost connections, and bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from structlog.testing import capture_logs

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock import LocalMutexes
from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider
from hudi_clusterd.lock.dynamodb_config import dynamodb_lock_config
from tests.harness.servers import clean_env, free_port, start_moto_checking_credentials
from tests.support import REPO_ROOT

LEASE_MS = 2000
TABLE = "it_locks"
SECRET_MARK = "-not-shown"


def props(server: Any, key: str, *, lease_ms: int = LEASE_MS, table: str = TABLE, **extra: str) -> dict[str, str]:
    return {"hoodie.write.lock.dynamodb.endpoint_url": server.endpoint,
            "hoodie.write.lock.dynamodb.region": server.region,
            "hoodie.write.lock.dynamodb.table": table,
            "hoodie.write.lock.dynamodb.partition_key": key,
            "hoodie.write.lock.wait_time_ms": str(lease_ms),
            "hoodie.aws.access.key": server.access_key,
            "hoodie.aws.secret.key": server.secret_key,
            **extra}


def provider(settings: dict[str, str], **options: Any) -> DynamoDBLockProvider:
    config, problems = dynamodb_lock_config(settings)
    assert config is not None, problems
    return DynamoDBLockProvider(config, **options)


def item_of(server: Any, key: str, table: str = TABLE) -> dict[str, Any] | None:
    reply = server.client().get_item(TableName=table, Key={"key": {"S": key}}, ConsistentRead=True)
    found: dict[str, Any] | None = reply.get("Item")
    return found


def hudi_item(server: Any, key: str, *, owner: str = "hudi-writer", lease_ms: int = LEASE_MS) -> str:
    """Write the item a Hudi writer holds (as its lock client writes it); returns its RVN."""
    rvn = str(uuid.uuid4())
    server.client().put_item(TableName=TABLE, Item={"key": {"S": key}, "ownerName": {"S": owner},
                                                    "leaseDuration": {"S": str(lease_ms)},
                                                    "recordVersionNumber": {"S": rvn}})
    return rvn


@pytest.fixture
def key() -> str:
    return f"it-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def server(dynamodb_server: Any) -> Any:
    """moto's server, with the lock table of these tests in place."""
    provider(props(dynamodb_server, "setup"))._ensure_table(time.monotonic() + 30)
    return dynamodb_server


# --- the protocol ------------------------------------------------------------------------------------------------


def test_the_item_is_the_lock_clients_and_the_owner_new_per_acquisition(server: Any, key: str) -> None:
    locks = provider(props(server, key))
    with locks.acquire() as lease:
        item = item_of(server, key)
        assert item == {"key": {"S": key}, "ownerName": {"S": lease.owner}, "leaseDuration": {"S": "2000"},
                        "recordVersionNumber": {"S": lease.record_version}}
        host = socket.gethostname()
        assert lease.owner.startswith(host) and uuid.UUID(lease.owner[len(host):])
        assert uuid.UUID(lease.record_version)
        first = lease.owner
    assert item_of(server, key) is None  # deleted on release
    with locks.acquire() as again:
        assert again.owner != first


def test_the_heartbeat_gives_the_item_a_new_record_version_every_third_of_the_lease(server: Any, key: str) -> None:
    with provider(props(server, key, lease_ms=3000)).acquire() as lease:
        seen: list[str] = []
        started = time.monotonic()
        while time.monotonic() - started < 2.7:
            item = item_of(server, key)
            assert item is not None
            assert (item["ownerName"]["S"], item["leaseDuration"]["S"]) == (lease.owner, "3000")
            if not seen or seen[-1] != item["recordVersionNumber"]["S"]:
                seen.append(item["recordVersionNumber"]["S"])
            time.sleep(0.1)
        assert 3 <= len(seen) <= 4  # renewed at about 1 s and 2 s
        lease.verify()
        assert lease.record_version == item_of(server, key)["recordVersionNumber"]["S"]  # type: ignore[index]


def test_a_held_item_is_taken_over_only_after_its_lease_of_an_unchanged_record_version(server: Any,
                                                                                        key: str) -> None:
    # Given a Hudi writer's item that nobody renews (its writer died)
    dead = hudi_item(server, key)
    locks = provider(props(server, key, lease_ms=60000))
    # Then within its lease it is not taken
    with pytest.raises(LockError, match=r"timed out after 1s waiting for the table lock .* held by hudi-writer"):
        locks.acquire(timeout_s=1)
    # And once its record version stayed the same for longer than its lease (2 s, its own, not ours), it is
    started = time.monotonic()
    with locks.acquire(timeout_s=10) as lease:
        assert 0.9 <= time.monotonic() - started <= 3.5  # 1 s of the 2 s were seen by the first call
        item = item_of(server, key)
        assert item is not None and item["ownerName"]["S"] == lease.owner
        assert item["recordVersionNumber"]["S"] != dead and item["leaseDuration"]["S"] == "60000"
        assert locks.stats.takeovers == 1


def test_a_changed_record_version_restarts_the_wait(server: Any, key: str) -> None:
    # Given a holder that renews its item once, 1.5 s in, then dies
    hudi_item(server, key)
    renewed = threading.Timer(1.5, hudi_item, args=(server, key))
    renewed.start()
    try:
        started = time.monotonic()
        with provider(props(server, key)).acquire(timeout_s=10):
            waited = time.monotonic() - started
    finally:
        renewed.cancel()
    # Then the 2 s lease counts from when the new version was first seen (the 2 s read), not from the start
    assert 3.9 <= waited <= 6.5, waited


def test_a_released_item_is_taken_with_the_released_condition(server: Any, key: str) -> None:
    server.client().put_item(TableName=TABLE, Item={
        "key": {"S": key}, "ownerName": {"S": "hudi-writer"}, "leaseDuration": {"S": "60000"},
        "recordVersionNumber": {"S": str(uuid.uuid4())}, "isReleased": {"S": "1"}})
    started = time.monotonic()
    with provider(props(server, key)).acquire(timeout_s=5) as lease:
        assert time.monotonic() - started < 1.0
        assert set(item_of(server, key) or {}) == {"key", "ownerName", "leaseDuration", "recordVersionNumber"}
        lease.verify()


def test_threads_of_one_process_queue_on_its_mutexes(server: Any, key: str) -> None:
    mutexes = LocalMutexes()
    first = provider(props(server, key), mutexes=mutexes)
    second = provider(props(server, key), mutexes=mutexes)
    alone = provider(props(server, key))
    with first.acquire():
        with pytest.raises(LockError, match="waiting for another thread of this process"):
            second.acquire(timeout_s=0.2)
        with pytest.raises(LockError, match="waiting for the table lock"):
            alone.acquire(timeout_s=0.2)


def test_without_hoodie_aws_keys_the_sdks_default_credentials_are_used(server: Any, key: str,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    settings = {k: v for k, v in props(server, key).items() if not k.startswith("hoodie.aws.")}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(LockError, match=r"^DynamoDB lock table it_locks \(region us-east-1, endpoint .*\): no AWS "
                                        r"credentials for DescribeTable: set hoodie\.aws\.access\.key"):
        provider(settings).acquire(timeout_s=1)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    with provider(settings).acquire(timeout_s=1) as lease:
        lease.verify()


# --- leases are not fences -----------------------------------------------------------------------------------


def test_a_stolen_lock_fails_verify_and_heartbeat_and_its_release_leaves_the_thiefs_item(server: Any,
                                                                                          key: str) -> None:
    locks = provider(props(server, key, lease_ms=3000))
    lease = locks.acquire()
    lease.verify()
    # Given another owner overwrote the item
    thief = hudi_item(server, key, owner="thief")
    # Then the holder's check fails, for good, and names who holds it now
    with pytest.raises(LockError, match=r"lost while held \(thief holds it now\); nothing more is written"):
        lease.verify()
    assert not lease.renew()  # nothing renewed
    with pytest.raises(LockError, match="lost while held"):
        lease.verify()
    lease.release()
    item = item_of(server, key)
    assert item is not None and (item["ownerName"]["S"], item["recordVersionNumber"]["S"]) == ("thief", thief)
    assert locks.stats.leases_lost == 1


def test_a_heartbeat_that_finds_the_item_taken_loses_the_lease(server: Any, key: str) -> None:
    lease = provider(props(server, key, lease_ms=3000)).acquire()
    try:
        thief = hudi_item(server, key, owner="thief")
        assert not lease.renew()
        assert item_of(server, key)["recordVersionNumber"]["S"] == thief  # type: ignore[index]
        with pytest.raises(LockError, match=r"lost while held \(a heartbeat found thief holding it\)"):
            lease.verify()
    finally:
        lease.release()


def test_a_lease_past_its_time_without_heartbeats_fails_verify_and_is_never_renewed(server: Any, key: str) -> None:
    # Given a holder whose heartbeat does not run (paused), with a 2 s lease and a 0.4 s safety margin
    locks = provider(props(server, key), heartbeat_interval_s=3600)
    lease = locks.acquire()
    try:
        lease.verify()
        rvn = lease.record_version
        time.sleep(1.7)
        # Then past the lease less the margin it fails, though nobody took the item yet
        with pytest.raises(LockError, match=r"lost while held \(not renewed for 1\.\d+s, past its lease of 2s "
                                            r"less a 0\.4s safety margin: a pause, or no heartbeat\)"):
            lease.verify()
        # And a heartbeat that comes late does not renew it
        assert not lease.renew()
        assert item_of(server, key)["recordVersionNumber"]["S"] == rvn  # type: ignore[index]
    finally:
        lease.release()
    assert item_of(server, key) is None  # still ours, so deleted


def test_a_heartbeat_that_wakes_after_a_pause_does_not_renew(server: Any, key: str) -> None:
    # Given a holder whose clock jumps past its lease (as in a process stopped that long) before its heartbeat runs
    pause = [0.0]
    locks = provider(props(server, key), heartbeat_interval_s=3600, clock=lambda: time.monotonic() + pause[0])
    lease = locks.acquire()
    rvn = lease.record_version
    pause[0] = 2.5
    # Then the heartbeat renews nothing, and the lease is lost for good
    assert not lease.renew()
    assert item_of(server, key)["recordVersionNumber"]["S"] == rvn  # type: ignore[index]
    with pytest.raises(LockError, match="lost while held"):
        lease.verify()
    lease.release()


HOLDER = """
import json, sys
from hudi_clusterd.lock import LocalMutexes
from hudi_clusterd.lock.dynamodb import DynamoDBLockProvider
from hudi_clusterd.lock.dynamodb_config import dynamodb_lock_config
from hudi_clusterd.runtime.logging import configure_logging
configure_logging("INFO", "console", sys.stderr)
config, _ = dynamodb_lock_config(json.loads(sys.argv[1]))
lease = DynamoDBLockProvider(config, timeout_s=10).acquire()
print("held", lease.record_version, flush=True)
for line in sys.stdin:
    try:
        lease.verify()
        print("ok", flush=True)
    except Exception as e:
        print("lost", e, flush=True)
lease.release()
print("released", flush=True)
"""


@pytest.mark.parametrize("taken_over", [True, False], ids=["taken-over", "not-taken-over"])
def test_a_process_stopped_past_its_lease_fails_verify_when_resumed(server: Any, key: str,
                                                                    taken_over: bool) -> None:
    # Given another process holding the lock with a 2 s lease
    env = {**clean_env(), "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "daemon"), str(REPO_ROOT)])}
    child = subprocess.Popen([sys.executable, "-c", HOLDER, json.dumps(props(server, key))], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().split()[0] == "held"
        # When it is stopped for longer than its lease (and, maybe, another takes the lock meanwhile)
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.2)  # a renewal it sent just before is answered
        rvn = item_of(server, key)["recordVersionNumber"]["S"]  # type: ignore[index]
        mine = provider(props(server, key)).acquire(timeout_s=10) if taken_over else None
        if not taken_over:
            time.sleep(2.5)
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(1.0)  # its heartbeat thread wakes
        # Then, resumed, it renews nothing and its check fails
        item = item_of(server, key)
        assert item is not None
        if mine is not None:
            assert item["ownerName"]["S"] == mine.owner
            mine.verify()
        else:
            assert item["recordVersionNumber"]["S"] == rvn
        child.stdin.write("verify\n")
        child.stdin.flush()
        answer = child.stdout.readline()
        assert answer.startswith("lost") and "lost while held" in answer, answer
        child.stdin.close()
        assert child.stdout.readline().strip() == "released"
        # And its release leaves the new holder's item alone (or deletes its own)
        if mine is not None:
            assert item_of(server, key)["ownerName"]["S"] == mine.owner  # type: ignore[index]
            mine.release()
        assert item_of(server, key) is None
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        child.wait(10)


# --- the lock table --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("billing", ["PAY_PER_REQUEST", "PROVISIONED"])
def test_a_missing_lock_table_is_created_as_hudi_creates_it(dynamodb_server: Any, key: str, billing: str) -> None:
    table = f"created_{billing.lower()}_{uuid.uuid4().hex[:8]}"
    settings = props(dynamodb_server, key, table=table, **{
        "hoodie.write.lock.dynamodb.billing_mode": billing, "hoodie.write.lock.dynamodb.read_capacity": "7",
        "hoodie.write.lock.dynamodb.write_capacity": "4"})
    with provider(settings).acquire() as lease:
        lease.verify()
    described = dynamodb_server.client().describe_table(TableName=table)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert described["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
    assert described["AttributeDefinitions"] == [{"AttributeName": "key", "AttributeType": "S"}]
    if billing == "PROVISIONED":
        throughput = described["ProvisionedThroughput"]
        assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (7, 4)
    else:
        assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert dynamodb_server.client().scan(TableName=table)["Items"] == []


# --- lost connections ------------------------------------------------------------------------------------------


class Flaky:
    """The real client, with failures injected around chosen calls (``faults[op]`` decides per call)."""

    def __init__(self, real: Any, faults: dict[str, Callable[[str], None]]) -> None:
        self.real, self.faults, self.meta = real, faults, real.meta
        self.calls: list[str] = []

    def __getattr__(self, op: str) -> Callable[..., Any]:
        method = getattr(self.real, op)

        def call(**request: Any) -> Any:
            self.calls.append(op)
            fault = self.faults.get(op)
            if fault is not None:
                fault("before")
            reply = method(**request)
            if fault is not None:
                fault("after")
            return reply

        return call


def unreachable(op: str) -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url=f"http://127.0.0.1:1/{op}")


def test_throttling_and_lost_connections_are_retried_and_counted(server: Any, key: str) -> None:
    failures = iter([ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"},
                                  "ResponseMetadata": {"HTTPStatusCode": 400}}, "GetItem"),
                     unreachable("GetItem")])

    def get_item(when: str) -> None:
        failure = next(failures, None) if when == "before" else None
        if failure is not None:
            raise failure

    locks = provider(props(server, key), client=Flaky(server.client(), {"get_item": get_item}))
    with locks.acquire(timeout_s=5) as lease:
        lease.verify()
    assert locks.stats.connection_retries == 2


def test_a_put_whose_answer_was_lost_is_recognised_as_ours(server: Any, key: str) -> None:
    lost = iter([True])

    def put_item(when: str) -> None:
        if when == "after" and next(lost, False):
            raise ReadTimeoutError(endpoint_url="http://127.0.0.1:1")

    flaky = Flaky(server.client(), {"put_item": put_item})
    with provider(props(server, key), client=flaky).acquire(timeout_s=5) as lease:
        assert item_of(server, key)["ownerName"]["S"] == lease.owner  # type: ignore[index]
        lease.verify()
    assert flaky.calls.count("put_item") == 1


def test_a_lease_taken_after_losing_a_race_counts_from_its_own_write(server: Any, key: str) -> None:
    # Given a waiter whose first write loses the race to a writer that then dies
    raced = iter([True])

    def put_item(when: str) -> None:
        if when == "before" and next(raced, False):
            hudi_item(server, key, owner="winner")

    flaky = Flaky(server.client(), {"put_item": put_item})
    with provider(props(server, key), client=flaky).acquire(timeout_s=10) as lease:
        # Then it takes the dead winner's item over after its 2 s lease, and its own lease is fresh
        assert flaky.calls.count("put_item") == 2
        lease.verify()


@pytest.mark.parametrize("failure", ["timeout", "interrupt"])
def test_a_failure_after_our_put_landed_still_deletes_our_item(server: Any, key: str, failure: str) -> None:
    # Given a put that lands but whose answer is lost, then a connection that stays down till the wait ends
    down_until = [0.0]

    def put_item(when: str) -> None:
        if when == "after":
            if failure == "interrupt":
                raise KeyboardInterrupt
            down_until[0] = time.monotonic() + 1.5
            raise ReadTimeoutError(endpoint_url="http://127.0.0.1:1")

    def get_item(when: str) -> None:
        if when == "before" and time.monotonic() < down_until[0]:
            raise unreachable("GetItem")

    flaky = Flaky(server.client(), {"put_item": put_item, "get_item": get_item})
    locks = provider(props(server, key), client=flaky)
    with pytest.raises(KeyboardInterrupt if failure == "interrupt" else LockError):  # type: ignore[arg-type]
        locks.acquire(timeout_s=1)
    # Then our item is deleted, and the lock is free again, for this provider (its mutex released) and others
    assert "delete_item" in flaky.calls
    assert item_of(server, key) is None
    flaky.faults.clear()
    with locks.acquire(timeout_s=0), pytest.raises(LockError, match="timed out"):
        provider(props(server, key)).acquire(timeout_s=0)


def test_an_unreachable_endpoint_fails_when_the_wait_ends_naming_endpoint_and_table(dynamodb_server: Any,
                                                                                    key: str) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    settings = {**props(dynamodb_server, key), "hoodie.write.lock.dynamodb.endpoint_url": endpoint,
                "hoodie.aws.secret.key": dynamodb_server.secret_key + SECRET_MARK}
    locks = provider(settings)
    started = time.monotonic()
    with capture_logs() as logs, pytest.raises(LockError) as caught:
        locks.acquire(timeout_s=1.5)
    assert time.monotonic() - started < 4
    message = str(caught.value)
    assert message.startswith(f"DynamoDB lock table {TABLE} (region us-east-1, endpoint {endpoint}): timed out "
                              "reading the lock table: DynamoDB did not answer")
    assert "\n" not in message and SECRET_MARK not in message and SECRET_MARK not in repr(logs)
    assert locks.stats.connection_retries >= 3
    assert any(e["event"] == "DynamoDB lock table unreachable; retrying" and e["endpoint"] == endpoint
               for e in logs)


def test_an_endpoint_without_a_scheme_is_reached_with_https(dynamodb_server: Any, key: str) -> None:
    host_port = dynamodb_server.endpoint.removeprefix("http://")
    locks = provider({**props(dynamodb_server, key), "hoodie.write.lock.dynamodb.endpoint_url": host_port})
    with pytest.raises(LockError, match=rf"endpoint https://{host_port}\): timed out reading the lock table"):
        locks.acquire(timeout_s=1)  # moto speaks plain HTTP: the TLS handshake fails, as Hudi's would


# --- access denied (moto's server checking IAM) --------------------------------------------------------------


@pytest.fixture(scope="module")
def iam_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A moto server that checks credentials and IAM policies after its first four requests (which make a user
    allowed to describe the lock table and read items only, and the lock table): its endpoint and that user's
    keys."""
    import boto3

    endpoint, proc = start_moto_checking_credentials(tmp_path_factory.mktemp("moto-iam"), 4)
    try:
        admin = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "admin",
                 "aws_secret_access_key": "admin"}
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="reader")
        keys = iam.create_access_key(UserName="reader")["AccessKey"]
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Resource": "*",
                                                    "Action": ["dynamodb:DescribeTable", "dynamodb:GetItem"]}]}))
        boto3.client("dynamodb", **admin).create_table(
            TableName="hudi_locks", KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        yield endpoint, {"hoodie.aws.access.key": keys["AccessKeyId"], "hoodie.aws.secret.key": keys["SecretAccessKey"]}
    finally:
        proc.stop()


def test_access_denied_on_the_lock_table_is_one_line_naming_table_region_and_endpoint(
        iam_server: tuple[str, dict[str, str]], key: str) -> None:
    endpoint, credentials = iam_server
    settings = {"hoodie.write.lock.dynamodb.endpoint_url": endpoint, "hoodie.write.lock.dynamodb.partition_key": key,
                **credentials}
    locks = provider(settings)
    with pytest.raises(LockError) as caught:
        locks.acquire(timeout_s=5)
    message = str(caught.value)
    assert message == (f"DynamoDB lock table hudi_locks (region us-east-1, endpoint {endpoint}): access denied to "
                       "PutItem: AccessDenied: User: arn:aws:iam::123456789012:user/reader is not authorized to "
                       "perform: dynamodb:PutItem")
    assert credentials["hoodie.aws.secret.key"] not in message
    assert locks.stats.connection_retries == 0
    # And unknown credentials are refused at the first request, just as plainly
    stranger = provider({**settings, "hoodie.aws.access.key": "AKIASTRANGER", "hoodie.aws.secret.key": "nope"})
    with pytest.raises(LockError, match=r"^DynamoDB lock table hudi_locks \(region us-east-1, endpoint .*\): access "
                                        r"denied to DescribeTable: InvalidClientTokenId: The security token included "
                                        r"in the request is invalid\.$"):
        stranger.acquire(timeout_s=5)
