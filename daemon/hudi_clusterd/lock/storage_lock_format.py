"""What Apache Hudi's ``StorageBasedLockProvider`` (Hudi 1.0.2+, RFC-91) keeps in storage and reads from its keys:
one file, ``.hoodie/.locks/table_lock.json``, never deleted, holding ``{"expired": <bool>, "validUntil": <epoch
ms>, "owner": "<uuid>"}`` (other fields ignored), held while not expired and until ``validUntil`` plus 500 ms; and
the writers' validity and renew interval, checked with Hudi's constraints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from hudi_clusterd.domain.keys import Key, KeyReader
from hudi_clusterd.domain.values import java_long
from hudi_clusterd.errors import LockError

__all__ = [
    "CLOCK_DRIFT_S",
    "DEFAULT_RENEW_S",
    "DEFAULT_VALIDITY_S",
    "LOCKS_FOLDER",
    "LOCK_FILE",
    "RENEW",
    "STORAGE_LOCK_KEYS",
    "STORAGE_PROVIDER",
    "VALIDITY",
    "LockData",
    "StorageLockTimes",
    "storage_lock_times",
]

STORAGE_PROVIDER = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCKS_FOLDER = ".hoodie/.locks"
"""Hudi 1.x's folder of lock files (``HoodieTableMetaClient.LOCKS_FOLDER_NAME``); Hudi 1.2 also keeps its lock
audit there (``audit_enabled.json``, ``audit/<ms>_<owner>.jsonl``)."""
LOCK_FILE = f"{LOCKS_FOLDER}/table_lock.json"
CLOCK_DRIFT_S = 0.5
"""How long past ``validUntil`` a lock still counts as held (Hudi's ``CLOCK_DRIFT_BUFFER_MS``)."""

DEFAULT_VALIDITY_S = 300
DEFAULT_RENEW_S = 30
MIN_VALIDITY_S = 10
MIN_RENEW_S = 1
VALIDITY_PER_RENEW = 10

VALIDITY = Key("hoodie.write.lock.storage.validity.timeout.secs", str(DEFAULT_VALIDITY_S), java_long, (
    "Seconds one write of a StorageBasedLockProvider lock (.hoodie/.locks/table_lock.json) holds it (at least "
    f"{MIN_VALIDITY_S}, and at least {VALIDITY_PER_RENEW} renew intervals); the daemon's leases last as long."))
RENEW = Key("hoodie.write.lock.storage.renew.interval.secs", str(DEFAULT_RENEW_S), java_long, (
    f"Seconds between two renewals of a StorageBasedLockProvider lock (at least {MIN_RENEW_S})."),
    aliases=("hoodie.write.lock.storage.heartbeat.poll.secs",))
STORAGE_LOCK_KEYS = (VALIDITY, RENEW)
"""The keys of the storage lock, for the reference."""


@dataclass(frozen=True, slots=True)
class LockData:
    """The content of the lock file."""

    expired: bool
    valid_until_ms: int
    owner: str

    def held_at(self, now_ms: int) -> bool:
        """Whether a writer whose wall clock reads ``now_ms`` sees the lock held by ``owner``."""
        return not self.expired and now_ms <= self.valid_until_ms + int(CLOCK_DRIFT_S * 1000)

    def to_json(self) -> bytes:
        """The file's bytes, as Hudi writes them (compact, in Hudi's field order)."""
        return json.dumps({"expired": self.expired, "validUntil": self.valid_until_ms, "owner": self.owner},
                          separators=(",", ":")).encode()

    @classmethod
    def parse(cls, data: bytes, source: str) -> LockData:
        """Read a lock file (``source`` names it in errors); `LockError` unless it holds the three fields."""
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise LockError(f"{source}: not a lock file of Hudi's StorageBasedLockProvider (not JSON: {e}); if no "
                            "writer of the table runs, delete it") from e
        if not isinstance(doc, dict):
            raise LockError(f"{source}: not a lock file of Hudi's StorageBasedLockProvider (a JSON "
                            f"{type(doc).__name__}, not an object); if no writer of the table runs, delete it")
        expired, valid_until, owner = doc.get("expired"), doc.get("validUntil"), doc.get("owner")
        if (isinstance(expired, bool) and isinstance(valid_until, int) and not isinstance(valid_until, bool)
                and isinstance(owner, str)):
            return cls(expired, valid_until, owner)
        checks = (("expired", "true or false", isinstance(expired, bool)),
                  ("validUntil", "an integer (epoch ms)", isinstance(valid_until, int)
                   and not isinstance(valid_until, bool)),
                  ("owner", "a string", isinstance(owner, str)))
        problems = [f"{name!r} is missing" if name not in doc else f"{name!r} must be {kind}, got {doc[name]!r}"
                    for name, kind, ok in checks if not ok]
        raise LockError(f"{source}: not a lock file of Hudi's StorageBasedLockProvider ({'; '.join(problems)}); "
                        "if no writer of the table runs, delete it")


@dataclass(frozen=True, slots=True)
class StorageLockTimes:
    """How long one write holds the lock and how often its holder renews it, in seconds."""

    validity_s: int = DEFAULT_VALIDITY_S
    renew_interval_s: int = DEFAULT_RENEW_S


def storage_lock_times(props: Mapping[str, str]) -> tuple[StorageLockTimes | None, list[str]]:
    """The times the writers' ``hoodie.write.lock.storage.*`` keys set, or None with the problems
    (``<key>: must be ..., got ...``), checked as Hudi checks them."""
    reader = KeyReader(props)
    validity, renew = reader.parsed(VALIDITY), reader.parsed(RENEW)
    renew_key = (reader.lookup(RENEW) or (RENEW.name, ""))[0]
    problems = reader.problems
    if validity is not None and validity < MIN_VALIDITY_S:
        problems.append(f"{VALIDITY.name}: must be at least {MIN_VALIDITY_S} seconds, got {validity}")
    if renew is not None and renew < MIN_RENEW_S:
        problems.append(f"{renew_key}: must be at least {MIN_RENEW_S} second, got {renew}")
    if validity is not None and renew is not None and validity < VALIDITY_PER_RENEW * renew:
        problems.append(f"{VALIDITY.name}: must be at least {VALIDITY_PER_RENEW} times {renew_key} ({renew}), got "
                        f"{validity}")
    if problems or validity is None or renew is None:
        return None, problems
    return StorageLockTimes(validity, renew), []
