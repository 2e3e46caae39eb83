"""What parsing a DAG file imports: DAG files must stay cheap for the dag-processor."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def heavy_modules_after_parsing(dag_file: Path, modules: Iterable[str]) -> set[str]:
    """Parse ``dag_file`` in a fresh interpreter; return which of ``modules`` it imported."""
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1]);"
        "print(','.join(m for m in sys.argv[2:] if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(dag_file), *modules], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    last_line = (result.stdout.strip().splitlines() or [""])[-1]
    return set(filter(None, last_line.split(",")))
