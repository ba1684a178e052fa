"""`pgtail stream --create-publication` publications: marked, held by their run, and
cleaned up (or at least ignored) by the next run when a kill -9 left them behind; the
doctor lists such leftovers with the statement that drops them. Through the real CLI."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import Any

import orjson

from tests.helpers import pgtail_stream, run_cli, run_stream, write


def pgtail(dsn: str, *args: str) -> subprocess.Popen[bytes]:
    return pgtail_stream(dsn, *args)


def finished(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_stream(dsn, "--idle-exit", "1", *args, text=True, timeout=60)


def run_publications(db: Any) -> dict[str, bool]:
    """pgtail's run publications in the database -> whether their run holds its lock."""
    code, out, err = run_cli(["doctor", "--json", "--dsn", db.dsn])
    assert code in (0, 1) and out.strip(), (code, err)
    return {
        c["subject"]: c["status"] == "ok"
        for c in orjson.loads(out)["checks"]
        if c["id"] == "publication.run"
    }


def publications(db: Any) -> list[str]:
    return [str(r[0]) for r in db.execute("SELECT pubname FROM pg_publication ORDER BY 1")]


def wait_for(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_run(db: Any, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """A `--create-publication` run, once it holds its publication; returns it and the
    publication's name."""
    before = set(run_publications(db))
    proc = pgtail(db.dsn, "--create-publication", *args)

    def held() -> list[str]:
        return [n for n, alive in run_publications(db).items() if alive and n not in before]

    wait_for(held, "the run's publication")
    (name,) = held()
    return proc, name


def kill_9(db: Any, proc: subprocess.Popen[bytes], name: str) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # the server ends the run's sessions (and their locks) once it notices the closed socket
    wait_for(lambda: run_publications(db).get(name) is False, "the run's lock to go")


def setup(db: Any) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


def test_killed_run_leftover_is_listed_then_dropped_by_the_next_run(db: Any) -> None:
    setup(db)
    proc, name = start_run(db, "--table", "t")
    try:
        assert name.startswith(f"pgtail_run_{proc.pid}_")
        comment = db.execute(
            "SELECT obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = %s",
            (name,),
        )[0][0]
        assert f"pid {proc.pid} on host " in str(comment)
        # while it runs: the doctor says so, and a plain run does not count it
        assert run_publications(db) == {name: True}
        alongside = finished(db.dsn)
        assert alongside.returncode == 0, alongside.stderr
        assert "using publication 'pub', the only one" in alongside.stderr
        assert name in alongside.stderr  # "(not counting pgtail_run_..., made for ...)"
        assert name in publications(db)  # a live run's publication is never dropped
    finally:
        kill_9(db, proc, name)

    assert sorted(publications(db)) == sorted(["pub", name])
    code, out, _ = run_cli(["doctor", "--dsn", db.dsn])
    assert f"[WARN] {name}: left behind by a pgtail stream --create-publication run" in out
    assert f"fix: DROP PUBLICATION {name};" in out

    write(db, "INSERT INTO t VALUES (1, 'a')")
    after = finished(db.dsn, "--start", "0/0")
    assert after.returncode == 0, after.stderr
    dropped = [line for line in after.stderr.splitlines() if name in line]
    assert len(dropped) == 1, after.stderr
    assert dropped[0].startswith(f"pgtail: dropped publication {name!r}, left behind")
    assert f"pid {proc.pid} on host" in dropped[0]
    assert publications(db) == ["pub"]
    assert run_publications(db) == {}


def test_doctor_fix_drops_the_leftover(db: Any) -> None:
    setup(db)
    proc, name = start_run(db, "--table", "t")
    kill_9(db, proc, name)
    _, out, _ = run_cli(["doctor", "--json", "--dsn", db.dsn])
    (check,) = [c for c in orjson.loads(out)["checks"] if c["id"] == "publication.run"]
    assert check["status"] == "warn" and check["subject"] == name
    db.execute(check["fix"])
    assert publications(db) == ["pub"]


def test_leftover_the_role_may_not_drop_is_ignored_with_a_warning(db: Any) -> None:
    setup(db)
    proc, name = start_run(db, "--table", "t")
    kill_9(db, proc, name)
    db.execute("CREATE ROLE tailer LOGIN REPLICATION")
    db.execute("GRANT SELECT ON t TO tailer")
    try:
        run = finished(db.server.dsn(db.name, user="tailer"))
        assert run.returncode == 0, run.stderr
        assert f"pgtail: warning: publication {name!r} was left behind" in run.stderr
        assert f"DROP PUBLICATION {name};" in run.stderr
        assert "using publication 'pub', the only one" in run.stderr
        assert sorted(publications(db)) == sorted(["pub", name])
    finally:
        db.execute(f"DROP PUBLICATION IF EXISTS {name}")
        db.execute("DROP OWNED BY tailer")
        db.execute("DROP ROLE tailer")


def test_named_leftover_is_kept_when_asked_for_and_made_afresh_by_create(db: Any) -> None:
    setup(db)
    db.execute("CREATE TABLE u (id int PRIMARY KEY)")
    proc, name = start_run(db, "--publication", "mine", "--table", "t")
    assert name == "mine"
    kill_9(db, proc, name)
    # streamed by name, the leftover is what was asked for: kept
    kept = finished(db.dsn, "--publication", "mine")
    assert kept.returncode == 0, kept.stderr
    assert "mine" in publications(db)
    # asked to create it again (other tables), the dead run's one is replaced
    before = db.execute("SELECT oid FROM pg_publication WHERE pubname = 'mine'")
    proc = pgtail(db.dsn, "--create-publication", "--publication", "mine", "--table", "u")
    wait_for(lambda: run_publications(db).get("mine") is True, "the new run's publication")
    try:
        assert db.execute("SELECT oid FROM pg_publication WHERE pubname = 'mine'") != before
        if "mine" not in publications(db):
            proc.send_signal(signal.SIGTERM)
            raise AssertionError(f"mine gone: {proc.poll()} {proc.communicate(timeout=30)}")
        tables = db.execute("SELECT tablename FROM pg_publication_tables WHERE pubname = 'mine'")
        assert tables == [("u",)]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert b"dropped publication 'mine', left behind" in err
    assert "mine" not in publications(db)  # dropped at the end, as any run's


def test_unmarked_publication_is_never_taken_for_a_leftover(db: Any) -> None:
    setup(db)
    # named like one, but not made by a pgtail run (no comment): the user's own
    db.execute("CREATE PUBLICATION pgtail_run_1_deadbeef FOR TABLE t")
    run = finished(db.dsn)
    assert run.returncode == 1
    assert "has 2 publications (pgtail_run_1_deadbeef, pub)" in run.stderr
    assert "pgtail_run_1_deadbeef" in publications(db)
    assert run_publications(db) == {}


def test_clean_exit_drops_the_run_publication(db: Any) -> None:
    setup(db)
    proc, name = start_run(db, "--table", "t")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert publications(db) == ["pub"]
