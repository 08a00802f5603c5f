"""The Hadoop S3A settings that reach the same bucket as this process's own S3 client (`object_config`).

Spark reads a table on S3 through Hadoop's S3A connector when the daemon is set to (``clusterd.spark.object.store
.reader=s3a``); it must then reach the bucket exactly where the daemon does. `s3a_bucket_options` gives the
per-bucket keys (``fs.s3a.bucket.<bucket>.*``: they apply to that bucket only, so tables in buckets of different
stores or accounts coexist in one session) from the same sources the daemon's client resolves, highest first: the
spec's options, then the environment as the AWS SDKs read it. What is found is set; what is not is left to S3A's
own defaults (its credential chain: environment, profiles, web identity on Kubernetes, instance metadata).

- endpoint: the ``endpoint`` option (or its aliases), ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``; an endpoint
  given means path-style requests unless ``virtual_hosted_style_request`` says otherwise, and an ``http://`` one
  turns TLS off;
- region: the ``region`` option, ``AWS_REGION``, ``AWS_DEFAULT_REGION``;
- credentials: ``access_key_id``/``secret_access_key``/``session_token`` options, else ``AWS_ACCESS_KEY_ID``/
  ``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, through S3A's simple (or temporary, with a token) provider.

The values hold secrets: they go to Spark's configuration (whose redaction hides ``secret``/``key``/``token``
values), never to a log line or an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hudi_clusterd.storage.object_config import STORE_KEY, Location, truthy

S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3_SCHEME_KEY = "spark.hadoop.fs.s3.impl"
"""The Spark setting that has ``s3://`` served by `S3A_FILE_SYSTEM` too."""
_SIMPLE = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_TEMPORARY = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
_ALIASES = {
    "aws_endpoint": "endpoint", "aws_endpoint_url": "endpoint", "aws_endpoint_url_s3": "endpoint",
    "endpoint_url": "endpoint", "aws_region": "region", "aws_default_region": "region",
    "aws_access_key_id": "access_key_id", "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token", "aws_token": "session_token", "token": "session_token",
    "aws_allow_http": "allow_http", "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
}  # fmt: skip


def s3a_bucket_options(loc: Location, options: Mapping[str, str], env: Mapping[str, str] | None = None
                       ) -> dict[str, str] | None:
    """The ``fs.s3a.bucket.<bucket>.*`` Hadoop settings reaching ``loc``'s bucket as the daemon's client does
    (see the module docstring); None where S3A cannot (not S3, or the in-memory test store)."""
    env = os.environ if env is None else env
    opts = {_ALIASES.get(k.strip().lower(), k.strip().lower()): v.strip() for k, v in options.items()}
    if loc.cloud != "s3" or STORE_KEY in opts:
        return None
    out: dict[str, str] = {}
    endpoint = opts.get("endpoint") or env.get("AWS_ENDPOINT_URL_S3", "") or env.get("AWS_ENDPOINT_URL", "")
    if endpoint:
        out["endpoint"] = endpoint
        virtual = opts.get("virtual_hosted_style_request") or env.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")
        out["path.style.access"] = "false" if truthy(virtual) else "true"
        if endpoint.startswith("http://"):
            out["connection.ssl.enabled"] = "false"
    region = opts.get("region") or env.get("AWS_REGION", "") or env.get("AWS_DEFAULT_REGION", "")
    if region:
        out["endpoint.region"] = region
    key_id, secret, token = opts.get("access_key_id", ""), opts.get("secret_access_key", ""), \
        opts.get("session_token", "")
    if not (key_id or secret):
        key_id, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
        token = env.get("AWS_SESSION_TOKEN", "")
    if key_id and secret:
        out["access.key"], out["secret.key"] = key_id, secret
        out["aws.credentials.provider"] = _TEMPORARY if token else _SIMPLE
        if token:
            out["session.token"] = token
    return {f"fs.s3a.bucket.{loc.bucket}.{key}": value for key, value in out.items()}


__all__ = ["S3A_FILE_SYSTEM", "S3_SCHEME_KEY", "s3a_bucket_options"]
