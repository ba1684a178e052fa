"""`pgtail slot ...` in-process through main() against real PostgreSQL 15 and 18."""

from __future__ import annotations

import click
import orjson
import pytest
from click.testing import CliRunner

from tests.helpers import Database, run_cli, streaming, write


def test_create_list_info_drop(db: Database) -> None:
    code, out, err = run_cli(["slot", "create", "app", "--dsn", db.dsn])
    assert code == 0, err
    assert out.startswith("created replication slot app (pgoutput) at ")
    code, out, err = run_cli(["slot", "create", "app", "--dsn", db.dsn])
    assert code == 1
    assert (
        err == "pgtail: error: replication slot 'app' already exists "
        "(use --if-not-exists, or pick another name)\n"
    )
    code, out, _ = run_cli(["slot", "create", "app", "--if-not-exists", "--dsn", db.dsn])
    assert code == 0 and "already exists" in out

    code, out, _ = run_cli(["slot", "list", "--dsn", db.dsn])
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:6] == ["slot", "plugin", "database", "active", "temp", "2pc"]
    assert ("inactive_since" in header) == (db.major >= 17)
    assert ("conflicting" in header) == (db.major >= 16)
    assert any(r.split()[:4] == ["app", "pgoutput", db.name, "no"] for r in rows)

    code, out, _ = run_cli(["slot", "list", "--json", "--dsn", db.dsn])
    slots = {s["slot_name"]: s for s in orjson.loads(out)}
    assert slots["app"]["active"] is False and slots["app"]["database"] == db.name
    assert isinstance(slots["app"]["retained_bytes"], int)

    code, out, _ = run_cli(["slot", "info", "app", "--dsn", db.dsn])
    assert code == 0 and out.startswith("slot app\n") and "confirmed_flush" in out
    code, out, _ = run_cli(["slot", "info", "app", "--json", "--dsn", db.dsn])
    assert orjson.loads(out)["plugin"] == "pgoutput"

    code, out, _ = run_cli(["slot", "drop", "app", "--dsn", db.dsn])
    assert code == 0 and out == "dropped replication slot app\n"
    code, out, err = run_cli(["slot", "drop", "app", "--dsn", db.dsn])
    assert code == 1 and "does not exist" in err
    code, out, _ = run_cli(["slot", "drop", "app", "--if-exists", "--dsn", db.dsn])
    assert code == 0 and "nothing to do" in out


def test_dsn_from_database_url(db: Database) -> None:
    code, out, err = run_cli(["slot", "create", "envslot"], env={"DATABASE_URL": db.dsn})
    assert code == 0, err
    assert db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'envslot'") == [
        (1,)
    ]


def test_unreachable_server_is_one_line() -> None:
    code, _, err = run_cli(["slot", "list", "--dsn", "host=127.0.0.1 port=1 connect_timeout=2"])
    assert code == 1
    assert err.startswith("pgtail: error: cannot reach PostgreSQL") and err.count("\n") == 1


@pytest.mark.parametrize("name", ["Mixed", "with space", "x'); DROP TABLE victim; --"])
def test_bad_slot_names_fail_safely(db: Database, name: str) -> None:
    db.execute("CREATE TABLE victim (id int)")
    code, _, err = run_cli(["slot", "create", name, "--dsn", db.dsn])
    # a usage error: the error line, then the --help hint line
    assert code == 2 and err.startswith("pgtail: error:") and err.count("pgtail: error:") == 1
    assert (
        err.splitlines()[1] == 'pgtail: hint: Try "pgtail slot create --help" for more information.'
    )
    assert db.execute("SELECT count(*) FROM victim") == [(0,)]


def test_drop_force_terminates_walsender(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    run_cli(["slot", "create", "busy", "--dsn", db.dsn])
    with streaming(db, "busy", "p") as pid:
        code, _, err = run_cli(["slot", "drop", "busy", "--dsn", db.dsn])
        assert code == 1 and f"walsender PID {pid}" in err and "--force" in err
        code, out, err = run_cli(["slot", "drop", "busy", "--force", "--dsn", db.dsn])
        assert code == 0, err
        assert out == (
            f"terminated walsender PID {pid} that was using slot busy\n"
            "dropped replication slot busy\n"
        )


def test_advance(db: Database) -> None:
    db.execute("CREATE TABLE t (id int)")
    run_cli(["slot", "create", "adv", "--dsn", db.dsn])
    write(db, "INSERT INTO t SELECT generate_series(1, 100)")
    target = str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0])
    code, out, err = run_cli(["slot", "advance", "adv", target, "--dsn", db.dsn])
    assert code == 0, err
    assert out.endswith(f" to {target}\n")
    code, _, err = run_cli(["slot", "advance", "adv", "0/10", "--dsn", db.dsn])
    assert code == 1 and "backwards" in err
    code, _, err = run_cli(["slot", "advance", "adv", "garbage", "--dsn", db.dsn])
    assert code == 2 and "invalid LSN" in err


def test_peek_json_does_not_consume(db: Database) -> None:
    db.execute(
        'CREATE TABLE "Odd Tab" ("Id" int primary key, v text);'
        'CREATE PUBLICATION "Odd Pub" FOR TABLE "Odd Tab"'
    )
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    write(db, """INSERT INTO "Odd Tab" VALUES (1, 'a')""")
    write(db, """UPDATE "Odd Tab" SET v = 'b'; DELETE FROM "Odd Tab" """)
    args = ["slot", "peek", "pk", "--publication", "Odd Pub", "--format", "json", "--dsn", db.dsn]
    code, out, err = run_cli(args)
    assert code == 0, err
    events = [orjson.loads(line) for line in out.splitlines()]
    assert [(e["op"], e["table"]) for e in events] == [
        ("insert", "Odd Tab"),
        ("update", "Odd Tab"),
        ("delete", "Odd Tab"),
    ]
    assert events[0]["new"] == {"Id": 1, "v": "a"}
    assert events[2]["key"] == {"Id": 1}
    code, again, _ = run_cli(args)
    assert again == out  # peeking does not consume
    code, limited, _ = run_cli([*args, "--limit", "1"])
    assert [orjson.loads(x)["op"] for x in limited.splitlines()] == ["insert"]


def test_peek_sql_and_empty(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key, v text); CREATE PUBLICATION p FOR TABLE t")
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    code, out, err = run_cli(["slot", "peek", "pk", "--dsn", db.dsn])
    assert code == 0 and out == "" and "no pending changes" in err
    write(db, "INSERT INTO t VALUES (1, 'it''s')")
    code, out, err = run_cli(["slot", "peek", "pk", "--format", "sql", "--dsn", db.dsn])
    assert code == 0, err
    assert "INSERT INTO" in out and "'it''s'" in out
    code, _, err = run_cli(["slot", "peek", "nope", "--dsn", db.dsn])
    assert code == 1 and "does not exist" in err


def test_peek_active_slot_is_refused(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    run_cli(["slot", "create", "busy", "--dsn", db.dsn])
    with streaming(db, "busy", "p") as pid:
        code, _, err = run_cli(["slot", "peek", "busy", "--dsn", db.dsn])
        assert code == 1 and str(pid) in err and err.count("\n") == 1


def test_terminal_table_shows_names_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    from pgtail.cli import printing

    monkeypatch.setattr(printing, "stdout_is_terminal", lambda: True)
    with CliRunner().isolation() as (out, _, _):
        printing.print_table(["name", "value"], [["[bold]x[/bold]", "1"]], title="things")
        text = out.getvalue().decode()
    assert "[bold]x[/bold]" in text and "things" in text and "━" in text


def test_peek_table_format(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key, v text); CREATE PUBLICATION p FOR TABLE t")
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    write(db, "INSERT INTO t VALUES (42, 'hello')")
    code, out, err = run_cli(["slot", "peek", "pk", "--format", "table", "--dsn", db.dsn])
    assert code == 0, err
    assert "public.t" in out and "42" in out and "hello" in out


def test_peek_max_changes_counts_changes_not_messages(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key, v text); CREATE PUBLICATION p FOR TABLE t")
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    for i in range(10):  # ten single-row transactions: Begin, (Relation,) Insert, Commit each
        write(db, f"INSERT INTO t VALUES ({i}, 'v{i}')")
    before = db.execute("SELECT confirmed_flush_lsn FROM pg_replication_slots")
    args = ["slot", "peek", "pk", "--format", "json", "--dsn", db.dsn]
    code, out, err = run_cli([*args, "--max-changes", "3"])
    assert code == 0, err
    assert [orjson.loads(x)["new"]["id"] for x in out.splitlines()] == [0, 1, 2]
    assert err == "note: stopped after 3 changes (--max-changes); more are pending\n"
    # every change of the slot, when there are fewer than asked for: no note
    code, out, err = run_cli([*args, "--max-changes", "10"])
    assert len(out.splitlines()) == 10 and err == ""
    code, out, err = run_cli([*args, "--max-changes", "50"])
    assert len(out.splitlines()) == 10 and err == ""
    # filters apply before counting, as in stream
    code, out, err = run_cli([*args, "--max-changes", "2", "--ops", "delete"])
    assert out == "" and "no pending changes in slot pk pass the filters" in err
    # --limit is a deprecated spelling of --max-changes
    code, out, err = run_cli([*args, "--limit", "3"])
    assert len(out.splitlines()) == 3 and "--limit is deprecated" in err
    # --tx: the last transaction's begin and commit, no begin of the next one
    code, out, _ = run_cli([*args, "--max-changes", "2", "--tx"])
    assert [orjson.loads(x)["op"] for x in out.splitlines()] == [
        "begin",
        "insert",
        "commit",
        "begin",
        "insert",
        "commit",
    ]
    # raw: two Insert messages, the trace ends with the second transaction's Commit
    raw = ["slot", "peek", "pk", "--format", "raw", "--max-changes", "2", "--dsn", db.dsn]
    code, out, _ = run_cli(raw)
    kinds = [line.split()[1] for line in out.splitlines()]
    assert kinds.count("Insert") == 2 and kinds[-1] == "Commit"
    assert "t:'v1'" in out
    # peeking never moves the slot
    assert db.execute("SELECT confirmed_flush_lsn FROM pg_replication_slots") == before


def test_peek_table_shares_stream_output_options(db: Database) -> None:
    db.execute(
        "CREATE TABLE t (id int primary key, c text, i interval);"
        "CREATE PUBLICATION p FOR TABLE t; INSERT INTO t VALUES (1, 'gamma', '1 day 2 hours')"
    )
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    write(db, "UPDATE t SET c = 'GAMMA'")
    write(db, "UPDATE t SET c = 'delta'")
    args = ["slot", "peek", "pk", "--format", "table", "--dsn", db.dsn]
    code, out, err = run_cli([*args, "--changed-only", "--color", "never", "--max-width", "8"])
    assert code == 0, err
    assert "1 day 0…" in out  # psql's form, cut at --max-width
    assert out.count("--changed-only: no old row to compare") == 1
    assert out.count("note: old rows: key only") == 1
    db.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    run_cli(["slot", "drop", "pk", "--dsn", db.dsn])
    run_cli(["slot", "create", "pk", "--dsn", db.dsn])
    write(db, "UPDATE t SET c = 'GAMMA'")
    code, out, err = run_cli([*args, "--changed-only", "--color", "always"])
    assert "\x1b[" in out
    code, out, err = run_cli([*args, "--changed-only"])
    rows = [line for line in out.splitlines() if line.startswith(" update")]
    assert rows == [" update │  1 │ delta → GAMMA"]  # the first column tells the row apart


def test_peek_and_stream_declare_their_output_options_once() -> None:
    from pgtail.cli import _register_commands, cli

    _register_commands()
    group = cli.commands["slot"]
    assert isinstance(group, click.Group)
    peek = {p.name: p for p in group.commands["peek"].params}
    stream = {p.name: p for p in cli.commands["stream"].params}
    shared = [
        "fmt", "tx_lines", "color", "changed_only", "max_width", "collapse",
        "tables", "exclude", "ops", "redact", "max_changes",
    ]  # fmt: skip
    for name in shared:
        a, b = peek[name], stream[name]
        assert isinstance(a, click.Option) and isinstance(b, click.Option)
        assert (a.opts, a.help, a.default, a.multiple, repr(a.type)) == (
            b.opts,
            b.help,
            b.default,
            b.multiple,
            repr(b.type),
        ), name


@pytest.mark.min_major(14)  # pgoutput's messages option
def test_peek_shows_messages_and_every_publication_as_its_help_says(db: Database) -> None:
    """Where peek's defaults differ from stream's (messages without --messages, every
    publication when none is named), the help says so, and that is what happens."""
    db.execute(
        "CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY);"
        "CREATE PUBLICATION pa FOR TABLE a; CREATE PUBLICATION pb FOR TABLE b"
    )
    assert run_cli(["slot", "create", "s", "--dsn", db.dsn])[0] == 0
    write(db, "INSERT INTO a VALUES (1); INSERT INTO b VALUES (2)")
    write(db, "SELECT pg_logical_emit_message(true, 'p', 'hello')")
    code, out, err = run_cli(["slot", "peek", "s", "--format", "json", "--dsn", db.dsn])
    assert code == 0, err
    ops = [(r["op"], r.get("table")) for r in map(orjson.loads, out.splitlines())]
    assert ops == [("insert", "a"), ("insert", "b"), ("message", None)]
    code, _, err = run_cli(["stream", "--slot", "s", "--idle-exit", "1", "--dsn", db.dsn])
    assert code == 1 and "choose with --publication" in err
    code, text, _ = run_cli(["slot", "peek", "--help"])
    assert "Two defaults differ from `stream`'s" in " ".join(text.split())
