"""How each timeline layout encodes what the timeline's files hold: one `TimelineSerde` per layout.

Layout 1 (table versions 6 and 7) keeps commit metadata as JSON and clustering plans as 0.14's Avro; layout 2
(versions 8 and 9) stores every non-empty file as Avro with Hudi 1.x's schemas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hudi_clusterd.domain.commit import CommitMetadata
from hudi_clusterd.domain.plan import RequestedReplaceMetadata
from hudi_clusterd.domain.timeline_layout import TimelineLayout
from hudi_clusterd.formats.avro import (
    decode_commit_metadata_v2,
    encode_commit_metadata_v2,
    encode_requested_replace,
    encode_requested_replace_v2,
)


@dataclass(frozen=True, slots=True)
class TimelineSerde:
    """How one timeline layout encodes commit metadata and clustering plans."""

    encode_commit: Callable[[CommitMetadata], bytes]
    decode_commit: Callable[[bytes, str], CommitMetadata]
    encode_plan: Callable[[RequestedReplaceMetadata], bytes]


LAYOUT_1_SERDE = TimelineSerde(CommitMetadata.to_json_bytes, CommitMetadata.from_json_bytes, encode_requested_replace)
LAYOUT_2_SERDE = TimelineSerde(encode_commit_metadata_v2, decode_commit_metadata_v2, encode_requested_replace_v2)


def serde_of(layout: TimelineLayout) -> TimelineSerde:
    """The encoding of ``layout``'s files."""
    return LAYOUT_2_SERDE if layout.records_completion_time else LAYOUT_1_SERDE
