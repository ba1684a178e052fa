"""The CLI's shape: command modules share code through helper modules, never through
each other, and no module imports another's private names (issue 24, items 5 and 7)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PGTAIL = Path(__file__).resolve().parent.parent / "pgtail"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.module, [alias.name for alias in node.names])
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ]


def test_command_modules_import_no_other_command_module() -> None:
    offenders = [
        f"{path.name} imports {module}"
        for path in sorted((PGTAIL / "cli").glob("*_cmd.py"))
        for module, _ in _imports(path)
        if module.startswith("pgtail.cli.") and module.endswith("_cmd")
    ]
    assert offenders == []


def test_printing_helpers_live_in_one_module() -> None:
    from pgtail.cli import printing

    for name in ("stdout_is_terminal", "print_json", "print_table", "fitted_table", "print_fields"):
        assert getattr(printing, name).__module__ == "pgtail.cli.printing"


@pytest.mark.parametrize("package", ["cli", "doctor", "catalog"])
def test_no_private_names_imported_across_modules(package: str) -> None:
    offenders = [
        f"{path.relative_to(PGTAIL)} imports {module}.{name}"
        for path in sorted((PGTAIL / package).rglob("*.py"))
        for module, names in _imports(path)
        if module.startswith("pgtail")
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []
