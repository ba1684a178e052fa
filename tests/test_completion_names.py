"""Shell completion of slot and publication names from the server, the way the bash
script asks for them (``_PGTAIL_COMPLETE=bash_complete`` with ``COMP_WORDS``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from tests.helpers import Database, run_cli


def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What `pgtail` offers for the last word of ``words`` (bash: ``plain,NAME`` lines)."""
    full = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("PG")}
    full.update(env or {})
    full.update(
        _PGTAIL_COMPLETE="bash_complete",
        COMP_WORDS=words,
        COMP_CWORD=str(len(shlex.split(words)) - (0 if words.endswith(" ") else 1)),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail"], capture_output=True, text=True, timeout=60, env=full
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return [line.partition(",")[2] for line in proc.stdout.splitlines() if line]


@pytest.fixture
def named(db: Database) -> Database:
    db.execute(
        "CREATE TABLE t (id int primary key);"
        "CREATE PUBLICATION app_pub FOR TABLE t; CREATE PUBLICATION audit FOR TABLE t"
    )
    for slot in ("app_slot", "archive"):
        code, _, err = run_cli(["slot", "create", slot, "--dsn", db.dsn])
        assert code == 0, err
    return db


def test_slot_and_publication_names_complete_from_the_server(named: Database) -> None:
    env = {"DATABASE_URL": named.dsn}
    assert complete("pgtail slot peek ", env) == ["app_slot", "archive"]
    assert complete("pgtail slot info ap", env) == ["app_slot"]
    assert complete("pgtail slot drop ar", env) == ["archive"]
    assert complete("pgtail slot advance ", env) == ["app_slot", "archive"]
    assert complete("pgtail stream --slot a", env) == ["app_slot", "archive"]
    assert complete("pgtail stream --publication ", env) == ["app_pub", "audit"]
    assert complete("pgtail slot peek app_slot --publication au", env) == ["audit"]
    assert complete("pgtail doctor --slot arc", env) == ["archive"]
    for command in ("show", "add", "remove", "drop"):
        assert complete(f"pgtail publication {command} a", env) == ["app_pub", "audit"]
    # LIKE's wildcards in what is typed are taken literally
    assert complete("pgtail slot info app%", env) == []
    assert complete("pgtail slot info a_p", env) == []


def test_names_complete_with_the_dsn_on_the_command_line(named: Database) -> None:
    assert complete(f"pgtail slot info --dsn '{named.dsn}' ") == ["app_slot", "archive"]
    assert complete(f"pgtail stream '{named.dsn}' --publication au") == ["audit"]
    assert complete(f"pgtail doctor --dsn '{named.dsn}' --slot ") == ["app_slot", "archive"]


def test_no_server_no_names_and_no_error() -> None:
    # nothing configured: libpq's defaults (a local socket) find no server
    assert complete("pgtail slot peek ") == []
    # a server that does not answer
    assert complete("pgtail slot peek ", {"DATABASE_URL": "host=127.0.0.1 port=1"}) == []
    # the rest of completion still works
    assert "--max-changes" in complete("pgtail slot peek app --max-c")


def complete_bash(line: str, words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """As pgtail's bash script asks: ``words`` are COMP_WORDS as bash splits them (at
    COMP_WORDBREAKS: ``:`` and ``=`` too), with the line itself in COMP_LINE."""
    full = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("PG")}
    full.update(env or {})
    full.update(
        _PGTAIL_COMPLETE="bash_complete",
        COMP_WORDS=" ".join(words),
        COMP_CWORD=str(len(words) - 1),
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pgtail"], capture_output=True, text=True, timeout=60, env=full
    )
    assert proc.returncode == 0, proc.stderr
    return [line.partition(",")[2] for line in proc.stdout.splitlines() if line]


def test_a_uri_or_dsn_equals_completes_from_its_own_server(named: Database) -> None:
    """bash splits a URI at ':' and --dsn='...' at '=': the names came from another server
    (DATABASE_URL's), or none."""
    import psycopg2

    admin = psycopg2.connect(named.server.dsn("postgres"))
    admin.autocommit = True
    other = f"{named.name}_other"
    admin.cursor().execute(f'CREATE DATABASE "{other}"')
    try:
        conn = psycopg2.connect(named.server.dsn(other))
        conn.autocommit = True
        conn.cursor().execute("CREATE PUBLICATION elsewhere FOR ALL TABLES")
        conn.close()
        env = {"DATABASE_URL": named.server.dsn(other)}  # the "other server"
        uri = f"postgresql://{named.server.user}@127.0.0.1:{named.server.port}/{named.name}"
        host_port = f"//{named.server.user}@127.0.0.1"
        line = f"pgtail stream --dsn {uri} --publication "
        words = ["pgtail", "stream", "--dsn", "postgresql", ":", host_port, ":",
                 f"{named.server.port}/{named.name}", "--publication", ""]  # fmt: skip
        assert complete_bash(line, words, env) == ["app_pub", "audit"]
        line = f"pgtail publication show --dsn='{named.dsn}' a"
        words = ["pgtail", "publication", "show", "--dsn", "=", f"'{named.dsn}'", "a"]
        assert complete_bash(line, words, env) == ["app_pub", "audit"]
        # a word bash broke at ':' gets back only the part after the break
        line = f"pgtail stream --dsn {uri} --slot app"
        words = ["pgtail", "stream", "--dsn", "postgresql", ":", host_port, ":",
                 f"{named.server.port}/{named.name}", "--slot", "app"]  # fmt: skip
        assert complete_bash(line, words, env) == ["app_slot"]
    finally:
        admin.cursor().execute(f'DROP DATABASE "{other}"')
        admin.close()


def test_the_bash_script_sends_the_line_as_typed() -> None:
    code, out, _ = run_cli(["completion", "bash"])
    assert code == 0
    assert 'COMP_LINE="$COMP_LINE" COMP_POINT=$COMP_POINT' in out
