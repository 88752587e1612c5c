"""Predictors and policies are pure: they import nothing that talks to Slurm or the database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import slurmsched

FORBIDDEN = ("gateway", "store", "sim", "daemon", "engine", "cli")
ROOT = Path(slurmsched.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["predict", "policy"])
def test_pure_packages_import_no_io_parts(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    bad = [f"{f.relative_to(ROOT)} imports {name}" for f in files for name in _imports(f)
           if any(name == f"slurmsched.{part}" or name.startswith(f"slurmsched.{part}.") for part in FORBIDDEN)]
    assert not bad, bad
