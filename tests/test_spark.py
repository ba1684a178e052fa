"""The pgoutput PySpark data source and `pgtail spark`: real PostgreSQL, real local Spark.

One session-scoped ``local[2]`` SparkSession serves every test (Spark starts slowly).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import orjson  # noqa: E402
import pytest  # noqa: E402

from pgtail.errors import (  # noqa: E402
    ConfigurationError,
    DataLossError,
    PgtailError,
    PublicationError,
    SlotError,
)
from pgtail.lsn import parse_lsn  # noqa: E402
from pgtail.spark.source import parse_options  # noqa: E402

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pgtail.spark.pipeline import session

    s = session(
        "local[2]",
        "pgtail-tests",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
        },
    )
    yield s
    s.stop()


def confirmed(db: Any, slot: str = "s") -> int:
    rows = db.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    )
    return parse_lsn(str(rows[0][0]))


def setup_source(db: Any, slot: str = "s", publication: str = "p") -> None:
    db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric, ok boolean, doc text)"
    )
    db.execute("CREATE TABLE notes (a int, b text, PRIMARY KEY (a, b))")
    db.execute(f"CREATE PUBLICATION {publication} FOR TABLE items, notes")
    db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def first_workload(db: Any) -> None:
    db.execute(
        "INSERT INTO items SELECT g, 'item ' || g, g * 1.5, g % 2 = 0, NULL "
        "FROM generate_series(1, 20) g"
    )
    db.execute("UPDATE items SET name = 'renamed' WHERE id <= 5")
    db.execute("DELETE FROM items WHERE id > 17")
    db.execute("INSERT INTO notes VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    db.execute("SELECT pg_logical_emit_message(true, 'pfx', 'hello')")
    db.execute("SELECT pg_logical_emit_message(false, 'nontx', 'world')")


def second_workload(db: Any) -> None:
    big = "".join(f"{i:08x}" for i in range(2000))  # 16 kB, TOASTed out of line
    db.execute("UPDATE items SET doc = %s WHERE id = 6", (big,))
    db.execute("UPDATE items SET price = 99.99 WHERE id = 6")  # doc: unchanged TOAST
    db.execute("UPDATE items SET id = 100 WHERE id = 7")  # key change
    db.execute("TRUNCATE notes")
    db.execute("INSERT INTO notes VALUES (4, 'w')")
    db.execute("DELETE FROM items WHERE id = 1")
    db.execute("INSERT INTO items VALUES (1, 'back', 1, true, NULL)")


def options(db: Any, **extra: str) -> dict[str, str]:
    return {"dsn": db.dsn, "slot": "s", "publication": "p", **extra}


def read_log(spark: Any, path: Path) -> list[Any]:
    from pgtail.spark.pipeline import read_changes

    return read_changes(spark, path).orderBy("commit_lsn", "seq", "table").collect()


def change_ids(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(r["commit_lsn"], r["seq"], r["table"], r["op"]) for r in rows]


# --- options (no server) ------------------------------------------------------


def test_bad_options_are_clear() -> None:
    with pytest.raises(ConfigurationError, match="option slot is required"):
        parse_options({"publication": "p"})
    with pytest.raises(ConfigurationError, match="unknown option 'slto'"):
        parse_options({"slot": "s", "publication": "p", "slto": "x"})
    with pytest.raises(ConfigurationError, match="failOnDataLoss"):
        parse_options({"slot": "s", "publication": "p", "failOnDataLoss": "maybe"})
    with pytest.raises(ConfigurationError, match="maxBytesPerTrigger"):
        parse_options({"slot": "s", "publication": "p", "maxBytesPerTrigger": "-3"})
    with pytest.raises(ConfigurationError, match="invalid LSN"):
        parse_options({"slot": "s", "publication": "p", "startingLsn": "zz"})
    with pytest.raises(ConfigurationError, match="no publication for slot 's'"):
        parse_options({"slot": "s"})
    settings = parse_options({"slots": "a:p1+p2, b", "publication": "q", "dsn": "dbname=x"})
    assert [(s.name, s.publications) for s in settings.slots] == [
        ("a", ("p1", "p2")),
        ("b", ("q",)),
    ]


def test_errors_survive_pickling() -> None:
    import pickle

    err = DataLossError("lost", hint="fix")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is DataLossError and str(back) == "lost (fix)"


# --- batch reads --------------------------------------------------------------


def test_batch_read_peeks_pending_changes_without_moving_the_slot(spark: Any, db15: Any) -> None:
    setup_source(db15)
    before = confirmed(db15)
    first_workload(db15)
    df = spark.read.format("pgoutput").options(**options(db15)).load()
    rows = df.orderBy("end_lsn", "seq", "table").collect()
    ops = [(r["op"], r["table"]) for r in rows]
    assert ops.count(("insert", "items")) == 20
    assert ops.count(("update", "items")) == 5
    assert ops.count(("delete", "items")) == 3
    assert ops.count(("insert", "notes")) == 3
    messages = [r["message"] for r in rows if r["op"] == "message"]
    assert [(m["prefix"], bytes(m["content"]), m["transactional"]) for m in messages] == [
        ("pfx", b"hello", True),
        ("nontx", b"world", False),
    ]
    first = next(r for r in rows if r["op"] == "insert" and r["table"] == "items")
    assert orjson.loads(first["after"]) == {
        "id": 1,
        "name": "item 1",
        "price": "1.5",
        "ok": False,
        "doc": None,
    }
    assert orjson.loads(first["key"]) == {"id": 1}
    assert first["schema"] == "public" and first["commit_ts"] is not None
    assert first["unchanged_toast"] == []
    delete = next(r for r in rows if r["op"] == "delete")
    assert orjson.loads(delete["key"]) == {"id": 18} and delete["after"] is None
    # A batch read only peeks.
    assert confirmed(db15) == before
    assert df.count() == len(rows)
