"""The Hadoop S3A settings that reach the same bucket as this process's own S3 client (`object_config`).

Spark reads a table on S3 through Hadoop's S3A connector when the daemon is set to (``clusterd.spark.object.store
.reader=s3a``); it must then reach the bucket exactly where the daemon does. `s3a_bucket_options` gives the
per-bucket keys (``fs.s3a.bucket.<bucket>.*``: they apply to that bucket only, so tables in buckets of different
stores or accounts coexist in one session) from the settings the daemon's client is built from
(`s3_settings.resolve_s3`: the spec's options, then the environment as the AWS SDKs read it). What is found is
set: the endpoint (path-style unless virtual-hosted requests are asked for, TLS off for ``http://``), the region
(``us-east-1`` when none is given and no credential chain is asked, as the daemon's client takes it), and the
credentials through S3A's simple (or temporary, with a token) provider. What is not is left to S3A's own
defaults (its credential chain: environment, profiles, web identity on Kubernetes, instance metadata).

The values hold secrets: they go to Spark's configuration (whose redaction hides ``secret``/``key``/``token``
values), never to a log line or an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hudi_clusterd.storage.object_config import STORE_KEY, Location
from hudi_clusterd.storage.s3_settings import resolve_s3

S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3_SCHEME_KEY = "spark.hadoop.fs.s3.impl"
"""The Spark setting that has ``s3://`` served by `S3A_FILE_SYSTEM` too."""
_SIMPLE = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"


def s3a_bucket_options(loc: Location, options: Mapping[str, str], env: Mapping[str, str] | None = None
                       ) -> dict[str, str] | None:
    """The ``fs.s3a.bucket.<bucket>.*`` Hadoop settings reaching ``loc``'s bucket as the daemon's client does
    (see the module docstring); None where S3A cannot (not S3, or the in-memory test store)."""
    env = os.environ if env is None else env
    if loc.cloud != "s3" or STORE_KEY in {k.strip().lower() for k in options}:
        return None
    settings = resolve_s3(options, env, f"{loc.scheme}://{loc.bucket}")
    out: dict[str, str] = {}
    if settings.endpoint:
        out["endpoint"] = settings.endpoint
        out["path.style.access"] = "true" if settings.path_style else "false"
        if settings.endpoint.startswith("http://"):
            out["connection.ssl.enabled"] = "false"
    if settings.fixed_region:
        out["endpoint.region"] = settings.fixed_region
    if (c := settings.credentials) is not None:
        out["access.key"], out["secret.key"] = c.access_key_id, c.secret_access_key
        out["aws.credentials.provider"] = _TEMPORARY if c.session_token else _SIMPLE
        if c.session_token:
            out["session.token"] = c.session_token
    return {f"fs.s3a.bucket.{loc.bucket}.{key}": value for key, value in out.items()}


__all__ = ["S3A_FILE_SYSTEM", "S3_SCHEME_KEY", "s3a_bucket_options"]
