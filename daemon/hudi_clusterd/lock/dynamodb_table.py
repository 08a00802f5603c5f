"""The requests of the dynamodb-lock-client 1.2.0 protocol (as Apache Hudi configures it), one method each, over
boto3.

The lock table has the hash key ``key`` (type S) and no sort key. A lock is one item whose attributes are all
type S: ``key``, ``ownerName``, ``leaseDuration`` (milliseconds, decimal) and ``recordVersionNumber`` (a UUID,
new on every write); ``isReleased`` = ``"1"`` marks an item released without deleting it (Hudi never does).
Every write is conditional (the conditions and placeholder names are the lock client's):

==========================  ======================================================================
take a free lock            ``PutItem`` if ``attribute_not_exists(#pk)``
take a released lock        ``PutItem`` if ``attribute_exists(#pk) AND #ir = :ir``
take an expired lock        ``PutItem`` if ``attribute_exists(#pk) AND #rvn = :rvn``
heartbeat                   ``UpdateItem SET #ld = :ld, #rvn = :newRvn`` if
                            ``attribute_exists(#pk) AND #rvn = :rvn AND #on = :on``
release                     ``DeleteItem`` with the heartbeat's condition
==========================  ======================================================================

Each method makes exactly one request (botocore's own retries are off) and sorts failures into three kinds:
:class:`ConditionFailed` (the item is not as the condition says), :class:`Unreachable` (worth retrying: no
connection, a timeout, throttling, a server error) and ``LockError`` (retrying does not help: access denied,
bad credentials, a missing table, an invalid request), whose one-line message names the lock table, the region
and the endpoint. No message ever carries the secret key or the session token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import structlog
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from hudi_clusterd.errors import LockError
from hudi_clusterd.lock.dynamodb_config import DynamoDBLockConfig

log = structlog.get_logger(__name__)

HASH_KEY = "key"
OWNER = "ownerName"
LEASE = "leaseDuration"
RVN = "recordVersionNumber"
RELEASED = "isReleased"
NAMES_HELD = {"#pk": HASH_KEY, "#rvn": RVN, "#on": OWNER}
COND_ABSENT = "attribute_not_exists(#pk)"
COND_RELEASED = "attribute_exists(#pk) AND #ir = :ir"
COND_SAME_RVN = "attribute_exists(#pk) AND #rvn = :rvn"
COND_OURS = "attribute_exists(#pk) AND #rvn = :rvn AND #on = :on"

_RETRYABLE = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
                        "InternalServerError", "InternalFailure", "ServiceUnavailable",
                        "LimitExceededException", "TransactionConflictException"})
_DENIED = frozenset({"AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidClientTokenId",
                     "InvalidSignatureException", "SignatureDoesNotMatch", "IncompleteSignature",
                     "ExpiredTokenException", "ExpiredToken", "MissingAuthenticationToken",
                     "MissingAuthenticationTokenException"})
_XML_FIELD = re.compile(r"<(Code|Message)>([^<]*)</\1>")


class ConditionFailed(Exception):
    """A conditional write found the item other than its condition says (someone else wrote it)."""


class Unreachable(Exception):
    """A failure worth retrying: no connection, a timeout, throttling or a server error."""


@dataclass(frozen=True, slots=True)
class LockItem:
    """One lock item as read; ``lease_ms`` is ``None`` when its ``leaseDuration`` is not a number."""

    key: str
    owner: str
    rvn: str
    lease_ms: int | None
    released: bool

    @classmethod
    def from_wire(cls, item: dict[str, Any]) -> LockItem:
        def text(name: str) -> str:
            value = item.get(name, {})
            return str(value.get("S", "")) if isinstance(value, dict) else ""

        lease = text(LEASE)
        return cls(text(HASH_KEY), text(OWNER), text(RVN), int(lease) if lease.isdigit() else None,
                   text(RELEASED) == "1")


def make_client(config: DynamoDBLockConfig, call_timeout_s: float) -> Any:
    """A boto3 DynamoDB client for the lock: the config's region, endpoint and credentials (else the SDK's chain),
    no botocore retries, and connect/read timeouts of ``call_timeout_s``."""
    import boto3
    from botocore.config import Config

    creds = config.credentials
    session = boto3.session.Session(
        aws_access_key_id=creds.access_key if creds else None,
        aws_secret_access_key=creds.secret_key if creds else None,
        aws_session_token=creds.session_token if creds else None,
        region_name=config.region)
    return session.client("dynamodb", endpoint_url=config.endpoint_url, config=Config(
        retries={"total_max_attempts": 1}, connect_timeout=call_timeout_s, read_timeout=call_timeout_s,
        tcp_keepalive=True))


class LockTable:
    """The lock table of one config, reached through ``client`` (see the module docstring)."""

    def __init__(self, config: DynamoDBLockConfig, client: Any) -> None:
        self.config = config
        self.client = client
        self._secrets = config.credentials.secrets() if config.credentials else ()

    @property
    def endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    @property
    def where(self) -> str:
        """How messages name the lock table."""
        return (f"DynamoDB lock table {self.config.table} (region {self.config.region}, endpoint "
                f"{self.endpoint})")

    # --- the table -----------------------------------------------------------------------------------------

    def status(self) -> str | None:
        """The table's status (``ACTIVE``, ``CREATING``...), ``None`` when it does not exist."""
        reply = self._call("DescribeTable", "ResourceNotFoundException", TableName=self.config.table)
        return str(reply["Table"]["TableStatus"]) if reply else None

    def create(self) -> bool:
        """Create the table as Hudi does (hash key ``key`` S, the billing mode); False when it exists already."""
        request: dict[str, Any] = {
            "TableName": self.config.table,
            "KeySchema": [{"AttributeName": HASH_KEY, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": HASH_KEY, "AttributeType": "S"}],
            "BillingMode": self.config.billing_mode,
        }
        if self.config.billing_mode == "PROVISIONED":
            request["ProvisionedThroughput"] = {"ReadCapacityUnits": self.config.read_capacity,
                                                "WriteCapacityUnits": self.config.write_capacity}
        return bool(self._call("CreateTable", "ResourceInUseException", **request))

    # --- the lock item -------------------------------------------------------------------------------------

    def get(self, key: str) -> LockItem | None:
        """The lock item, read consistently; ``None`` when nobody holds the lock."""
        reply = self._call("GetItem", TableName=self.config.table, Key={HASH_KEY: {"S": key}}, ConsistentRead=True)
        item = reply.get("Item")
        return LockItem.from_wire(item) if item else None

    def put(self, key: str, owner: str, rvn: str, lease_ms: int, *, over: LockItem | None = None) -> None:
        """Write our item: over nothing (``over`` None), over a released item, or over an expired one (its RVN)."""
        request: dict[str, Any] = {
            "TableName": self.config.table,
            "Item": {HASH_KEY: {"S": key}, OWNER: {"S": owner}, LEASE: {"S": str(lease_ms)}, RVN: {"S": rvn}},
        }
        if over is None:
            request.update(ConditionExpression=COND_ABSENT, ExpressionAttributeNames={"#pk": HASH_KEY})
        elif over.released:
            request.update(ConditionExpression=COND_RELEASED,
                           ExpressionAttributeNames={"#pk": HASH_KEY, "#ir": RELEASED},
                           ExpressionAttributeValues={":ir": {"S": "1"}})
        else:
            request.update(ConditionExpression=COND_SAME_RVN,
                           ExpressionAttributeNames={"#pk": HASH_KEY, "#rvn": RVN},
                           ExpressionAttributeValues={":rvn": {"S": over.rvn}})
        self._call("PutItem", **request)

    def renew(self, key: str, owner: str, rvn: str, new_rvn: str, lease_ms: int) -> None:
        """The heartbeat: a new RVN (and the lease again) on our item, if it is still ours at ``rvn``."""
        self._call("UpdateItem", TableName=self.config.table, Key={HASH_KEY: {"S": key}},
                   UpdateExpression="SET #ld = :ld, #rvn = :newRvn", ConditionExpression=COND_OURS,
                   ExpressionAttributeNames={**NAMES_HELD, "#ld": LEASE},
                   ExpressionAttributeValues={":ld": {"S": str(lease_ms)}, ":newRvn": {"S": new_rvn},
                                              ":rvn": {"S": rvn}, ":on": {"S": owner}})

    def delete(self, key: str, owner: str, rvn: str) -> None:
        """The release: delete our item, if it is still ours at ``rvn``."""
        self._call("DeleteItem", TableName=self.config.table, Key={HASH_KEY: {"S": key}},
                   ConditionExpression=COND_OURS, ExpressionAttributeNames=dict(NAMES_HELD),
                   ExpressionAttributeValues={":rvn": {"S": rvn}, ":on": {"S": owner}})

    # --- errors --------------------------------------------------------------------------------------------

    def _call(self, op: str, expected_error: str | None = None, **request: Any) -> dict[str, Any]:
        """The reply to one request; ``{}`` when it failed with the error code ``expected_error``."""
        method = getattr(self.client, _snake(op))
        try:
            reply: dict[str, Any] = method(**request)
            return reply
        except ClientError as e:
            if expected_error is not None and e.response.get("Error", {}).get("Code") == expected_error:
                return {}
            raise self._client_error(op, e) from None
        except (NoCredentialsError, PartialCredentialsError):
            raise LockError(f"{self.where}: no AWS credentials for {op}: set hoodie.aws.access.key and "
                            "hoodie.aws.secret.key, or give the AWS SDK its credentials (environment, profile, "
                            "instance role)") from None
        except (BotoConnectionError, HTTPClientError) as e:
            raise Unreachable(f"{op}: {self._clean(str(e))}") from None
        except BotoCoreError as e:
            raise LockError(f"{self.where}: {op} failed: {self._clean(str(e))}") from None

    def _client_error(self, op: str, e: ClientError) -> Exception:
        error = e.response.get("Error", {})
        code, message = str(error.get("Code", "")), str(error.get("Message", ""))
        fields = dict(_XML_FIELD.findall(message))  # a server that answers in XML (moto's IAM checks)
        code, message = fields.get("Code", code), fields.get("Message", message)
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        text = self._clean(f"{code}: {message}" if message else code)
        if code == "ConditionalCheckFailedException":
            return ConditionFailed(text)
        if code == "ResourceNotFoundException":
            return LockError(f"{self.where}: the table does not exist ({op}: {text})")
        if code in _DENIED or status == 403:
            return LockError(f"{self.where}: access denied to {op}: {text}")
        if code in _RETRYABLE or status >= 500 or status == 429:
            return Unreachable(f"{op}: {text}")
        return LockError(f"{self.where}: {op} failed: {text}")

    def _clean(self, text: str) -> str:
        """One line, short, and without a secret."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = " ".join(text.split())
        return text if len(text) <= 400 else text[:397] + "..."


def _snake(op: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()


__all__ = ["ConditionFailed", "LockItem", "LockTable", "Unreachable", "make_client"]
