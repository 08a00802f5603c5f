"""Paths confined to a storage's root: the one check every `Storage` method that takes a relative path (and
`Storage.rel_from_uri`, on what it found) makes before anything is read, written or deleted.

The rule is ``domain.paths.escape_reason`` (an absolute path, a ``..`` segment, a backslash, a control character,
a URI); the timeline's decoders apply the same rule to the paths that plans, commit metadata and markers name.
"""

from __future__ import annotations

import posixpath

from hudi_clusterd.domain.paths import escape_reason
from hudi_clusterd.errors import PathOutsideStorageError

__all__ = ["confine", "inside", "outside"]


def outside(path: str, storage: str, reason: str | None = None) -> PathOutsideStorageError:
    """The error that refuses ``path`` (a relative path or a URI) for the storage whose base URI is ``storage``."""
    return PathOutsideStorageError(f"path {path!r} is outside the table's storage {storage}"
                                   + (f" ({reason})" if reason else ""))


def confine(rel: str, storage: str) -> str:
    """``rel`` when it stays below the root of ``storage`` (its base URI, named in the error); otherwise
    `PathOutsideStorageError` naming both."""
    reason = escape_reason(rel)
    if reason is not None:
        raise outside(rel, storage, reason)
    return rel


def inside(path: str, root: str, uri: str, base: str) -> str:
    """``path`` (the path part of ``uri``, with the bucket where the storage's ``root`` has it) made relative to
    ``root``. A ``..`` segment, a path outside ``root``, or a remainder that `confine` refuses raise
    `PathOutsideStorageError` naming ``uri`` and ``base``."""
    if ".." in path.split("/"):
        raise outside(uri, base, "a '..' segment")
    norm = posixpath.normpath(path) if path else path
    root = root.rstrip("/")
    if root and not (norm == root or norm.startswith(root + "/")):
        raise outside(uri, base)
    rel = norm[len(root):].lstrip("/")
    reason = escape_reason(rel)
    if reason is not None:
        raise outside(uri, base, reason)
    return rel
