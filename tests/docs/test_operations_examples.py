"""The operations pages' examples: connections, Airflow settings, the UI's API calls, compose, make.

What needs a running Airflow or a Docker engine is checked as far as it can be without one: the
settings through the adapters that read them, the API calls' routes against the plugin's app.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def _between_markers(path: Path, name: str) -> str:
    text = path.read_text()
    start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
    assert start in text and end in text, f"{path}: no section {name!r}"
    return text.split(start, 1)[1].split(end, 1)[0].split("\n", 1)[1].rsplit("\n", 1)[0]


def test_kafka_connection_example_reaches_confluent_kafka(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SASL_SSL connection's extra is the client config, and librdkafka knows every key."""
    from confluent_kafka.admin import AdminClient
    from rebalance_advisor.adapters.airflow_connections import kafka_client_config

    connection = json.loads((EXAMPLES / "connections" / "kafka-sasl-ssl.json").read_text())
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps(connection))
    config = kafka_client_config()
    assert config == connection["extra"]
    checked = {k: v for k, v in config.items() if k != "ssl.ca.location"}  # the file is not here
    AdminClient({**checked, "bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 1000})


def test_database_connection_example(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rebalance_advisor.adapters.airflow_connections import database_url_from_connection

    connection = json.loads((EXAMPLES / "connections" / "database-postgres.json").read_text())
    monkeypatch.setenv("AIRFLOW_CONN_REBALANCE_ADVISOR_DB", json.dumps(connection))
    assert database_url_from_connection() == connection["extra"]["sqlalchemy_url"]


def test_airflow_settings_by_hand(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sourced with this checkout and venv: the folders exist and the three connections resolve."""
    from rebalance_advisor.adapters.airflow_connections import (
        database_url_from_connection,
        kafka_client_config,
    )
    from rebalance_advisor.adapters.spark_session import connection_settings

    settings = _between_markers(EXAMPLES / "airflow" / "by-hand.sh", "settings")
    venv = Path(sys.executable).parent.parent
    script = f"REPO={ROOT}; VENV={venv}\n{settings}\nenv -0"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
    assert Path(env["AIRFLOW__CORE__DAGS_FOLDER"], "kafka_rebalance_advisor.py").is_file()
    assert Path(env["AIRFLOW__CORE__PLUGINS_FOLDER"], "rebalance_advisor_plugin.py").is_file()
    assert env["PYSPARK_PYTHON"] == f"{venv}/bin/python"
    for key, value in env.items():
        if key.startswith("AIRFLOW_CONN_"):
            monkeypatch.setenv(key, value)
    assert kafka_client_config() == {"bootstrap.servers": "127.0.0.1:19092"}
    assert database_url_from_connection() == "sqlite:////home/you/.rebalance-advisor/advisor.db"
    assert connection_settings("spark_default")[0] == "local[*]"


def test_ui_api_calls_are_routes_of_the_plugin() -> None:
    """Each `curl` of docs/examples/airflow/ui-api.sh names a route of the app the plugin mounts."""
    from rebalance_advisor.webui.app import create_app
    from starlette.routing import Match

    calls = _between_markers(EXAMPLES / "airflow" / "ui-api.sh", "calls")
    found = re.findall(r"curl -s (?:-X (\w+) )?.*?localhost:8080(/rebalance-advisor/[\w/{}]+)", calls)
    assert len(found) == 2, calls
    app = create_app(lambda: "sqlite://")
    for method, path in found:
        scope = {"type": "http", "method": method or "GET", "path": path.removeprefix("/rebalance-advisor")}
        assert any(route.matches(scope)[0] == Match.FULL for route in app.routes), (method, path)


def test_shell_examples_parse() -> None:
    for script in sorted(EXAMPLES.rglob("*.sh")):
        subprocess.run(["bash", "-n", str(script)], check=True)


def test_compose_env_generator_fills_every_required_value() -> None:
    """docs/operations/compose.md: `docker/generate-env.sh > .env` gives every key .env.example leaves empty."""
    assert "docker/generate-env.sh > .env" in _between_markers(EXAMPLES / "compose.sh", "commands")
    generated = subprocess.run(
        ["bash", str(ROOT / "docker" / "generate-env.sh")], capture_output=True, text=True, check=True
    ).stdout
    values = dict(
        line.split("=", 1) for line in generated.splitlines() if "=" in line and not line.startswith("#")
    )
    required = [
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if re.fullmatch(r"[A-Z_]+=", line.strip())
    ]
    assert required and all(values.get(key) for key in required), (required, sorted(values))


@pytest.mark.parametrize("script", ["fresh-machine.sh", "airflow/stack.sh"])
def test_make_targets_in_examples_exist(script: str) -> None:
    """Every `make X` the docs show is a target (`make -n` prints its commands without running them)."""
    commands = _between_markers(EXAMPLES / script, "commands")
    targets = re.findall(r"^make (\S+)", commands, flags=re.MULTILINE)
    assert targets
    for target in [*targets, "docs", "docs-serve", "docs-check"]:
        result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, f"make {target}: {result.stderr}"


def test_dev_airflow_commands_exist() -> None:
    """docs/operations/airflow.md: `dev airflow start|status|stop` and the options it names."""
    commands = _between_markers(EXAMPLES / "airflow" / "stack.sh", "commands")
    for verb in re.findall(r"dev airflow (\w+)", commands):
        help_text = subprocess.run(
            [str(Path(sys.executable).parent / "rebalance-advisor"), "dev", "airflow", verb, "--help"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        if verb == "start":
            page = (ROOT / "docs" / "operations" / "airflow.md").read_text()
            options = re.findall(r"`(--[a-z-]+)`", page.split("Options:", 1)[1].split(".", 1)[0])
            assert options and all(option in help_text for option in options), options


def test_rest_api_calls_name_real_dags_and_a_valid_conf() -> None:
    """docs/examples/airflow/rest-api.sh: the DAG ids exist, and the advisor conf it triggers with is
    one the advisor's parameter model accepts (a bad one is the documented HTTP 400)."""
    from rebalance_advisor.domain.parameters import AdvisorParams

    calls = _between_markers(EXAMPLES / "airflow" / "rest-api.sh", "calls")
    dag_ids = re.findall(r"/api/v2/dags/(\w+)", calls)
    assert dag_ids == ["kafka_offsets_snapshot", "kafka_rebalance_advisor"]
    assert all((ROOT / "dags" / f"{dag_id}.py").is_file() for dag_id in dag_ids)
    body = json.loads(re.search(r"-d '(\{\"logical_date\".*?\})'", calls)[1])
    params = AdvisorParams(**body["conf"])
    assert [str(s) for s in params.strategies] == ["lag_aware", "sticky"]
