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


def _is_private_name(module: str, name: str) -> bool:
    """A private name imported from a pgtail module; a private module (``_codegen``) is
    the accepted form of sharing code meant for a few modules only."""
    if not module.startswith("pgtail") or not name.startswith("_") or name.startswith("__"):
        return False
    package = PGTAIL.joinpath(*module.split(".")[1:])
    return not (package / f"{name}.py").is_file()


def _private_imports(paths: list[Path]) -> list[str]:
    return [
        f"{path.name} imports {module}.{name}"
        for path in paths
        for module, names in _imports(path)
        for name in names
        if _is_private_name(module, name)
    ]


@pytest.mark.parametrize("package", ["cli", "doctor", "catalog", "values", "render", "top"])
def test_no_private_names_imported_across_modules(package: str) -> None:
    assert _private_imports(sorted((PGTAIL / package).rglob("*.py"))) == []


def test_no_private_names_imported_by_the_top_level_modules() -> None:
    assert _private_imports(sorted(PGTAIL.glob("*.py"))) == []


def test_a_private_module_may_be_imported_but_not_a_private_name(tmp_path: Path) -> None:
    """The check itself: `from pgtail import _codegen` passes, a private name fails."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from pgtail import _codegen\nfrom pgtail.server import _make_traversable\n"
        "from pgtail.values.base import _from_str\n",
        encoding="utf-8",
    )
    assert _private_imports([probe]) == [
        "probe.py imports pgtail.server._make_traversable",
        "probe.py imports pgtail.values.base._from_str",
    ]


def test_top_command_reads_through_one_library_object() -> None:
    """`pgtail top` shows the views `pgtail.top.looks` gives; the looks (the watcher, the
    temporary slot, their retries) are not the command's."""
    imported = {
        f"{module}.{name}"
        for module, names in _imports(PGTAIL / "cli" / "top_cmd.py")
        for name in names
    }
    assert "pgtail.top.looks.TopLooks" in imported
    assert not {name for name in imported if name.startswith("pgtail.catalog")}
