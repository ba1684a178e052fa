"""The code's size rules (DESIGN.md, issue 24): no module over 800 lines, no function
over 100. A file past that holds two rooms, a function two steps."""

from __future__ import annotations

import ast
from pathlib import Path

PGTAIL = Path(__file__).resolve().parent.parent / "pgtail"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100


def long_modules(root: Path) -> set[str]:
    return {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    }


def long_functions(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                    found.add(f"{path.relative_to(root)}:{node.name}")
    return found


def test_no_module_over_800_lines() -> None:
    assert long_modules(PGTAIL) == set()


def test_no_function_over_100_lines() -> None:
    assert long_functions(PGTAIL) == set()


def test_the_size_checks_count_lines(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "fits.py").write_text(f"def fits():\n{body}", encoding="utf-8")
    (tmp_path / "long.py").write_text(f"def too_long():\n{body}    return 0\n", encoding="utf-8")
    (tmp_path / "big.py").write_text("x = 0\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    assert long_functions(tmp_path) == {"long.py:too_long"}
    assert long_modules(tmp_path) == {"big.py"}
