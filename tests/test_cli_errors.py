"""Errors through the command line: one format and one exit-code table for every command,
usage errors included, and the same words for the same condition whichever command meets it.
Also the ways of saying where to connect, tried against a real server.
"""

from __future__ import annotations

import pytest
from helpers import Database, run_cli, streaming

# --------------------------------------------------------------------------- usage errors


def _usage(args: list[str], command: str) -> str:
    """Run a command line that is wrong; check the usage error's form, return its message."""
    code, out, err = run_cli(args, env={"DATABASE_URL": "host=127.0.0.1 port=1"})
    assert code == 2, (args, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("pgtail: error: "), err
    assert lines[1] == f'pgtail: hint: Try "{command} --help" for more information.', err
    return lines[0].removeprefix("pgtail: error: ")


@pytest.mark.parametrize(
    ("args", "command", "message"),
    [
        (["stream", "--format", "yaml"], "pgtail stream", "invalid value for '--format'"),
        (["stream", "--fromat", "json"], "pgtail stream", "no such option: --fromat"),
        (["strem"], "pgtail", "no such command: strem (did you mean stream?)"),
        (["slot", "lst"], "pgtail slot", "no such command: lst (did you mean list?)"),
        (["stream", "--ops", "insrt"], "pgtail stream", "unknown operation insrt in --ops"),
        (
            ["publication", "create", "p", "--ops", "upsert"],
            "pgtail publication create",
            "unknown operation upsert in --ops",
        ),
        (["slot", "create"], "pgtail slot create", "missing argument 'NAME'"),
        (["slot", "advance", "s", "zz"], "pgtail slot advance", "invalid LSN 'zz'"),
        (["stream", "--start", "0/10", "--end", "0/5"], "pgtail stream", "--end is before"),
        (["stream", "--max-changes", "0"], "pgtail stream", "invalid value for '--max-changes'"),
        (["doctor", "--wal-warn", "lots"], "pgtail doctor", "invalid size 'lots'"),
        (["slot", "list", "a", "b"], "pgtail slot list", "unexpected extra argument (b)"),
        (["identity", "t", "i", "dbname=x"], "pgtail identity", "goes with --set index"),
        (["stream", "-h"], "pgtail stream", "-h is --host"),
        (
            # Spark's own rule, before Spark starts (after, a Java stack trace)
            ["spark", "materialize", "--changes", "c", "--output", "o", "--master", "bogus"],
            "pgtail spark materialize",
            "invalid value for '--master': 'bogus': Spark takes local, local[N]",
        ),
        (
            ["publication", "add", "p"],
            "pgtail publication add",
            "nothing to change (give --table and/or --schema)",
        ),
    ],
)
def test_usage_errors_have_one_form(args: list[str], command: str, message: str) -> None:
    assert message in _usage(args, command)


def test_a_group_without_its_command_shows_its_help() -> None:
    for args in ([], ["slot"]):
        code, out, err = run_cli(args)
        assert code == 2 and out == ""
        assert err.startswith(f"Usage: {' '.join(['pgtail', *args])} [OPTIONS] COMMAND"), err


def test_a_usage_error_before_the_command_still_names_it() -> None:
    assert "no such option" in _usage(["--debug", "slot", "list", "--jsn"], "pgtail slot list")


def test_a_choice_of_arguments_is_listed_without_tabs() -> None:
    """`pgtail completion` without its shell printed click's tabs."""
    message = _usage(["completion"], "pgtail completion")
    assert "\t" not in message and "  " not in message
    assert message.endswith("choose from: bash, fish, zsh") or "bash, fish, zsh" in message


def test_debug_after_the_command_shows_the_traceback() -> None:
    """--debug is the group's option: after the command it was "no such option"."""
    env = {"DATABASE_URL": "host=127.0.0.1 port=1 dbname=x connect_timeout=2"}
    for args in (["slot", "list", "--debug"], ["--debug", "slot", "list"]):
        code, _, err = run_cli(args, env=env)
        assert code == 1, err
        assert "Traceback (most recent call last)" in err, err
        assert err.splitlines()[-1].startswith("pgtail: error: cannot reach PostgreSQL"), err


def test_an_invalid_slot_name_is_refused_alike_by_every_command() -> None:
    create = _usage(["slot", "create", "Bad-Name"], "pgtail slot create")
    stream = _usage(["stream", "--slot", "Bad-Name", "--create-slot"], "pgtail stream")
    peek = _usage(["slot", "peek", "Bad-Name"], "pgtail slot peek")
    spark = _usage(
        ["spark", "run", "--slot", "Bad-Name", "--publication", "p", "--output", "o",
         "--checkpoint", "c"],
        "pgtail spark run",
    )  # fmt: skip
    assert create == stream == peek == spark
    assert create.startswith("invalid replication slot name 'Bad-Name' (a slot name is 1 to 63")
    long = "a" * 64
    assert f"invalid replication slot name '{long}'" in _usage(
        ["slot", "drop", long], "pgtail slot drop"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["slot", "list", "host=a", "--dsn", "host=b"], "two connection strings given"),
        (["doctor", "shop", "-d", "other"], "two database names given"),
        (["slot", "list", "--dsn", "host=a port=1", "-p", "2"], "--port '2' conflicts"),
        (["slot", "info", "s", "postgresql://u@h/db", "-U", "v"], "--username 'v' conflicts"),
    ],
)
def test_conflicting_connection_sources_are_usage_errors(args: list[str], message: str) -> None:
    command = "pgtail " + " ".join(a for a in args[:2] if a in ("slot", "list", "info", "doctor"))
    assert message in _usage(args, command)


# --------------------------------------------------------------------------- connecting


def test_every_way_of_saying_where_to_connect(db: Database) -> None:
    server = db.server
    uri = f"postgresql://{server.user}@127.0.0.1:{server.port}/{db.name}"
    socket = ["-h", str(server.socket_dir), "-p", str(server.port), "-U", server.user]
    attempts: list[tuple[list[str], dict[str, str | None]]] = [
        (["doctor", uri, "--json"], {}),
        (["doctor", "--dsn", uri, "--json"], {}),
        (["doctor", "--json", "-d", uri], {}),
        (["doctor", "--json", *socket, "-d", db.name], {}),
        (["doctor", "--json", *socket, db.name], {}),  # a database name as the argument
        (["doctor", "--json", uri, "--dsn", uri], {}),  # the same string twice is one
        (["doctor", "--json", uri, "-h", "127.0.0.1", "-d", db.name], {}),  # agreeing
        (["doctor", "--json"], {"DATABASE_URL": uri}),
        (["doctor", "--json", "-d", db.name], {"DATABASE_URL": db.server.dsn("postgres")}),
        (
            ["doctor", "--json"],
            {
                "PGHOST": "127.0.0.1",
                "PGPORT": str(server.port),
                "PGUSER": server.user,
                "PGDATABASE": db.name,
                "DATABASE_URL": None,
            },
        ),  # fmt: skip
    ]
    for args, env in attempts:
        code, out, err = run_cli(args, env=env)
        assert code in (0, 1) and '"checks"' in out, (args, err)
        assert f'"{db.name}"' in out or db.name in out, (args, out[:300])


def test_the_connection_string_comes_after_the_command_arguments(db: Database) -> None:
    code, out, err = run_cli(["slot", "create", "app", db.dsn])
    assert code == 0, err
    code, out, err = run_cli(["slot", "info", "app", db.dsn, "--json"])
    assert code == 0 and '"slot_name": "app"' in out, err
    db.execute("CREATE TABLE t (id int primary key)")
    code, out, err = run_cli(["identity", "public.t", db.dsn, "--json"])
    assert code == 0 and '"replica_identity": "DEFAULT"' in out, err
    db.execute("CREATE UNIQUE INDEX t_id ON t (id)")
    code, out, err = run_cli(["identity", "public.t", "t_id", db.dsn, "--set", "index"])
    assert code == 0, err
    code, out, err = run_cli(["publication", "create", "p", db.dsn, "--table", "t"])
    assert code == 0, err
    code, out, err = run_cli(["slot", "drop", "app", db.dsn])
    assert code == 0, err


# --------------------------------------------------------------------------- same condition


def _error(args: list[str]) -> str:
    code, _, err = run_cli(args)
    assert code == 1, (args, err)
    assert err.startswith("pgtail: error: ") and err.count("\n") == 1, err
    return err.removeprefix("pgtail: error: ").strip()


def test_a_busy_slot_reads_the_same_in_stream_and_peek(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    assert run_cli(["slot", "create", "busy", db.dsn])[0] == 0
    with streaming(db, "busy", "p") as pid:
        peek = _error(["slot", "peek", "busy", db.dsn])
        stream = _error(["stream", "--slot", "busy", "--publication", "p", db.dsn])
    expected = (
        f"replication slot 'busy' is active for PID {pid} "
        f"(stop the other consumer, or SELECT pg_terminate_backend({pid}))"
    )
    assert peek == stream == expected


def test_a_missing_slot_reads_the_same_everywhere(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    wanted = "replication slot 'nope' does not exist ("
    for args in (
        ["slot", "peek", "nope", db.dsn],
        ["slot", "info", "nope", db.dsn],
        ["slot", "advance", "nope", "0/10", db.dsn],
        ["slot", "drop", "nope", db.dsn],
        ["stream", "--slot", "nope", "--publication", "p", db.dsn],
    ):
        assert _error(args).startswith(wanted), args
    assert "pgtail slot create nope" in _error(["slot", "peek", "nope", db.dsn])
    assert "--create-slot" in _error(["stream", "--slot", "nope", "--publication", "p", db.dsn])


def test_a_missing_publication_reads_the_same_everywhere(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    assert run_cli(["slot", "create", "s", db.dsn])[0] == 0
    wanted = f"publication 'nope' does not exist in database '{db.name}' ("
    for args in (
        ["slot", "peek", "s", "--publication", "nope", db.dsn],
        ["stream", "--slot", "s", "--publication", "nope", db.dsn],
        ["publication", "show", "nope", db.dsn],
        ["publication", "add", "nope", "--table", "t", db.dsn],
        ["publication", "drop", "nope", db.dsn],
    ):
        assert _error(args).startswith(wanted), args


def test_a_progress_line_to_a_closed_stderr_is_dropped_not_a_failure() -> None:
    """`pgtail spark run 2>&1 | tee log` and Ctrl-C, which ends tee too: the "stopped"
    line goes to a closed pipe. It is dropped, the lines after it too, and the command
    keeps its own exit status (it exited 1, its Spark errors' status)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pgtail.progress import progress_line\n"
        "progress_line('stopped: 3 changes in 1 batches')\n"
        "progress_line('and one more')\n"
        "print('to stderr as well', file=sys.stderr)\n"
        "sys.exit(130)\n"
    )
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        done = subprocess.run([sys.executable, "-c", code], stderr=write, timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 130
