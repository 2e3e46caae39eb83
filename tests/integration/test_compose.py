"""Offline checks of the scale-out stack (no Docker engine here): docker-compose.yaml and docker/Dockerfile.

The compose file is validated against the Compose specification bundled with check-jsonschema
(no network), then checked for what the spec cannot see: pinned images, the Spark version equal
to the pinned pyspark, the Airflow base equal to the pinned Airflow, existing depends_on targets,
and a definition for every connection the DAGs use.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import rebalance_advisor
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
REQUIRED_CONN_IDS = {"kafka_default", "spark_default", "rebalance_advisor_db"}
#: Where the DAGs' conn-id defaults live besides dags/*.py (modules the DAG files delegate to).
CONN_ID_MODULES = [ROOT / "include" / "rebalance_advisor" / "airflow_support.py"]

_VAR = re.compile(r"\$\{(?P<name>\w+)(?::?(?P<op>[-?])(?P<arg>[^}]*))?\}")


def _interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose-style ``${VAR:-default}`` / ``${VAR:?msg}`` with an empty environment (plus ``env``)."""
    env = env or {}

    def replace(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if env.get(name):
            return env[name]
        if op == "-":
            return arg
        if op == "?":
            return f"<{name}>"
        return ""

    return _VAR.sub(replace, value.replace("$$", "\0")).replace("\0", "$")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+)", line)
        if match:
            pins[match[1].lower()] = match[2]
    return pins


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    return _pins(ROOT / "requirements.txt")


def _stages(dockerfile: Path) -> dict[str, dict]:
    """Stages of a Dockerfile: name -> {"base": image or stage, "copies_from": [stage or image]}."""
    stages: dict[str, dict] = {}
    current: dict | None = None
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if match := re.match(r"(?i)^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line):
            current = {"base": match[1], "copies_from": []}
            stages[match[2] or f"#{len(stages)}"] = current
        elif current is not None and (match := re.match(r"(?i)^COPY\s+.*--from=(\S+)", line)):
            current["copies_from"].append(match[1])
    return stages


def _external_images(stages: dict[str, dict], target: str) -> set[str]:
    """Every registry image a target is built from or copies from (stage names resolved)."""
    seen: set[str] = set()
    images: set[str] = set()
    todo = [target]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in stages:
            images.add(name)
            continue
        todo.append(stages[name]["base"])
        todo.extend(stages[name]["copies_from"])
    return images


def _image_tag(image: str) -> str | None:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _assert_pinned(image: str, where: str) -> None:
    tag = _image_tag(image)
    assert tag, f"{where}: image {image!r} has no tag"
    assert tag != "latest" and not tag.startswith("latest-"), f"{where}: image {image!r} uses 'latest'"
    assert re.search(r"\d+\.\d+", tag) or "@sha256:" in image, (
        f"{where}: image {image!r} is not pinned to an explicit version"
    )


def _built_from_dockerfile(service: dict) -> tuple[Path, str] | None:
    build = service.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        return ROOT / build / "Dockerfile", ""
    context = ROOT / build.get("context", ".")
    return context / build.get("dockerfile", "Dockerfile"), build.get("target", "")


def _check_compose_spec(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with the Compose spec it bundles (works offline: no schema download)."""
    checker = Path(sys.executable).parent / "check-jsonschema"
    command = [str(checker), "--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_compose_file_is_valid_against_the_compose_spec() -> None:
    result = _check_compose_spec(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_spec_check_rejects_a_broken_file(tmp_path: Path) -> None:
    """The validator really validates: an unknown condition and key are errors."""
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(
        "services:\n  a:\n    image: busybox:1.37\n    depends_on:\n      b:\n"
        "        condition: service_done\n    restart_policy: always\n"
    )
    assert _check_compose_spec(broken).returncode != 0


def test_the_stack_has_the_expected_services(compose: dict) -> None:
    expected = {
        "postgres",
        "kafka",
        "spark-master",
        "spark-worker",
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "demo-load",
    }
    assert expected <= set(compose["services"])


def test_every_image_is_pinned(compose: dict) -> None:
    for name, service in compose["services"].items():
        image = service.get("image")
        built = _built_from_dockerfile(service)
        assert image or built, f"service {name} has neither image nor build"
        if image:
            _assert_pinned(_interpolate(image), f"service {name}")
        if image and built:
            # Locally built images carry the package version by default.
            assert _image_tag(_interpolate(image)) == rebalance_advisor.__version__, (
                f"service {name}: built image {image!r} should default to the package version"
            )
        if built:
            dockerfile, target = built
            assert dockerfile.is_file(), f"service {name}: {dockerfile} is missing"
            stages = _stages(dockerfile)
            assert not target or target in stages, f"service {name}: no stage {target!r} in {dockerfile}"
            for base in _external_images(stages, target or list(stages)[-1]):
                _assert_pinned(base, f"{dockerfile.relative_to(ROOT)} (service {name})")


def test_pinning_check_catches_unpinned_images() -> None:
    for bad in ("postgres", "postgres:latest", "apache/kafka:latest", "localhost:5000/kafka"):
        with pytest.raises(AssertionError):
            _assert_pinned(bad, "example")
    _assert_pinned("localhost:5000/apache/kafka:4.3.1", "example")


def _spark_services(compose: dict) -> dict[str, dict]:
    return {
        name: service
        for name, service in compose["services"].items()
        if "org.apache.spark.deploy" in json.dumps(service.get("command", ""))
        or "apache/spark" in str(service.get("image", ""))
    }


def test_spark_image_version_equals_pinned_pyspark(compose: dict, pins: dict[str, str]) -> None:
    pyspark = pins["pyspark"]
    services = _spark_services(compose)
    assert {"spark-master", "spark-worker"} <= set(services)
    for name, service in services.items():
        images = set()
        if "apache/spark" in str(service.get("image", "")):
            images.add(_interpolate(service["image"]))
        if built := _built_from_dockerfile(service):
            dockerfile, target = built
            images |= _external_images(_stages(dockerfile), target)
        spark_images = [image for image in images if image.split(":")[0].endswith("apache/spark")]
        assert spark_images, f"service {name} does not run the official apache/spark distribution"
        for image in spark_images:
            version = (_image_tag(image) or "").split("-")[0]
            assert version == pyspark, f"service {name}: Spark {version} ({image}) but pyspark=={pyspark}"


def test_pyspark_client_matches_pyspark(pins: dict[str, str]) -> None:
    """STACK.md: a different pyspark-client breaks applyInPandas although pip check passes."""
    assert pins.get("pyspark-client", pins["pyspark"]) == pins["pyspark"]


def test_dockerfile_airflow_base_matches_requirements(pins: dict[str, str]) -> None:
    stages = _stages(DOCKERFILE)
    bases = [stage["base"] for stage in stages.values() if stage["base"].startswith("apache/airflow:")]
    assert len(bases) == 1, f"expected one apache/airflow base in {DOCKERFILE}, got {bases}"
    tag = _image_tag(bases[0]) or ""
    match = re.fullmatch(r"(\d+\.\d+\.\d+)-python(\d+)\.(\d+)", tag)
    assert match, f"Airflow base {bases[0]!r} must name the version and the Python (X.Y.Z-pythonA.B)"
    assert match[1] == pins["apache-airflow"], (
        f"Dockerfile has Airflow {match[1]}, requirements.txt {pins['apache-airflow']}"
    )
    assert (int(match[2]), int(match[3])) >= (3, 11), "the project needs Python 3.11 or newer"
    for stage in stages.values():
        if stage["base"] not in stages:
            _assert_pinned(stage["base"], "docker/Dockerfile")


def test_every_depends_on_target_exists(compose: dict) -> None:
    services = set(compose["services"])
    for name, service in compose["services"].items():
        depends = service.get("depends_on") or {}
        targets = depends if isinstance(depends, list) else list(depends)
        for target in targets:
            assert target in services, f"service {name} depends on unknown service {target!r}"
        if isinstance(depends, dict):
            for target, spec in depends.items():
                if spec.get("condition") == "service_healthy":
                    assert "healthcheck" in compose["services"][target], (
                        f"{name} waits for {target} to be healthy, but {target} has no healthcheck"
                    )
                if spec.get("condition") == "service_completed_successfully":
                    assert compose["services"][target].get("restart", "no") == "no", (
                        f"{target} is awaited as one-shot but restarts"
                    )


def _string_value(node: ast.AST | None) -> str | None:
    """A literal conn id: ``"x"`` or ``Param("x", ...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        func_name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if func_name == "Param":
            return _string_value(node.args[0])
    return None


def conn_ids_in(path: Path) -> set[str]:
    """Connection ids a Python file names: ``*conn_id=`` keywords, ``"*conn_id": ...`` dict entries
    (plain or ``Param`` defaults), ``*CONN_ID = "..."`` constants and ``*conn_id`` argument defaults."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg and node.arg.lower().endswith("conn_id"):
            found.add(_string_value(node.value) or "")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and str(key.value).lower().endswith("conn_id"):
                    found.add(_string_value(value) or "")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id.lower().endswith("conn_id"):
                    found.add(_string_value(node.value) or "")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args.posonlyargs + node.args.args
            defaults = [None] * (len(arguments) - len(node.args.defaults)) + node.args.defaults
            pairs = list(zip(arguments, defaults, strict=True))
            pairs += list(zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True))
            for argument, default in pairs:
                if argument.arg.lower().endswith("conn_id"):
                    found.add(_string_value(default) or "")
    return {conn_id for conn_id in found if conn_id}


def test_conn_id_scanner_finds_every_form(tmp_path: Path) -> None:
    sample = tmp_path / "dag.py"
    sample.write_text(
        "from airflow.sdk import Param\n"
        "A_CONN_ID = 'const_conn'\n"
        "params = {'kafka_conn_id': Param('from_param', type='string'), 'db_conn_id': 'plain'}\n"
        "def f(x, spark_conn_id='default_arg', *, other_conn_id='kwonly'): ...\n"
        "op = Op(conn_id='keyword', task_id='t')\n"
    )
    assert conn_ids_in(sample) == {"const_conn", "from_param", "plain", "default_arg", "kwonly", "keyword"}


def test_every_connection_the_dags_use_is_defined(compose: dict) -> None:
    sources = sorted((ROOT / "dags").glob("*.py")) + [path for path in CONN_ID_MODULES if path.exists()]
    used = set().union(*(conn_ids_in(path) for path in sources)) if sources else set()
    needed = used | REQUIRED_CONN_IDS
    for name, service in compose["services"].items():
        if not name.startswith("airflow-"):
            continue
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        defined = {
            key[len("AIRFLOW_CONN_") :].lower(): value
            for key, value in env.items()
            if key.startswith("AIRFLOW_CONN_")
        }
        missing = needed - set(defined)
        assert not missing, (
            f"service {name} lacks AIRFLOW_CONN_* for {sorted(missing)} (DAGs use {sorted(used)})"
        )
        for conn_id, value in defined.items():
            parsed = json.loads(_interpolate(value))
            assert parsed.get("conn_type"), f"{name}: connection {conn_id} has no conn_type"


def test_connections_have_the_expected_shape(compose: dict) -> None:
    env = compose["services"]["airflow-scheduler"]["environment"]
    kafka = json.loads(_interpolate(env["AIRFLOW_CONN_KAFKA_DEFAULT"]))
    assert kafka["conn_type"] == "kafka" and kafka["extra"]["bootstrap.servers"] == "kafka:9092"
    spark = json.loads(_interpolate(env["AIRFLOW_CONN_SPARK_DEFAULT"]))
    assert spark["conn_type"] == "spark" and spark["host"] == "spark://spark-master:7077"
    # Executors reach the driver (the scheduler runs Spark tasks) by its hostname, once a worker is up.
    scheduler = compose["services"]["airflow-scheduler"]
    assert spark["extra"]["spark.driver.host"] == scheduler["hostname"] == "airflow-scheduler"
    assert scheduler["depends_on"]["spark-worker"]["condition"] == "service_healthy"
    database = json.loads(
        _interpolate(env["AIRFLOW_CONN_REBALANCE_ADVISOR_DB"], {"ADVISOR_DB_PASSWORD": "pw"})
    )
    assert database["conn_type"] == "postgres" and database["host"] == "postgres"
    assert database["password"] == "pw", "the plan DB password must come from .env"


def test_no_secret_is_hard_coded(compose: dict) -> None:
    """Every password, key and secret is a required ${VAR:?...} from .env, never a literal."""
    secret_key = re.compile(r"PASSWORD|SECRET|FERNET", re.IGNORECASE)
    for name, service in compose["services"].items():
        env = service.get("environment") or {}
        for key, value in env.items():
            if secret_key.search(key) and not key.endswith("_FILE"):
                assert re.fullmatch(r"\$\{\w+:\?[^}]*\}", str(value)), (
                    f"service {name}: {key} must be a required variable from .env, got {value!r}"
                )
    text = COMPOSE.read_text()
    # Required variables become <NAME> here, so a URL's password must be such a placeholder.
    urls = re.findall(r"\w+(?:\+\w+)?://[^\s'\"]+@[^\s'\"]+", _interpolate(text))
    assert urls, "expected database URLs with credentials in docker-compose.yaml"
    for url in urls:
        credentials = url.split("://", 1)[1].rsplit("@", 1)[0]
        assert re.fullmatch(r"[\w.-]+:<\w+>", credentials), f"literal credentials in {url}"
    example = (ROOT / ".env.example").read_text()
    for variable in set(re.findall(r"\$\{(\w+):\?", text)):
        assert re.search(rf"^#?\s*{variable}=", example, re.MULTILINE), (
            f"{variable} is not documented in .env.example"
        )


def test_named_volumes_are_declared(compose: dict) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
            if source and not source.startswith((".", "/", "~")):
                assert source in declared, f"service {name} uses undeclared volume {source!r}"
    assert {"postgres-data", "kafka-data"} <= declared


def test_the_broker_runs_the_advised_assignor(compose: dict) -> None:
    """The Kafka image carries the broker plugin (built from broker-plugin/) on the broker's class
    path, on the same Kafka version as the local broker, and the broker lists its assignor."""
    from rebalance_advisor.adapters import kafka_jars

    kafka = compose["services"]["kafka"]
    dockerfile, target = _built_from_dockerfile(kafka)
    assert target == "kafka", "the kafka service must be built from the Dockerfile's kafka stage"
    text = dockerfile.read_text()
    assert f"FROM apache/kafka:{kafka_jars.kafka_version()} AS kafka" in text
    assert re.search(
        r"COPY --from=broker-plugin \S+/rebalance-advisor-broker-plugin\.jar /opt/kafka/libs/", text
    )
    assert "COPY broker-plugin/src/main" in text and "COPY broker-plugin/pom.xml" in text
    assignors = kafka["environment"]["KAFKA_GROUP_CONSUMER_ASSIGNORS"].split(",")
    assert assignors[0] == "uniform", "uniform must stay the default for clients that ask for none"
    assert kafka_jars.ADVISED_ASSIGNOR_CLASS in assignors
