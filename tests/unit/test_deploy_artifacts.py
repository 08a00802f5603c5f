"""The packaging and deployment artifacts (Dockerfile, deploy/k8s, deploy/prometheus, deploy/spark) agree with the
code they deploy: the CLI they invoke, the settings they configure, the metrics they alert on.

No JVM and no Docker: YAML is read with PyYAML (a test dependency).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hudi_clusterd.cli import build_parser
from hudi_clusterd.engine.ingest.sink import HudiStreamingSink
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.runtime.metrics import PLAN_OUTCOMES, RELOAD_OUTCOMES, Metrics
from hudi_clusterd.runtime.metrics_server import MetricsServer
from hudi_clusterd.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
PROM = DEPLOY / "prometheus"
SPARK = DEPLOY / "spark"
DOCKERFILE = REPO / "Dockerfile"
CONFIG_DIR = "/etc/hudi-clusterd"
PROPS_PATH = f"{CONFIG_DIR}/clusterd.properties"


def load_yaml_documents(path: Path) -> list[Any]:
    """Every document of a YAML file, read with PyYAML's safe loader (empty documents left out)."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


def k8s_objects() -> dict[tuple[str, str], dict[str, Any]]:
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_yaml_documents(path):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in objects, f"{path.name}: {key} defined twice"
            objects[key] = doc
    return objects


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = k8s_objects()[("Deployment", "events-ingest")]["spec"]["template"]["spec"]
    return spec


def container(name: str) -> dict[str, Any]:
    found = [c for c in pod_spec()["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container named {name}"
    return found[0]


def configmap_settings(tmp_path: Path) -> tuple[Settings, list[str]]:
    props = k8s_objects()[("ConfigMap", "hudi-clusterd-config")]["data"]["clusterd.properties"]
    file = tmp_path / "clusterd.properties"
    file.write_text(props, encoding="utf-8")
    return load_settings(file)


# --- YAML files ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_deploy_yaml_file_parses_as_mappings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "\t" not in text, "YAML must be indented with spaces"
    docs = load_yaml_documents(path)
    assert docs and all(isinstance(d, dict) for d in docs)


# --- Dockerfile -----------------------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        word, _, args = full.partition(" ")
        out.append((word.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continuation"
    return out


def instruction(name: str) -> list[str]:
    return [args for word, args in dockerfile_instructions() if word == name]


def test_dockerfile_runtime_contract_is_declared() -> None:
    assert instruction("FROM") == ["python:3.11-slim-bookworm"]
    assert instruction("STOPSIGNAL") == ["SIGTERM"]
    assert any("9464" in e.split() for e in instruction("EXPOSE"))
    assert [json.loads(e) for e in instruction("ENTRYPOINT")] == [["hudi-clusterd"]]
    assert [json.loads(c) for c in instruction("CMD")] == [["run", "--props", PROPS_PATH]]
    env = " ".join(instruction("ENV"))
    assert re.search(r"\bJAVA_HOME=/\S+", env)
    assert re.search(r"\bPYSPARK_PYTHON=python3\b", env)


def test_dockerfile_user_is_numeric_non_root_and_set_after_install() -> None:
    words = [w for w, _ in dockerfile_instructions()]
    users = instruction("USER")
    assert users == ["10001:10001"]
    uid = users[0].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    creation = [r for r in instruction("RUN") if "useradd" in r]
    assert creation and "--uid 10001" in creation[0] and "--create-home" in creation[0]
    last_run = max(i for i, w in enumerate(words) if w == "RUN")
    assert words.index("USER") > last_run, "USER must follow every RUN (installs run as root)"


def test_dockerfile_apt_install_has_java_17_procps_and_no_leftovers() -> None:
    apt = [r for r in instruction("RUN") if "apt-get install" in r]
    assert len(apt) == 1
    assert "--no-install-recommends" in apt[0]
    packages = re.search(r"apt-get install ([^;&]+)", apt[0])
    assert packages is not None
    assert {"openjdk-17-jre-headless", "procps"} <= set(packages.group(1).split())
    assert "rm -rf /var/lib/apt/lists/*" in apt[0]


def test_dockerfile_pip_install_uses_no_cache_of_the_copied_project() -> None:
    pip = [r for r in instruction("RUN") if "pip install" in r]
    assert len(pip) == 1 and "--no-cache-dir" in pip[0]
    copied = {Path(src).as_posix().rstrip("/") for c in instruction("COPY") for src in c.split()[:-1]}
    assert copied == {"pyproject.toml", "README.md", "daemon"}


def test_dockerfile_copied_sources_exist_and_are_not_dockerignored() -> None:
    patterns = [
        line.strip() for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]  # fmt: skip
    for required in (".git", "tests", "bench", ".venv", "venv", ".ci", "**/__pycache__", ".mypy_cache"):
        assert required in patterns, f".dockerignore should exclude {required}"
    for copy in instruction("COPY"):
        for src in copy.split()[:-1]:
            name = src.rstrip("/")
            assert (REPO / name).exists(), f"COPY source {name} is missing"
            for pattern in patterns:
                if pattern.startswith("!"):
                    continue
                bare = pattern.removeprefix("**/")
                assert not fnmatch(name, pattern) and not fnmatch(name, bare), f"{name} excluded by {pattern}"


def _healthcheck_command() -> list[str]:
    (check,) = instruction("HEALTHCHECK")
    options, _, command = check.partition("CMD ")
    assert "--start-period=" in options and "--interval=" in options
    argv: list[str] = json.loads(command)
    return argv


def test_dockerfile_healthcheck_requests_healthz_with_urllib() -> None:
    argv = _healthcheck_command()
    assert argv[0] == "python3" and "urllib.request" in argv[-1]
    assert "http://127.0.0.1:9464/healthz" in argv[-1]


@pytest.mark.parametrize(("healthy", "ok"), [(True, True), (False, False)])
def test_dockerfile_healthcheck_exit_code_follows_healthz(healthy: bool, ok: bool) -> None:
    """Run the HEALTHCHECK's command against a real metrics server (on a free port instead of 9464)."""
    argv = _healthcheck_command()
    with MetricsServer("127.0.0.1", 0, Metrics(), lambda: healthy) as server:
        code = argv[-1].replace("127.0.0.1:9464", f"127.0.0.1:{server.port}")
        result = subprocess.run([sys.executable, *argv[1:-1], code], capture_output=True, timeout=60, check=False)
    assert (result.returncode == 0) is ok, result.stderr.decode()


# --- Kubernetes -----------------------------------------------------------------------------------------------------


def test_k8s_kustomization_lists_every_manifest_and_the_app() -> None:
    (kustomization,) = load_yaml_documents(K8S / "kustomization.yaml")
    manifests = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == manifests
    (generator,) = kustomization["configMapGenerator"]
    assert generator["name"] == "hudi-streaming-app"
    assert generator["files"] == ["streaming_app.py"] and (K8S / "streaming_app.py").is_file()


def test_k8s_deployment_runs_one_pod_of_two_containers_on_the_lake_pvc() -> None:
    objects = k8s_objects()
    deployment = objects[("Deployment", "events-ingest")]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert ("PersistentVolumeClaim", "hudi-lake") in objects
    spec = pod_spec()
    lake = [v["name"] for v in spec["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "hudi-lake"]
    assert len(lake) == 1
    assert sorted(c["name"] for c in spec["containers"]) == ["clusterd", "ingest"]
    for c in spec["containers"]:
        assert any(m["name"] == lake[0] and m["mountPath"] == "/lake" for m in c["volumeMounts"]), c["name"]


def test_k8s_daemon_container_command_parses_as_the_run_command() -> None:
    daemon = container("clusterd")
    argv = [*daemon["command"], *daemon["args"]]
    assert argv[0] == "hudi-clusterd"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "run" and args.props == PROPS_PATH


def test_k8s_config_is_mounted_as_a_folder_for_hot_reload() -> None:
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    mounts = [m for m in container("clusterd")["volumeMounts"] if m["mountPath"] == CONFIG_DIR]
    assert len(mounts) == 1
    assert "subPath" not in mounts[0], "a subPath mount never sees ConfigMap updates"
    assert volumes[mounts[0]["name"]]["configMap"]["name"] == "hudi-clusterd-config"
    assert ("ConfigMap", "hudi-clusterd-config") in k8s_objects()


def test_k8s_configmap_properties_load_without_problems(tmp_path: Path) -> None:
    settings, warnings = configmap_settings(tmp_path)
    assert warnings == []
    assert [(t.name, t.base_path) for t in settings.tables] == [("events", "/lake/events")]
    assert settings.metrics_address == ("0.0.0.0", 9464)
    assert settings.spark_master == "local[2]"
    assert settings.spark_conf_dict["spark.local.dir"].startswith("/tmp/")


def test_k8s_streaming_app_writes_the_table_the_daemon_serves(tmp_path: Path) -> None:
    settings, _ = configmap_settings(tmp_path)
    ingest = container("ingest")
    assert ingest["command"] == ["python3", "/opt/streaming/streaming_app.py"]
    options = dict(a.split("=", 1) for a in ingest["args"])
    assert options["--base-path"] == settings.table("events").base_path
    assert options["--checkpoint"].startswith("/lake/")
    assert set(options) <= _argparse_options(K8S / "streaming_app.py")
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    (app,) = [m for m in ingest["volumeMounts"] if m["mountPath"] == "/opt/streaming"]
    assert volumes[app["name"]]["configMap"]["name"] == "hudi-streaming-app"


def test_k8s_grace_period_exceeds_every_shutdown_budget(tmp_path: Path) -> None:
    settings, _ = configmap_settings(tmp_path)
    grace = pod_spec()["terminationGracePeriodSeconds"]
    assert grace > settings.shutdown_grace_seconds
    stop_timeout = _argparse_default(K8S / "streaming_app.py", "--stop-timeout")
    assert isinstance(stop_timeout, float) and grace > stop_timeout


def test_k8s_daemon_probes_use_healthz_on_the_configured_metrics_port(tmp_path: Path) -> None:
    settings, _ = configmap_settings(tmp_path)
    daemon = container("clusterd")
    ports = {p["name"]: p["containerPort"] for p in daemon["ports"]}
    assert settings.metrics_address is not None
    assert ports["metrics"] == settings.metrics_address[1]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = daemon[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] == "metrics", probe
    startup = daemon["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60, "Spark needs time to start"


def test_k8s_pod_runs_as_the_image_user_with_read_only_root() -> None:
    spec = pod_spec()
    uid = instruction("USER")[0].split(":")[0]
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True and str(security["runAsUser"]) == uid
    assert str(security["fsGroup"]) == uid
    volumes = {v["name"]: v for v in spec["volumes"]}
    for c in spec["containers"]:
        ctx = c["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False, c["name"]
        assert ctx["capabilities"]["drop"] == ["ALL"]
        (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
        assert "emptyDir" in volumes[tmp["name"]], f"{c['name']}: /tmp must be a writable emptyDir"


_QUANTITY = {"": 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}


def _quantity(value: object) -> float:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    assert match and match.group(2) in _QUANTITY, f"bad quantity {value!r}"
    return float(match.group(1)) * _QUANTITY[match.group(2)]


def _java_size(text: str) -> float:
    match = re.fullmatch(r"([0-9]+)([kmgt]?)", text.lower())
    assert match, text
    return int(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " ")


def test_k8s_resources_fit_local_two_and_the_driver_heap(tmp_path: Path) -> None:
    settings, _ = configmap_settings(tmp_path)
    for c in pod_spec()["containers"]:
        requests, limits = c["resources"]["requests"], c["resources"]["limits"]
        for kind in ("cpu", "memory"):
            assert _quantity(requests[kind]) <= _quantity(limits[kind]), f"{c['name']} {kind}"
        assert _quantity(limits["cpu"]) >= 2, f"{c['name']}: local[2] runs two task threads"
    heap = _java_size(settings.spark_conf_dict["spark.driver.memory"])
    assert _quantity(container("clusterd")["resources"]["limits"]["memory"]) > heap * 1.5


def test_k8s_service_exposes_metrics_to_prometheus() -> None:
    service = k8s_objects()[("Service", "hudi-clusterd-metrics")]
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9464" and annotations["prometheus.io/path"] == "/metrics"
    (port,) = service["spec"]["ports"]
    assert port["port"] == 9464 and port["targetPort"] == "metrics"
    labels = k8s_objects()[("Deployment", "events-ingest")]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_k8s_writer_options_configure_hudi_writer_beside_the_daemon() -> None:
    text = k8s_objects()[("ConfigMap", "hudi-writer-options")]["data"]["writer.properties"]
    props = parse_properties(text, "writer.properties")
    assert props["hoodie.clustering.inline"] == "false"
    assert props["hoodie.clustering.async.enabled"] == "false"
    assert props["hoodie.clustering.schedule.inline"] == "false"
    assert props["hoodie.metadata.enable"] == "true"  # the daemon keeps the metadata table true
    assert props["hoodie.write.concurrency.mode"] == "optimistic_concurrency_control"
    assert props["hoodie.write.lock.provider"] == (
        "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
    )
    assert "hoodie.write.lock.filesystem.path" not in props, "the lock file must stay <base>/.hoodie/lock"


# --- the example programs -------------------------------------------------------------------------------------------


def _argparse_calls(path: Path) -> Iterator[ast.Call]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            yield node


def _argparse_options(path: Path) -> set[str]:
    return {a.value for call in _argparse_calls(path) for a in call.args if isinstance(a, ast.Constant)}


def _argparse_default(path: Path, option: str) -> object:
    for call in _argparse_calls(path):
        if any(isinstance(a, ast.Constant) and a.value == option for a in call.args):
            return next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "default")
    raise AssertionError(f"{path.name} has no option {option}")


@pytest.mark.parametrize("path", [K8S / "streaming_app.py", SPARK / "launch.py"], ids=lambda p: p.name)
def test_example_program_compiles(path: Path) -> None:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_streaming_app_uses_only_the_public_sink_api() -> None:
    tree = ast.parse((K8S / "streaming_app.py").read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree))
    ours = [n for n in nodes if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("hudi_clusterd")]
    imported = [(n.module, [a.name for a in n.names]) for n in ours]
    assert imported == [("hudi_clusterd.engine.ingest.sink", ["HudiStreamingSink"])]
    calls = [n for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "HudiStreamingSink"]
    assert len(calls) == 1
    accepted = set(inspect.signature(HudiStreamingSink).parameters)
    assert {k.arg for k in calls[0].keywords} <= accepted
    assert "foreachBatch(sink)" in ast.unparse(tree)


def _load_launcher(monkeypatch: pytest.MonkeyPatch, master: str, conf: list[tuple[str, str]]) -> tuple[Any, list]:
    spec = importlib.util.spec_from_file_location("deploy_spark_launch", SPARK / "launch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls: list[list[str]] = []
    created: list[bool] = []

    class FakeConf:
        def getAll(self) -> list[tuple[str, str]]:
            return conf

    class FakeContext:
        def __init__(self) -> None:
            self.master = master

        def getConf(self) -> FakeConf:
            return FakeConf()

    class FakeSession:
        sparkContext = FakeContext()

    class FakeBuilder:
        def getOrCreate(self) -> FakeSession:
            created.append(True)
            return FakeSession()

    class FakeSparkSession:
        builder = FakeBuilder()

    monkeypatch.setattr(module, "SparkSession", FakeSparkSession)
    monkeypatch.setattr(module, "main", lambda argv: calls.append(list(argv)) or 0)
    return module, [calls, created]


def test_launch_forwards_submit_master_and_sql_conf_to_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = [("spark.sql.shuffle.partitions", "64"), ("spark.app.name", "x"), ("spark.master", "spark://h:7077")]
    module, (calls, _) = _load_launcher(monkeypatch, "spark://h:7077", conf)
    assert module.launch(["--base-path", "/lake/t", "--force"]) == 0
    (argv,) = calls
    assert argv == ["cluster", "--spark-master", "spark://h:7077", "--spark-conf=spark.sql.shuffle.partitions=64",
                    "--base-path", "/lake/t", "--force"]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert args.command == "cluster" and args.spark_master == "spark://h:7077" and args.force
    assert args.spark_conf == ["spark.sql.shuffle.partitions=64"] and args.base_path == "/lake/t"


def test_launch_own_spark_master_is_refused_before_spark_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    module, (calls, created) = _load_launcher(monkeypatch, "yarn", [])
    assert module.launch(["--base-path", "/t", "--spark-master", "local[*]"]) == 2
    assert module.launch(["--base-path", "/t", "--spark-conf=a=b"]) == 2
    assert calls == [] and created == []


# --- deploy/spark ---------------------------------------------------------------------------------------------------


def test_spark_cluster_properties_load_with_a_cluster_master(tmp_path: Path) -> None:
    settings, warnings = load_settings(SPARK / "clusterd-cluster.properties")
    assert warnings == []
    assert settings.spark_master.startswith("spark://")
    conf = settings.spark_conf_dict
    assert conf["spark.driver.host"] not in ("127.0.0.1", "localhost")
    assert "spark.pyspark.python" not in conf, "not applied to a session the daemon creates; use PYSPARK_PYTHON"
    assert settings.metrics_address == ("0.0.0.0", 9464)


def _submit_script(variant: str) -> list[str]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not available")
    result = subprocess.run(
        ["bash", str(SPARK / "spark-submit.sh"), variant], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "DRY_RUN": "1", "BASE_PATH": "/lake/events", "FORCE": "1", "HOME": "/tmp",
             "DRIVER_HOST": "driver.example"},
    )
    assert result.returncode == 0, result.stderr
    return shlex.split(result.stdout)


def test_spark_submit_script_has_valid_bash_syntax() -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not available")
    subprocess.run(["bash", "-n", str(SPARK / "spark-submit.sh")], check=True, timeout=60)


@pytest.mark.parametrize("variant", ["standalone", "kubernetes", "yarn"])
def test_spark_submit_variant_runs_launcher_in_client_mode(variant: str) -> None:
    argv = _submit_script(variant)
    if argv[0] == "env":
        argv = [a for a in argv[1:] if not re.fullmatch(r"[A-Z_]+=.*", a)]
    assert argv[0] == "spark-submit"
    assert argv[argv.index("--deploy-mode") + 1] == "client"
    master = argv[argv.index("--master") + 1]
    assert master.split(":")[0] in {"spark", "k8s", "yarn"}
    (launcher,) = [i for i, a in enumerate(argv) if a.endswith("launch.py")]
    assert Path(argv[launcher]) == SPARK / "launch.py"
    args = build_parser().parse_args(["cluster", "--spark-master", master, *argv[launcher + 1 :]])
    assert args.base_path == "/lake/events" and args.force
    confs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    assert all(re.fullmatch(r"spark\.[\w.\-]+=\S*", c) for c in confs), confs


def test_spark_submit_daemon_variant_runs_the_cluster_properties() -> None:
    argv = _submit_script("daemon")
    assert argv[:2] == ["env", "PYSPARK_PYTHON=python3"]
    args = build_parser().parse_args(argv[3:])
    assert argv[2] == "hudi-clusterd" and args.command == "run"
    assert Path(args.props) == SPARK / "clusterd-cluster.properties"


def test_spark_submit_connect_variant_uses_a_connect_url() -> None:
    argv = _submit_script("connect")
    args = build_parser().parse_args(argv[1:])
    assert argv[0] == "hudi-clusterd" and args.command == "cluster" and args.spark_master.startswith("sc://")


# --- Prometheus -----------------------------------------------------------------------------------------------------


def exported_samples() -> dict[str, list[dict[str, str]]]:
    """Every sample name the daemon exports once a table and each outcome have been seen, with its labels."""
    metrics = Metrics(clock=lambda: 1_700_000_000.0)
    metrics.set_commits_since_clustering("t", 3)
    metrics.set_pending_plans("t", 1, 5.0)
    metrics.set_compaction_blocked("t", 0.0)
    metrics.plan_scheduled("t")
    for outcome in PLAN_OUTCOMES:
        metrics.plan_finished("t", outcome, 1.0, 10, 1)
    metrics.set_snapshot("t", 4, 2)
    metrics.set_files_scanned_ratio("t", 0.5)
    metrics.set_table_busy("t", 0.0)
    for reload_outcome in RELOAD_OUTCOMES:
        metrics.config_reload(reload_outcome)
    metrics.group_started()
    metrics.set_plans_queued(0)
    samples: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(dict(sample.labels))
    return samples


def alert_rules() -> list[dict[str, Any]]:
    (doc,) = load_yaml_documents(PROM / "alerts.yml")
    return [rule for group in doc["groups"] for rule in group["rules"]]


_SELECTOR = re.compile(r"\b(hudi_clusterd_[a-z0-9_]+)(\{[^}]*\})?")


def test_alerts_use_only_metric_names_the_daemon_exports() -> None:
    samples = exported_samples()
    used = {name for rule in alert_rules() for name, _ in _SELECTOR.findall(rule["expr"])}
    assert used, "alerts.yml should alert on the daemon's own metrics"
    assert used <= set(samples), f"unknown metrics: {sorted(used - set(samples))}"


def test_alerts_label_matchers_name_existing_label_values() -> None:
    samples = exported_samples()
    for rule in alert_rules():
        for name, selector in _SELECTOR.findall(rule["expr"]):
            for label, value in re.findall(r'(\w+)="([^"]*)"', selector):
                assert any(s.get(label) == value for s in samples[name]), f"{rule['alert']}: {name}{{{label}={value}}}"


def test_alert_rules_are_well_formed() -> None:
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert re.fullmatch(r"HudiClusterd[A-Z][A-Za-z]+", rule["alert"])
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        if "for" in rule:
            assert re.fullmatch(r"(\d+[smhdwy])+", rule["for"]), rule["for"]
        expr = rule["expr"]
        for opening, closing in ("()", "[]", "{}"):
            assert expr.count(opening) == expr.count(closing), f"{rule['alert']}: unbalanced {opening}{closing}"
        for window in re.findall(r"\[([^\]]+)\]", expr):
            assert re.fullmatch(r"(\d+[smhdwy])+", window), window


def test_alerts_cover_the_required_conditions() -> None:
    exprs = {r["alert"]: " ".join(r["expr"].split()) for r in alert_rules()}
    joined = "\n".join(exprs.values())
    assert 'increase(hudi_clusterd_plans_finished_total{outcome="failed"}[1h]) > 0' in joined
    assert 'hudi_clusterd_plans_finished_total{outcome="conflict"}' in joined
    assert "hudi_clusterd_oldest_pending_plan_age_seconds > 3600" in joined
    assert 'hudi_clusterd_config_reloads_total{outcome="failure"}' in joined
    assert "hudi_clusterd_commits_since_last_clustering" in joined
    assert 'hudi_clusterd_plans_finished_total{outcome="completed"}' in joined
    assert any(re.match(r"up\{[^}]*\} == 0$", e) for e in exprs.values())
    assert any("probe_success" in e or "restarts_total" in e for e in exprs.values())


def test_scrape_jobs_match_the_service_and_the_down_alert() -> None:
    (doc,) = load_yaml_documents(PROM / "scrape.yml")
    jobs = {job["job_name"]: job for job in doc["scrape_configs"]}
    service = k8s_objects()[("Service", "hudi-clusterd-metrics")]
    k8s_job = jobs["hudi-clusterd"]
    keep = {tuple(r["source_labels"]): r["regex"] for r in k8s_job["relabel_configs"] if r.get("action") == "keep"}
    assert keep[("__meta_kubernetes_service_name",)] == service["metadata"]["name"]
    assert keep[("__meta_kubernetes_endpoint_port_name",)] == service["spec"]["ports"][0]["name"]
    static = [t for job in jobs.values() if job["job_name"] != "hudi-clusterd-healthz"
              for sc in job.get("static_configs", []) for t in sc["targets"]]  # fmt: skip
    assert "127.0.0.1:9464" in static
    (down,) = [r for r in alert_rules() if r["expr"].startswith("up{")]
    pattern = re.search(r'job=~"([^"]+)"', down["expr"])
    assert pattern is not None
    watched = {name for name in jobs if re.fullmatch(pattern.group(1), name)}
    assert watched == {"hudi-clusterd", "hudi-clusterd-local"}
    (probe,) = [r for r in alert_rules() if "probe_success" in r["expr"]]
    assert f'job="{jobs["hudi-clusterd-healthz"]["job_name"]}"' in probe["expr"]
    assert jobs["hudi-clusterd-healthz"]["static_configs"][0]["targets"] == ["http://127.0.0.1:9464/healthz"]


# --- deploy/k8s/s3: the daemon alone beside a table on S3 ------------------------------------------------------


def s3_objects() -> dict[tuple[str, str], dict[str, Any]]:
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted((K8S / "s3").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in load_yaml_documents(path):
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def test_k8s_s3_variant_lists_its_manifests_and_has_no_volume_claim() -> None:
    kustomization = load_yaml_documents(K8S / "s3" / "kustomization.yaml")[0]
    manifests = sorted(p.name for p in (K8S / "s3").glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == manifests
    assert not [k for k in s3_objects() if k[0] == "PersistentVolumeClaim"]


def test_k8s_s3_variant_runs_the_daemon_as_its_service_account_with_a_web_identity_role() -> None:
    objects = s3_objects()
    account = objects[("ServiceAccount", "hudi-clusterd")]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    pod = objects[("Deployment", "hudi-clusterd")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "hudi-clusterd"
    (daemon,) = pod["containers"]
    assert daemon["args"] == ["run", "--props", "/etc/hudi-clusterd/clusterd.properties"]
    env = {e["name"]: e.get("value") for e in daemon.get("env", [])}
    assert "AWS_REGION" in env and not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(env)
    assert objects[("Service", "hudi-clusterd-metrics")]["spec"]["selector"] == \
        objects[("Deployment", "hudi-clusterd")]["spec"]["selector"]["matchLabels"]


def test_k8s_s3_configmap_loads_with_the_writers_dynamodb_lock(tmp_path: Path) -> None:
    props = s3_objects()[("ConfigMap", "hudi-clusterd-config")]["data"]["clusterd.properties"]
    file = tmp_path / "clusterd.properties"
    file.write_text(props, encoding="utf-8")
    settings, warnings = load_settings(file)
    assert warnings == []
    (table,) = settings.tables
    assert table.base_path.startswith("s3a://")
    lock = dict(table.lock_properties)
    assert lock["hoodie.write.lock.provider"] == "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
    assert lock["hoodie.table.name"] == "events"
    assert settings.watch_mode.value == "polling"
