"""`pgtail spark` on a real standalone cluster: a master and one worker started from the
PySpark install (``spark-class``), the CLI as a user runs it with ``--master spark://``.

One test on one major: a cluster costs a minute to start and to give each run its
executor (the suite must stay short on 2 cores).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import SPARK_TEST_JAVA_OPTIONS, settle

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited with {process.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"port {port} not listening: {log.read_text()[-2000:]}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(master URL, the worker's work directory): a master and one worker of 2 cores."""
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        # the master's, the worker's and (inheriting the worker's environment) the
        # executors' JVMs, as tests/conftest.py sets the drivers' (their logs say "Picked up")
        "JAVA_TOOL_OPTIONS": SPARK_TEST_JAVA_OPTIONS,
    }
    port, work = free_port(), tmp_path / "work"
    url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        for name, args, listens in (
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(port), "--webui-port", str(free_port())], port),
            ("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", "2", "--memory", "1g", "--work-dir", str(work),
                        "--webui-port", str(free_port()), url], None),
        ):  # fmt: skip
            log = tmp_path / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [str(spark_class), *args], env=env, stdout=out, stderr=subprocess.STDOUT
                )
            started.append(process)
            if listens is not None:
                wait_for_port(listens, process, log)
        deadline = time.monotonic() + 120
        master_log = tmp_path / "master.log"
        while "Registering worker" not in master_log.read_text():
            assert time.monotonic() < deadline, master_log.read_text()[-2000:]
            assert started[-1].poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(0.5)
        yield url, work
    finally:
        for process in reversed(started):
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def pgtail(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pgtail", *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.timeout(1500)  # three applications, each waiting for its executor
def test_a_pipeline_on_a_standalone_cluster(
    db15: Any, tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    """spark run --snapshot, more changes, a second run and materialize, each on
    spark://: the state equals SELECT *, and the tasks ran on the worker's executors."""
    url, work = cluster
    db15.execute("CREATE TABLE t (id int PRIMARY KEY, v text, n numeric(8, 2))")
    db15.execute("CREATE TABLE bag (n int)")
    db15.execute("ALTER TABLE bag REPLICA IDENTITY FULL")
    db15.execute("INSERT INTO t SELECT g, 'row ' || g, g / 4.0 FROM generate_series(1, 500) g")
    db15.execute("INSERT INTO bag VALUES (1), (1), (2)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t, bag")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    out, chk, current = tmp_path / "changes", tmp_path / "chk", tmp_path / "current"
    run = ["spark", "run", "--dsn", db15.dsn, "--slot", "s", "--publication", "p",
           "--output", str(out), "--checkpoint", str(chk), "--master", url,
           "--trigger", "available-now"]  # fmt: skip
    pgtail(*run, "--snapshot")
    db15.execute("UPDATE t SET v = 'changed' WHERE id % 7 = 0")
    db15.execute("DELETE FROM t WHERE id > 450")
    db15.execute("DELETE FROM bag WHERE ctid = (SELECT ctid FROM bag WHERE n = 1 LIMIT 1)")
    db15.execute("INSERT INTO bag VALUES (2)")
    settle(db15)
    pgtail(*run)
    done = pgtail("spark", "materialize", "--changes", str(out), "--output", str(current),
                  "--master", url)  # fmt: skip
    assert done.stdout.splitlines() == ["public.bag: 3 rows", "public.t: 450 rows"]

    import pyarrow.parquet as pq

    got = pq.read_table(str(current / "public.t")).to_pylist()
    rows = db15.execute("SELECT id, v, n FROM t")
    assert sorted((r["id"], r["v"], r["n"]) for r in got) == sorted(rows)
    bag = sorted(r["n"] for r in pq.read_table(str(current / "public.bag")).to_pylist())
    assert bag == sorted(r[0] for r in db15.execute("SELECT n FROM bag"))
    # three applications (two runs, a materialize), each with an executor on the worker
    # that ran tasks (its log says so; the driver's local executor would log nowhere here)
    apps = sorted(work.glob("app-*"))
    assert len(apps) == 3
    for app in apps:
        logs = "".join(p.read_text(errors="replace") for p in app.glob("*/stderr"))
        assert "Running task" in logs, app
