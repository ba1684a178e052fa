"""Documentation: help text with an example on every command, man pages that match the CLI
and render cleanly, shell completion, and the README's first two commands."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from pgtail.cli import _register_commands, cli

ROOT = Path(__file__).resolve().parent.parent
MAN = ROOT / "man"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pgtail_man_generate", MAN / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
_register_commands()
COMMANDS: list[tuple[list[str], click.Command]] = generate.all_commands(cli)
IDS = [" ".join(path[1:]) for path, _ in COMMANDS]


def _plain(roff: str) -> str:
    """Roff source -> searchable text (font escapes dropped, \\- as -)."""
    text = re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-").replace("\\e", "\\")
    return text.replace("\\&", "")


def test_every_page_exists() -> None:
    pages = ("stream", "slot", "publication", "doctor", "identity", "spark", "demo")
    expected = {"pgtail.1"} | {f"pgtail-{page}.1" for page in pages}
    assert expected <= {p.name for p in MAN.glob("*.1")}


def test_commands_found() -> None:
    assert {"demo", "completion"} <= {path[1] for path, _ in COMMANDS}


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_command_has_help_with_example(path: list[str], command: click.Command) -> None:
    help_text = inspect.cleandoc(command.help or "")
    assert help_text, f"{' '.join(path)} has no help text"
    assert command.get_short_help_str(200).strip(), f"{' '.join(path)} has no summary"
    if isinstance(command, click.Group):
        # a group's example may be in its help or in every subcommand's
        return
    assert re.search(r"^examples?:", help_text, re.IGNORECASE | re.MULTILINE), (
        f"`{' '.join(path)} --help` shows no example (add an 'Examples:' block)"
    )
    assert " ".join(path) in help_text, f"the example of {' '.join(path)} does not run it"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_command_has_man_page_entry(path: list[str], command: click.Command) -> None:
    top = path[1]
    page = next(
        (f"pgtail-{p}.1" for p, names in generate.PAGES.items() if top in names), "pgtail.1"
    )
    text = _plain((MAN / page).read_text())
    assert " ".join(path) in text, f"{' '.join(path)} is missing from man/{page}"
    main_page = _plain((MAN / "pgtail.1").read_text())
    assert f"pgtail {top}" in main_page
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden and "--help" not in param.opts:
            assert param.opts[0] in text, f"{param.opts[0]} of {' '.join(path)} not in {page}"


def test_man_pages_are_not_stale() -> None:
    pages = generate.build_pages(cli)
    stale = [
        name
        for name, text in pages.items()
        if not (MAN / name).exists() or (MAN / name).read_text() != text
    ]
    assert stale == [], f"stale man pages {stale}: run python man/generate.py and commit"


def test_generator_check_mode() -> None:
    proc = subprocess.run(
        [sys.executable, str(MAN / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_generator_uses_the_checkout_without_an_installed_pgtail(tmp_path: Path) -> None:
    """From a checkout where pgtail is not installed (here: site's .pth files, which hold
    an editable install, are not read; click and the other dependencies are on
    PYTHONPATH), run from another directory, the generator checks this checkout's CLI."""
    import site

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(site.getsitepackages())}
    proc = subprocess.run(
        [sys.executable, "-S", str(MAN / "generate.py"), "--check"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_hand_written_sections() -> None:
    stream = _plain((MAN / "pgtail-stream.1").read_text())
    for heading in ("DESCRIPTION", "JSON LINES", "EXAMPLES", "EXIT STATUS", "ENVIRONMENT"):
        assert f".SH {heading}" in stream
    assert "| jq" in stream
    for field in ("commit_lsn", "end_lsn", "unchanged_toast", "old_kind", "replica_identity"):
        assert field in stream
    for page in MAN.glob("*.1"):
        text = _plain(page.read_text())
        assert ".SH EXAMPLES" in text, page.name
        assert ".SH EXIT STATUS" in text and "130" in text, page.name


def _render_warnings(page: Path) -> tuple[str, str]:
    if shutil.which("man"):
        proc = subprocess.run(
            ["man", "--warnings", "-l", str(page)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "MANWIDTH": "80"},
        )
        return proc.stdout, proc.stderr
    proc = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "(groff -z)", proc.stderr


@pytest.mark.parametrize("page", sorted(p.name for p in MAN.glob("*.1")))
def test_man_page_renders_cleanly(page: str) -> None:
    if not shutil.which("man") and not shutil.which("groff"):
        pytest.skip("neither man nor groff is installed: cannot render man pages here")
    out, warnings = _render_warnings(MAN / page)
    assert warnings == "", warnings
    assert out.strip()
    if out != "(groff -z)":
        assert "NAME" in out and "SYNOPSIS" in out
        longest = max(len(line) for line in out.splitlines())
        assert longest <= 100


def test_completion_scripts() -> None:
    from pgtail.cli.completion_cmd import completion_script

    bash = completion_script("bash")
    assert "_PGTAIL_COMPLETE=bash_complete" in bash and "complete -o nosort -F" in bash
    assert "compdef" in completion_script("zsh")
    assert "complete --no-files --command pgtail" in completion_script("fish")


def test_completion_command_and_callback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail", "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "_PGTAIL_COMPLETE" in proc.stdout
    # what the bash script asks pgtail when the user types `pgtail de<TAB>`
    env = {
        **os.environ,
        "_PGTAIL_COMPLETE": "bash_complete",
        "COMP_WORDS": "pgtail de",
        "COMP_CWORD": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail"], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "plain,demo" in proc.stdout.splitlines()
    env.update(COMP_WORDS="pgtail demo --format ", COMP_CWORD="3")
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail"], capture_output=True, text=True, timeout=60, env=env
    )
    assert {"plain,json", "plain,table", "plain,sql"} <= set(proc.stdout.splitlines())


def test_completion_rejects_unknown_shell() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail", "completion", "tcsh"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "tcsh" in proc.stderr


def test_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    fence = lines.index("```sh")
    assert lines[fence + 1].startswith("bash .ci/demo ")
    assert lines[fence + 2].startswith("bash .ci/run ")
    assert lines[fence + 3] == "```"
    assert fence <= 2, "the two commands must be the README's first lines"
    for script in (".ci/demo", ".ci/run", ".ci/setup"):
        assert (ROOT / script).exists()
        assert os.access(ROOT / script, os.R_OK)


# fixed fragments of the error messages the README's troubleshooting table quotes
TROUBLESHOOTING = [
    "cannot reach PostgreSQL at",
    "authentication failed for",
    "the server refused the connection",
    "the role may not open a replication connection",
    "logical replication needs 'logical'",
    "lacks the REPLICATION attribute",
    "does not exist",
    "is active for PID",
    "not pgoutput",
    "belongs to database",
    "has lost WAL it needs (wal_status = lost)",
    "all replication slots are in use",
    "has no publication",
    "choose with --publication",
    "pgoutput protocol version",
    "an LSN is two hex numbers, like 16/B374D848",
    "the temporary slot went",
    "could not",
    "needs PostgreSQL server binaries and found none",
    "is not accepting connections",
    "was dropped while pgtail was streaming it",
    "was invalidated",
    "terminated by administrator command",
    "the server ended the replication stream",
    "the server closed the replication connection",
]


def test_troubleshooting_quotes_real_messages() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Troubleshooting") :]
    sources = "\n".join(p.read_text() for p in (ROOT / "pgtail").rglob("*.py"))
    for fragment in TROUBLESHOOTING:
        assert fragment in section, f"README troubleshooting lost {fragment!r}"
        assert fragment in sources, f"no pgtail message contains {fragment!r} any more"


def test_stream_recipes_give_jq_unbuffered() -> None:
    """jq buffers its output into a file or pipe, while pgtail confirms what jq read:
    Ctrl-C loses that buffer. Every recipe that pipes `pgtail stream` into jq says
    ``--unbuffered``, and the README's delivery section says why."""
    readme = (ROOT / "README.md").read_text()
    texts = {"README.md": readme, "man/content.py": (MAN / "content.py").read_text()}
    for name, text in texts.items():
        # a recipe may continue on the next line after the pipe
        joined = re.sub(r"\|\s*\n\s*", "| ", text)
        recipes = [
            line for line in joined.splitlines() if re.match(r"\s*pgtail stream.*\| *jq ", line)
        ]
        assert recipes, name
        for line in recipes:
            assert "jq --unbuffered" in line, (name, line)
    delivery = readme.split("## Delivery guarantee", 1)[1].split("\n## ", 1)[0]
    assert "--unbuffered" in delivery
