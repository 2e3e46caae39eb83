"""The architecture as a test: no import cycle inside the package, and a pure domain.

Imports are read from the source (``ast``), including those inside functions, so a lazy import
cannot hide a cycle or an I/O dependency of the domain.
"""

from __future__ import annotations

import ast
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


def test_the_checks_see_a_cycle_and_a_lazy_import(tmp_path: Path) -> None:
    """The reader is not blind: it finds imports inside functions, and a two-module cycle."""
    pkg = tmp_path / "rebalance_advisor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    import sqlalchemy\n    from rebalance_advisor import b\n")
    (pkg / "b.py").write_text("from rebalance_advisor.a import f\n")
    assert "sqlalchemy" in _imports(pkg / "a.py", tmp_path)
    assert _cycles(_graph(pkg)) == [["rebalance_advisor.a", "rebalance_advisor.b", "rebalance_advisor.a"]]
