"""The object-store test servers answer as the tests rely on: S3 with conditional writes, DynamoDB with
conditional puts, ZooKeeper with sessions and ephemeral sequential nodes; and the local mirror of an S3 table that
the crash harnesses read (``tests/harness/s3_mirror.py``)."""

from __future__ import annotations

from typing import Any

import pytest


def test_s3_server_does_conditional_writes(s3_server: Any) -> None:
    from botocore.exceptions import ClientError

    s3 = s3_server.boto3()
    key = s3_server.fresh_uri("srv").split("/", 3)[3] + "/f"
    first = s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"a", IfNoneMatch="*")
    with pytest.raises(ClientError) as lost:
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"b", IfNoneMatch="*")
    assert lost.value.response["Error"]["Code"] == "PreconditionFailed"
    s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"c", IfMatch=first["ETag"])
    assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"c"


def test_dynamodb_server_does_conditional_puts(dynamodb_server: Any) -> None:
    ddb = dynamodb_server.client()
    ddb.create_table(TableName="srv_check", KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    item = {"key": {"S": "k"}}
    ddb.put_item(TableName="srv_check", Item=item, ConditionExpression="attribute_not_exists(#pk)",
                 ExpressionAttributeNames={"#pk": "key"})
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName="srv_check", Item=item, ConditionExpression="attribute_not_exists(#pk)",
                     ExpressionAttributeNames={"#pk": "key"})
    ddb.delete_table(TableName="srv_check")


def test_zookeeper_server_keeps_ephemeral_sequential_nodes(zookeeper_server: Any) -> None:
    zk = zookeeper_server.client()
    try:
        zk.ensure_path("/srv-check")
        node = zk.create("/srv-check/_c_x-lock-", b"", ephemeral=True, sequence=True)
        assert node.rsplit("-", 1)[-1].isdigit()
    finally:
        zk.stop()
        zk.close()
    other = zookeeper_server.client()
    try:
        assert other.get_children("/srv-check") == []  # the session's end removed its node
    finally:
        other.stop()
        other.close()


def test_the_counting_proxy_counts_each_kind_and_keeps_signatures_valid(s3_server: Any) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
    from tests.harness.s3_proxy import CountingS3Proxy

    with CountingS3Proxy(s3_server.endpoint) as proxy:
        s3 = boto3.client("s3", endpoint_url=proxy.endpoint, region_name=s3_server.region,
                          aws_access_key_id=s3_server.access_key, aws_secret_access_key=s3_server.secret_key,
                          config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))
        prefix = s3_server.fresh_uri("proxy").split("/", 3)[3]
        with proxy.measure() as counts:
            s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/a", Body=b"x" * 100, IfNoneMatch="*")
            with pytest.raises(ClientError):
                s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/a", Body=b"y", IfNoneMatch="*")
            assert s3.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/a")["Body"].read() == b"x" * 100
            s3.head_object(Bucket=s3_server.bucket, Key=f"{prefix}/a")
            listed = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/")
            s3.copy_object(Bucket=s3_server.bucket, Key=f"{prefix}/b",
                           CopySource={"Bucket": s3_server.bucket, "Key": f"{prefix}/a"})
            s3.delete_object(Bucket=s3_server.bucket, Key=f"{prefix}/a")
    assert [o["Key"] for o in listed["Contents"]] == [f"{prefix}/a"]
    assert counts == {"PUT": 2, "precondition_failed": 1, "GET": 1, "HEAD": 1, "LIST": 1, "COPY": 1, "DELETE": 1}


def _proxied_boto3(s3_server: Any, endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, region_name=s3_server.region,
                        aws_access_key_id=s3_server.access_key, aws_secret_access_key=s3_server.secret_key,
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=10,
                                      s3={"addressing_style": "path"}))


def test_the_proxy_forwards_a_chosen_put_and_closes_the_connection_without_its_answer(s3_server: Any) -> None:
    from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError
    from tests.harness.s3_proxy import CountingS3Proxy

    prefix = s3_server.fresh_uri("lost").split("/", 3)[3]
    direct = s3_server.boto3()
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        s3 = _proxied_boto3(s3_server, proxy.endpoint)
        # the second create of a .commit file, once; another key or method is never chosen
        rule = proxy.lose_answers("PUT", r"/t/\d+\.commit$", nth=2)
        s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/1.commit", Body=b"one", IfNoneMatch="*")
        s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/2.other", Body=b"x", IfNoneMatch="*")
        assert s3.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/1.commit")["Body"].read() == b"one"
        with pytest.raises((ConnectionClosedError, EndpointConnectionError)):  # no answer at all
            s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/2.commit", Body=b"two", IfNoneMatch="*")
        # the server had stored it: read directly, and through the proxy, it is there
        assert direct.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/2.commit")["Body"].read() == b"two"
        assert s3.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/2.commit")["Body"].read() == b"two"
        # and a client trying again learns that from the store's answer (the object exists)
        with pytest.raises(ClientError) as again:
            s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/2.commit", Body=b"two", IfNoneMatch="*")
        assert again.value.response["Error"]["Code"] == "PreconditionFailed"
        # times=1: the next chosen-looking request is answered as usual
        s3.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/t/3.commit", Body=b"three", IfNoneMatch="*")
    assert rule.fired == 1 and rule.hits == [(f"{prefix}/t/2.commit", 200)]
    assert rule.matched == 4


def test_the_proxy_answers_500_in_place_of_the_servers_answer_a_bounded_number_of_times(s3_server: Any) -> None:
    import json
    import time

    from botocore.exceptions import ClientError
    from tests.harness.s3_proxy import CountingS3Proxy

    prefix = s3_server.fresh_uri("lost500").split("/", 3)[3]
    key = f"{prefix}/.locks/lock.json"
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        s3 = _proxied_boto3(s3_server, proxy.endpoint)
        first = s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b'{"n": 0}', IfNoneMatch="*")
        # the updates whose body says n >= 1, the first two of them
        rule = proxy.lose_answers("PUT", r"\.locks/lock\.json$", times=2, how="500",
                                  body_matches=lambda body: json.loads(body)["n"] >= 1)
        etag = first["ETag"]
        for n in (1, 2):
            with pytest.raises(ClientError) as failed:
                s3.put_object(Bucket=s3_server.bucket, Key=key, Body=json.dumps({"n": n}).encode(), IfMatch=etag)
            assert failed.value.response["Error"]["Code"] == "InternalError"
            stored = s3.get_object(Bucket=s3_server.bucket, Key=key)
            assert json.loads(stored["Body"].read()) == {"n": n}  # it was written all the same
            etag = stored["ETag"]
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b'{"n": 3}', IfMatch=etag)
        # and an answer held back reaches its client that much later, whole
        slow = proxy.delay_answers("GET", r"\.locks/lock\.json$", 0.5)
        started = time.monotonic()
        assert json.loads(s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()) == {"n": 3}
        assert time.monotonic() - started >= 0.5 and slow.hits == [(key, 200)]
    assert rule.hits == [(key, 200), (key, 200)]
    assert proxy.snapshot()["PUT"] == 4


def test_the_proxy_loses_only_the_first_answer_of_each_distinct_request_when_asked(s3_server: Any) -> None:
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError
    from tests.harness.s3_proxy import CountingS3Proxy

    prefix = s3_server.fresh_uri("once").split("/", 3)[3]
    with CountingS3Proxy(s3_server.endpoint) as proxy:
        s3 = _proxied_boto3(s3_server, proxy.endpoint)
        rule = proxy.lose_answers("PUT", r"/e/", times=100, once_each=True)
        for key, body in ((f"{prefix}/e/a", b"1"), (f"{prefix}/e/a", b"2"), (f"{prefix}/e/b", b"1")):
            with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
                s3.put_object(Bucket=s3_server.bucket, Key=key, Body=body)
            s3.put_object(Bucket=s3_server.bucket, Key=key, Body=body)  # the same request again: answered
    assert rule.hits == [(f"{prefix}/e/a", 200), (f"{prefix}/e/a", 200), (f"{prefix}/e/b", 200)]
    assert rule.matched == 6


def test_azurite_does_conditional_writes(azurite_server: Any) -> None:
    from azure.core import MatchConditions
    from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient(account_url=azurite_server.endpoint,
                               credential={"account_name": azurite_server.account,
                                           "account_key": azurite_server.key})
    blob = client.get_blob_client(azurite_server.container, f"srv-{id(client)}/f")
    first = blob.upload_blob(b"a", overwrite=False)
    with pytest.raises(ResourceExistsError):
        blob.upload_blob(b"b", overwrite=False)
    blob.upload_blob(b"c", overwrite=True, etag=first["etag"], match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceModifiedError):
        blob.upload_blob(b"d", overwrite=True, etag=first["etag"], match_condition=MatchConditions.IfNotModified)
    assert blob.download_blob().readall() == b"c"


def test_the_s3_mirror_copies_a_folder_or_a_prefix_exactly(s3_server: Any, tmp_path: Any) -> None:
    from tests.harness.s3_mirror import S3Mirror

    uri = s3_server.fresh_uri("mirror")
    s3, prefix = s3_server.boto3(), uri.split("/", 3)[3] + "/"
    for key in ("t/100.a", "t/100_5.b", "t/200.a", "m/100/x", "top"):
        s3.put_object(Bucket=s3_server.bucket, Key=prefix + key, Body=key.encode())
    mirror = S3Mirror(s3_server, uri, tmp_path)

    def files() -> set[str]:
        return {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}

    assert files() == set() and mirror.sync() == tmp_path
    assert files() == {"t/100.a", "t/100_5.b", "t/200.a", "m/100/x", "top"}
    assert (tmp_path / "t" / "100_5.b").read_bytes() == b"t/100_5.b"
    # a prefix of names brings those paths up to date, and no others
    s3.delete_object(Bucket=s3_server.bucket, Key=prefix + "t/100.a")
    s3.delete_object(Bucket=s3_server.bucket, Key=prefix + "t/200.a")
    s3.put_object(Bucket=s3_server.bucket, Key=prefix + "t/100_6.c", Body=b"new")
    mirror.sync("t/100")
    assert files() == {"t/100_5.b", "t/100_6.c", "t/200.a", "m/100/x", "top"}
    # a folder, emptied, goes with its files
    s3.delete_object(Bucket=s3_server.bucket, Key=prefix + "m/100/x")
    mirror.sync("m/")
    assert not (tmp_path / "m" / "100").exists() and "top" in files()
    mirror.sync()
    assert files() == {"t/100_5.b", "t/100_6.c", "top"}
