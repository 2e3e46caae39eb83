"""Load a stand-alone script (a bench or a docs example) as a module, so tests call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(path: Path, module_name: str | None = None) -> ModuleType:
    """Execute the script at ``path`` (absolute, or relative to the repository) as a fresh module."""
    path = path if path.is_absolute() else REPO / path
    spec = importlib.util.spec_from_file_location(module_name or f"script_{path.stem}", path)
    assert spec is not None and spec.loader is not None, f"not a Python script: {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module."""
    return load_script(Path("bench") / f"{name}.py", f"bench_{name}")
