"""The object-store test servers answer as the tests rely on: S3 with conditional writes, DynamoDB with
conditional puts, ZooKeeper with sessions and ephemeral sequential nodes."""

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
