"""Whether a relative path stays below its root: the one rule that every storage (each `Storage` method that takes a
relative path, ``hudi_clusterd.storage.paths``) and the timeline's decoders (plans, commit metadata, markers,
``domain.file_group.check_relative_path``) apply.

A relative path leaves its root, or names something other than a file below it, when it is absolute (``/etc/x``),
has a ``..`` segment, holds a backslash (a separator on Windows, where Hadoop reads ``a\\..\\b`` as ``a/../b``), a
control character (NUL included) or is a URI or a drive path (``s3://other-bucket/x``, ``C:/x``). Hudi's writers
name such paths only for partition values holding those characters without URL encoding; a table with one is
refused too.
"""

from __future__ import annotations

import re

__all__ = ["escape_reason"]

_SCHEME_OR_DRIVE = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*:/")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def escape_reason(path: str) -> str | None:
    """Why ``path``, read relative to a root, does not stay below it (a few words); None when it does. ``""`` (the
    root itself) stays."""
    if path.startswith("/"):
        return "an absolute path"
    if _SCHEME_OR_DRIVE.match(path) or "://" in path:
        return "a URI"
    if "\\" in path:
        return "a backslash"
    if _CONTROL.search(path):
        return "a control character"
    if ".." in path.split("/"):
        return "a '..' segment"
    return None
