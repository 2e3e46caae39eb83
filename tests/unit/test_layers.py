"""The architecture as a test: no import cycle inside the package, a pure domain, and every import
pointing down the layers of docs/architecture.md ("Layers").

Imports are read from the source (``ast``), including those inside functions, so a lazy import
cannot hide a cycle or an I/O dependency of the domain.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "include" / "rebalance_advisor"
#: what a domain module must not import: I/O libraries and the package's outer layers
DOMAIN_FORBIDDEN = (
    "confluent_kafka",
    "sqlalchemy",
    "alembic",
    "pyspark",
    "airflow",
    "requests",
    "httpx",
    "socket",
    "subprocess",
    "rebalance_advisor.adapters",
    "rebalance_advisor.store",
    "rebalance_advisor.services",
    "rebalance_advisor.dag_tasks",
    "rebalance_advisor.cli",
    "rebalance_advisor.webui",
    "rebalance_advisor.devtools",
    "rebalance_advisor.publish",
)


#: layer -> the layers its modules may import (its own included). ``top`` = the package's own
#: small modules (errors, settings, polling, gcpause). Read bottom-up: top < domain < store <
#: adapters < services < devtools, dag_tasks, webui, cli.
ALLOWED = {
    "top": {"top"},
    "domain": {"domain", "top"},
    "store": {"store", "domain", "top"},
    "adapters": {"adapters", "store", "domain", "top"},
    "services": {"services", "adapters", "store", "domain", "top"},
    "devtools": {"devtools", "services", "adapters", "store", "domain", "top"},
    "dag_tasks": {"dag_tasks", "services", "adapters", "store", "domain", "top"},
    "webui": {"webui", "services", "adapters", "store", "domain", "top"},
    "cli": {"cli", "devtools", "services", "adapters", "store", "domain", "top"},
}
#: the only shipped modules that may reach dev tooling: the CLI's ``dev`` and ``demo`` commands
DEVTOOLS_USERS = {"rebalance_advisor.cli.dev", "rebalance_advisor.cli.demo"}
REPO = PACKAGE.parents[1]


def _layer(module: str) -> str:
    """``rebalance_advisor.<layer>.…`` -> layer; the package's own top-level modules -> ``top``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "top"


def _module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = PACKAGE.parent) -> set[str]:
    """Every module ``path`` imports, absolute; ``from a import b`` gives both ``a`` and ``a.b``
    (the graph keeps whichever is a module). Imports inside functions count too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _module_name(path, root).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package modules it imports: ``a.b`` when that is a module, else ``a``."""
    modules = {_module_name(p, root.parent): p for p in root.rglob("*.py") if "migrations" not in p.parts}
    graph = {}
    for name, path in modules.items():
        names = _imports(path, root.parent)
        deps = {
            i
            for i in names
            if i in modules and not any(j.startswith(i + ".") and j in modules for j in names)
        }
        graph[name] = deps - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycle_in_the_package() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_domain_imports_no_io_and_no_outer_layer() -> None:
    offenders = {}
    for path in (PACKAGE / "domain").rglob("*.py"):
        bad = sorted(
            i for i in _imports(path) if any(i == f or i.startswith(f + ".") for f in DOMAIN_FORBIDDEN)
        )
        if bad:
            offenders[_module_name(path)] = bad
    assert offenders == {}


def _layer_offences(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up the layers, and shipped modules that import dev tooling."""
    offences = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if _layer(dep) not in ALLOWED[_layer(module)]:
                offences.append(f"{module} -> {dep} ({_layer(module)} may not import {_layer(dep)})")
            elif _layer(dep) == "devtools" != _layer(module) and module not in DEVTOOLS_USERS:
                offences.append(f"{module} -> {dep} (shipped code imports no devtools)")
    return offences


def test_imports_point_down_the_layers() -> None:
    """Domain imports no store/adapters/services; adapters no services/cli/webui/devtools; and so on."""
    assert _layer_offences(_graph()) == []


def test_dags_and_plugins_import_no_devtools() -> None:
    """What the Airflow image loads (dags/, plugins/) never reaches the local broker or the demo."""
    offenders = {}
    for path in [*(REPO / "dags").glob("*.py"), *(REPO / "plugins").glob("*.py")]:
        bad = sorted(i for i in _imports(path, REPO) if i.startswith("rebalance_advisor.devtools"))
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def test_the_checks_see_a_cycle_and_a_lazy_import(tmp_path: Path) -> None:
    """The reader is not blind: it finds imports inside functions, and a two-module cycle."""
    pkg = tmp_path / "rebalance_advisor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    import sqlalchemy\n    from rebalance_advisor import b\n")
    (pkg / "b.py").write_text("from rebalance_advisor.a import f\n")
    assert "sqlalchemy" in _imports(pkg / "a.py", tmp_path)
    assert _cycles(_graph(pkg)) == [["rebalance_advisor.a", "rebalance_advisor.b", "rebalance_advisor.a"]]


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """An adapter reaching into devtools and a domain module reaching the store are both reported;
    the CLI's dev command may use devtools, another CLI module may not."""
    pkg = tmp_path / "rebalance_advisor"
    for folder in ("adapters", "devtools", "domain", "store", "cli"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "devtools" / "broker.py").write_text("")
    (pkg / "store" / "db.py").write_text("")
    (pkg / "adapters" / "jars.py").write_text("def f():\n    from rebalance_advisor.devtools import broker\n")
    (pkg / "domain" / "rule.py").write_text("from rebalance_advisor.store import db\n")
    (pkg / "cli" / "dev.py").write_text("from rebalance_advisor.devtools import broker\n")
    (pkg / "cli" / "plan.py").write_text("from rebalance_advisor.devtools import broker\n")
    assert _layer_offences(_graph(pkg)) == [
        "rebalance_advisor.adapters.jars -> rebalance_advisor.devtools.broker (adapters may not import devtools)",
        "rebalance_advisor.cli.plan -> rebalance_advisor.devtools.broker (shipped code imports no devtools)",
        "rebalance_advisor.domain.rule -> rebalance_advisor.store.db (domain may not import store)",
    ]


def test_dag_files_are_thin() -> None:
    """A DAG file is a schedule, generated params and wiring (docs/architecture.md, "Layers"):
    about 60 lines at most, and no error handling of its own (the one policy is in dag_tasks)."""
    too_long, handles_errors = {}, []
    for path in sorted((REPO / "dags").glob("*.py")):
        lines = path.read_text().count("\n")
        if lines > 60:
            too_long[path.name] = lines
        if any(isinstance(node, ast.Try) for node in ast.walk(ast.parse(path.read_text()))):
            handles_errors.append(path.name)
    assert (too_long, handles_errors) == ({}, [])


def test_the_dag_ids_are_the_dag_functions_names() -> None:
    """``parameters.MODELS`` names every DAG by the id Airflow gives it: its ``@dag`` function's name,
    one DAG per file in dags/, the file named after it."""
    from rebalance_advisor.domain.parameters import MODELS

    found = {}
    for path in sorted((REPO / "dags").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", None) == "dag" for d in node.decorator_list
            ):
                found[node.name] = path.stem
    assert found == {dag_id: dag_id for dag_id in MODELS}


#: the longest a function may run (docs/architecture.md, "Layers"; the aim is 40 lines)
LONGEST_FUNCTION = 60


def _long_functions(roots: list[Path]) -> dict[str, int]:
    """'path:line name' -> its lines, of every function or method under ``roots`` that runs past
    :data:`LONGEST_FUNCTION` lines (signature, docstring and body)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LONGEST_FUNCTION:
                        found[f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"] = lines
    return found


def test_no_function_runs_past_sixty_lines() -> None:
    """A longer function is a sequence of steps: name them (the migrations too: one function a table).
    The client helper (clients/python) is held to the same rule."""
    assert _long_functions([PACKAGE, CLIENT, REPO / "dags", REPO / "plugins", REPO / "scripts"]) == {}


def test_a_function_past_sixty_lines_is_named(tmp_path: Path) -> None:
    def function(name: str, lines: int, indent: str = "") -> str:
        return f"{indent}def {name}():\n" + f"{indent}    x = 1\n" * (lines - 1)

    code = tmp_path / "code"
    code.mkdir()
    text = (
        function("fits", LONGEST_FUNCTION) + "\nclass C:\n" + function("long", LONGEST_FUNCTION + 1, "    ")
    )
    (code / "m.py").write_text(text)
    assert _long_functions([code]) == {"code/m.py:63 long": LONGEST_FUNCTION + 1}


CLIENT = REPO / "clients" / "python" / "rebalance_advisor_client"


def _name_clashes(roots: list[Path]) -> dict[str, dict[str, list[str]]]:
    """Module basenames and public top-level class names defined in more than one file under ``roots``
    (``__init__``/``__main__`` and migration revisions aside: those names are a convention)."""
    modules: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "migrations" in path.parts or path.name in ("__init__.py", "__main__.py"):
                continue
            where = str(path.relative_to(root.parent))
            modules.setdefault(path.stem, []).append(where)
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    classes.setdefault(node.name, []).append(where)
    return {
        "modules": {k: v for k, v in modules.items() if len(v) > 1},
        "classes": {k: v for k, v in classes.items() if len(v) > 1},
    }


def test_module_and_class_names_are_unique() -> None:
    """A name says where it lives: no two modules of the package share a basename, and no public
    class name is defined twice in the package and the client helper it imports."""
    assert _name_clashes([PACKAGE]) == {"modules": {}, "classes": {}}
    assert _name_clashes([PACKAGE, CLIENT])["classes"] == {}


def test_the_name_check_sees_a_clash(tmp_path: Path) -> None:
    for folder, text in (
        ("a", "class Member:\n    pass\n"),
        ("b", "class Member:\n    pass\nclass _Own:\n    pass\n"),
    ):
        (tmp_path / "pkg" / folder).mkdir(parents=True)
        (tmp_path / "pkg" / folder / "spec.py").write_text(text)
        (tmp_path / "pkg" / folder / "__init__.py").write_text("class Member:\n    pass\n")
    assert _name_clashes([tmp_path / "pkg"]) == {
        "modules": {"spec": ["pkg/a/spec.py", "pkg/b/spec.py"]},
        "classes": {"Member": ["pkg/a/spec.py", "pkg/b/spec.py"]},
    }


#: what importing the domain must not load at run time (a Spark executor imports the domain in every
#: Python worker): the Kafka client and the other I/O libraries, and the package's outer layers
RUNTIME_FORBIDDEN = ("confluent_kafka", "sqlalchemy", "alembic", "pyspark", "airflow", "requests", "httpx")
_LOADED = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_by(modules: list[str]) -> set[str]:
    """Every module a fresh interpreter holds after importing ``modules`` (nothing else imported first)."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *modules], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def _forbidden_at_run_time(loaded: set[str]) -> list[str]:
    outer = tuple(f for f in DOMAIN_FORBIDDEN if f.startswith("rebalance_advisor."))
    return sorted(
        m
        for m in loaded
        if m.split(".")[0] in RUNTIME_FORBIDDEN or m == "rebalance_advisor.publish" or m.startswith(outer)
    )


def test_importing_the_domain_loads_no_kafka_client_at_run_time() -> None:
    """What the source check cannot see: a domain module importing a package whose ``__init__`` loads
    confluent-kafka. Every domain module is imported in a fresh interpreter, then sys.modules is read."""
    domain = sorted(_module_name(p) for p in (PACKAGE / "domain").rglob("*.py"))
    loaded = _loaded_by(domain)
    assert set(domain) <= loaded
    assert _forbidden_at_run_time(loaded) == []


def test_the_run_time_check_sees_a_kafka_import() -> None:
    """The check is not blind: the client's consumer module does load confluent-kafka, and a store module
    is an outer layer."""
    loaded = _loaded_by(["rebalance_advisor_client.consumer", "rebalance_advisor.store.models"])
    found = _forbidden_at_run_time(loaded)
    assert "confluent_kafka" in found
    assert "rebalance_advisor.store.models" in found
    assert "sqlalchemy" in found


#: the client helper's modules that load without confluent-kafka: what the domain imports, and the
#: handover's state machine (docs/protocol/states.md), whose unit tests need no broker
CLIENT_KAFKA_FREE = (
    "assignment_records",
    "key_hash",
    "key_ranges",
    "handover_rules",
    "capacity_report",
    "partition_states",
    "claim_runner",
    "claim_modes",
)


def test_the_clients_state_machine_loads_no_kafka_client() -> None:
    loaded = _loaded_by([f"rebalance_advisor_client.{name}" for name in CLIENT_KAFKA_FREE])
    assert {f"rebalance_advisor_client.{name}" for name in CLIENT_KAFKA_FREE} <= loaded
    assert sorted(m for m in loaded if m.split(".")[0] == "confluent_kafka") == []
