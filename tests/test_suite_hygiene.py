"""The test suite's own layout: test modules import shared code only from the helper
modules (``helpers``, ``pgbytes``, ``pgoutput_corpus``, ``events``, ``workload``,
``proxy``), never another test module nor conftest, so each one reads and runs on its
own and no helper lives in two places."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def forbidden_imports(source: str) -> list[str]:
    """The imports in ``source`` (anywhere, also inside functions and TYPE_CHECKING
    blocks) that name a test module or conftest, as ``line: module``."""

    def banned(module: str) -> bool:
        name = module.removeprefix("tests.")
        return name == "conftest" or name.startswith("test_")

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "tests":  # from tests import test_x, conftest
                modules = [f"tests.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # relative: from . import x / from .x import y
            modules = [node.module or alias.name for alias in node.names]
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules if banned(m)]
    return found


FORMS = {
    "from-package-module": "from tests.test_catalog import streaming",
    "from-module": "from test_pgoutput import insert",
    "import": "import test_cli_slot",
    "import-package-module": "import tests.test_cli_slot",
    "from-package": "from tests import test_doctor",
    "from-package-conftest": "from tests.conftest import Database",
    "from-conftest": "from conftest import Database",
    "relative-conftest": "from .conftest import Database",
    "relative-module": "from . import test_stream",
    "inside-function": "def f():\n    from tests.test_catalog import streaming",
    "type-checking": "if TYPE_CHECKING:\n    from conftest import Database",
}


@pytest.mark.parametrize("source", FORMS.values(), ids=FORMS.keys())
def test_checker_finds_each_form(source: str) -> None:
    assert len(forbidden_imports(source)) == 1


def test_checker_allows_helper_modules() -> None:
    source = (
        "from tests import pgbytes as pb, workload\n"
        "from tests.helpers import Database, run_cli\n"
        "from tests.proxy import Proxy\n"
        "import pytest\n"
    )
    assert forbidden_imports(source) == []


def test_no_module_of_the_suite_imports_a_test_module_or_conftest() -> None:
    modules = sorted(p for p in TESTS.glob("*.py") if p.name != "conftest.py")
    assert any(p.name == "helpers.py" for p in modules)
    offenders = {
        p.name: found for p in modules if (found := forbidden_imports(p.read_text("utf-8")))
    }
    assert offenders == {}


def test_major_markers_skip_before_any_server_starts() -> None:
    """``min_major`` and ``majors`` skip a test over ``pg`` at collection: no server of a
    major the test does not run on is started (here 12, not even installed)."""
    pytest.importorskip("pyspark")  # the majors-marked test below is a Spark test
    tests = [
        "tests/test_values.py::test_pgoutput_text_and_binary_captures_agree",  # min_major(14)
        "tests/test_spark.py::test_batch_read_peeks_pending_changes_without_moving_the_slot",
    ]
    env = {**os.environ, "PGTAIL_TEST_MAJORS": "12", "PGTAIL_PG12_BINDIR": "/nonexistent"}
    env.pop("CI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *tests],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 skipped" in proc.stdout, proc.stdout
    assert "needs PostgreSQL 14+" in proc.stdout
    assert "runs on PostgreSQL 13, 15, 18 only" in proc.stdout
    assert "could not be tested" not in proc.stdout  # no server was looked for


def test_suite_collects_without_the_spark_extra(tmp_path: Path) -> None:
    """Without pyspark and pyarrow (the ``spark`` extra) the Spark tests are skipped and
    every other test is collected: no module imports ``pgtail.spark`` before its
    ``importorskip``."""
    for blocked in ("pyspark", "pyarrow"):
        (tmp_path / blocked).mkdir()
        (tmp_path / blocked / "__init__.py").write_text(
            f"raise ModuleNotFoundError('{blocked} is blocked by the test', name='{blocked}')\n"
        )
    path = os.pathsep.join([str(tmp_path), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--collect-only",
         "-rs", str(TESTS)],
        cwd=TESTS.parent, env={**os.environ, "PYTHONPATH": path}, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ERROR collecting" not in proc.stdout, proc.stdout
    assert "test_spark.py" in proc.stdout and "blocked by the test" in proc.stdout, proc.stdout
