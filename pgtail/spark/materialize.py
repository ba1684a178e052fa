"""``pgtail spark materialize``: change logs -> typed current state of every table (no
database needed: each log records its PostgreSQL types).

A run onto an output it wrote before is incremental: ``<output>/_pgtail_materialized.json``
records the log it read (its checkpoint's query), the batches it applied and where it
kept each key's current row (``<output>/_pgtail_state/<generation>/``, the rows as the
JSON text the log holds). The next run reads only the batches written since, folds them
onto those rows (`pgtail.spark.fold`: the kept row is each key's first change) and
rewrites only the tables they touched, so its cost follows the new changes and the
tables' sizes, not the history. Anything else (``full``, another log, a batch it applied
gone) rebuilds from the whole log. Every table is written aside, then swapped in, and the
record is written last: an interrupted run leaves each table as the last run left it or
as this one made it, and the next run applies onto the state the record names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pgtail.spark.changelog import (
    RUN_FILE,
    _location,
    batch_dirs,
    batch_value,
    is_local,
    list_dirs,
    log_schema,
    read_changes,
    read_text,
    recorded_columns,
    refuse_untyped_log,
    rename_path,
    table_dir,
    table_of_dir,
    typed_columns,
    write_text,
)
from pgtail.spark.fold import SNAPSHOT_OP, fill, fold_copies, targets
from pgtail.sqlnames import quote_ident

TABLE_OPS = ("insert", "update", "delete")
PARTITION_COLUMNS = ("schema", "table")
RECORD_FILE = "_pgtail_materialized.json"  # what the last run applied, from which log
STATE_DIR = "_pgtail_state"  # <generation>/: each key's current row (schema, table, k, ...)
NEXT_DIR = "_pgtail_next"  # a table written aside before it is swapped in
OLD_DIR = "_pgtail_old"  # a table swapped out, deleted once the new one is in
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def follow_parallelism(spark: Any) -> int | None:
    """Set ``spark.sql.shuffle.partitions`` to the cluster's parallelism
    (``spark.default.parallelism``, or the cores of the executors registered so far)
    unless the session's configuration sets it. Spark's default of 200 made
    ``materialize`` 2,653 tasks on a 2-core standalone cluster (291 s against 138 s).
    Returns what it set, or None."""
    context = spark.sparkContext
    if context.getConf().contains(SHUFFLE_PARTITIONS):
        return None
    parallelism = max(int(context.defaultParallelism), 1)
    spark.conf.set(SHUFFLE_PARTITIONS, str(parallelism))
    return parallelism


def _live_changes(changes: Any) -> tuple[Any, Any]:
    """(the changes that make the current state, each reset table's cut): a table's state
    restarts at its last truncate or initial load (a load at X: its rows, then the
    changes that committed at X or after; those before are in it)."""
    from pyspark.sql import functions as F

    position = F.struct(F.col("commit_lsn"), F.col("seq"))
    resets = changes.where(F.col("op").isin("truncate", SNAPSHOT_OP)).select(
        *PARTITION_COLUMNS,
        F.when(F.col("op") == "truncate", position)
        .otherwise(F.struct(F.col("commit_lsn"), F.lit(-2).cast("int").alias("seq")))
        .alias("_at"),
    )
    cut = resets.groupBy(*PARTITION_COLUMNS).agg(F.max("_at").alias("_cut"))
    live = (
        changes.where(F.col("op").isin(*TABLE_OPS, SNAPSHOT_OP))
        .join(cut, list(PARTITION_COLUMNS), "left")
        .where(F.col("_cut").isNull() | (position > F.col("_cut")))
    )
    return live, cut


def _key_histories(live: Any, kept: Any | None, cut: Any) -> Any:
    """Each key's changes in order (`targets` of each change, grouped by key); ``kept``,
    the rows of an earlier run, come first, as an insert each (of a table not reset)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    target_type = T.ArrayType(
        T.StructType(
            [
                T.StructField("k", T.StringType()),
                T.StructField("kind", T.StringType()),
                T.StructField("sub", T.IntegerType()),
                T.StructField("origin", T.StringType()),
            ]
        )
    )
    # Plain (pickled) Python UDFs: no pandas needed on the executors.
    targets_udf = F.udf(lambda *a: targets(*a), target_type, useArrow=False)
    exploded = live.select(
        *PARTITION_COLUMNS,
        "commit_lsn",
        "seq",
        "after",
        "unchanged_toast",
        F.explode(targets_udf("op", "key", "after", "commit_lsn", "seq")).alias("t"),
    )
    if kept is not None:
        # before any change of the log's (positions are >= 0), so a reset cuts them off
        first = kept.join(cut, list(PARTITION_COLUMNS), "left_anti").select(
            *PARTITION_COLUMNS,
            F.lit(-1).cast("long").alias("commit_lsn"),
            F.lit(0).cast("int").alias("seq"),
            F.col("row").alias("after"),
            F.lit(None).cast("array<string>").alias("unchanged_toast"),
            F.explode(
                F.array_repeat(
                    F.struct(
                        F.col("k"),
                        F.lit("insert").alias("kind"),
                        F.lit(0).alias("sub"),
                        F.lit(None).cast("string").alias("origin"),
                    ),
                    F.col("copies"),
                )
            ).alias("t"),
        )
        exploded = exploded.unionByName(first)
    return exploded.groupBy(*PARTITION_COLUMNS, F.col("t.k").alias("k")).agg(
        F.sort_array(
            F.collect_list(
                F.struct(
                    F.col("commit_lsn"),
                    F.col("seq"),
                    F.col("t.sub").alias("sub"),
                    F.col("t.kind").alias("kind"),
                    F.col("after"),
                    F.col("unchanged_toast"),
                    F.col("t.origin").alias("origin"),
                )
            )
        ).alias("history")
    )


_STATE_TYPE = "struct<row:string,hole:string>"
_KEPT = (*PARTITION_COLUMNS, "k", "row", "copies")
_KEY_CHAIN_ROUNDS = 8  # key changes in a row, each leaving TOAST unchanged, that fill follows


def _filled(history: Any, folded: Any, cached: list[Any]) -> Any:
    """The folded rows, those made by a key change with unchanged TOAST filled from the
    old key's row, one key further back each round (rare: a round runs only while some
    are pending); the frames it caches are added to ``cached``."""
    from pyspark.sql import functions as F

    fill_udf = F.udf(lambda r, h, o: fill(r, h, o), _STATE_TYPE, useArrow=False)
    done = folded.where(F.col("hole").isNull()).select(*_KEPT)
    pending = folded.where(F.col("hole").isNotNull())
    for _ in range(_KEY_CHAIN_ROUNDS):
        if pending.isEmpty():
            break
        origins = history.select(
            *PARTITION_COLUMNS,
            F.col("k").alias("_origin"),
            F.col("history").alias("_origin_history"),
        )
        pending = (
            pending.withColumn("_origin", F.get_json_object("hole", "$.from"))
            .join(origins, [*PARTITION_COLUMNS, "_origin"], "left")
            .select(
                *PARTITION_COLUMNS,
                "k",
                "copies",
                fill_udf("row", "hole", "_origin_history").alias("s"),
            )
            .select(*PARTITION_COLUMNS, "k", "s.row", "s.hole", "copies")
            .cache()
        )
        cached.append(pending)
        done = done.unionByName(pending.where(F.col("hole").isNull()).select(*_KEPT))
        pending = pending.where(F.col("hole").isNotNull())
    # a longer chain than that: those columns stay out, as without a key change's origin
    return done.unionByName(pending.select(*_KEPT))


def _state_frame(changes: Any, kept: Any | None) -> tuple[Any, list[Any]]:
    """(current row and copies of every key, the frames it cached: unpersist them when
    done), from ``changes`` after the rows ``kept`` by an earlier run (or None)."""
    from pyspark.sql import functions as F

    live, cut = _live_changes(changes)
    history = _key_histories(live, kept, cut).cache()
    fold_type = "struct<row:string,hole:string,copies:int>"
    fold_udf = F.udf(lambda h: fold_copies(h), fold_type, useArrow=False)
    folded = (
        history.select(*PARTITION_COLUMNS, "k", fold_udf("history").alias("s"))
        .select(*PARTITION_COLUMNS, "k", "s.row", "s.hole", "s.copies")
        .where(F.col("row").isNotNull())
        .cache()
    )
    cached = [history, folded]
    return _filled(history, folded, cached), cached


def _run_identity(spark: Any, root: str) -> Any:
    """The log's identity: its location and the query (checkpoint) that writes it."""
    text = read_text(spark, f"{root}/{RUN_FILE}")
    try:
        run = json.loads(text) if text else None
    except ValueError:
        run = None
    return {"log": _location(root), "run": run}


def _committed(spark: Any, identity: Mapping[str, Any]) -> int | None:
    """The last micro-batch the log's checkpoint committed (a higher one may still be
    being written), or None when the checkpoint cannot tell."""
    run = identity.get("run") or {}
    checkpoint = run.get("checkpoint") if isinstance(run, dict) else None
    if not checkpoint:
        return None
    commits = f"{str(checkpoint).rstrip('/')}/commits"
    try:
        if is_local(commits):
            folder = Path(commits.removeprefix("file://"))
            names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        else:
            context = spark.sparkContext
            path = context._jvm.org.apache.hadoop.fs.Path(commits)
            fs = path.getFileSystem(context._jsc.hadoopConfiguration())
            names = [str(s.getPath().getName()) for s in fs.listStatus(path)]
    except Exception:  # unreadable from here: every batch present counts
        return None
    ids = [int(name) for name in names if name.isdigit()]
    return max(ids) if ids else -1


def _read_record(spark: Any, output: str) -> dict[str, Any] | None:
    text = read_text(spark, f"{output}/{RECORD_FILE}")
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _plan(
    spark: Any, root: str, output: str, full: bool
) -> tuple[dict[str, list[str]], dict[str, Any], dict[str, Any] | None]:
    """(the batches to apply, by table directory; what the record will say; the earlier
    record to apply them onto, or None for a rebuild)."""
    names = list_dirs(spark, root)
    refuse_untyped_log(root, names)
    identity = _run_identity(spark, root)
    committed = _committed(spark, identity)
    present: dict[str, list[str]] = {}
    for name in names:
        if name.startswith(("_", ".")):
            continue
        found = batch_dirs(list_dirs(spark, f"{root}/{name}"))
        present[name] = [b for b in found if committed is None or not _is_batch_after(b, committed)]
    last = max(
        (int(v) for bs in present.values() for b in bs if (v := batch_value(b) or "").isdigit()),
        default=-1,
    )
    # by value (snapshot-<X>-<n>): the same load whichever name its directory has
    loads = {
        name: [v for b in bs if not (v := batch_value(b) or "").isdigit()]
        for name, bs in present.items()
    }
    record = {**identity, "batch": last, "loads": loads}
    before = _read_record(spark, output)
    if before is None or full or not _continues(spark, output, before, record):
        return present, record, before and {**before, "rebuild": True}
    applied = int(before["batch"])
    done = before.get("loads") or {}
    new = {
        name: [
            b
            for b in bs
            if (value := batch_value(b) or "") not in done.get(name, ())
            and (not value.isdigit() or int(value) > applied)
        ]
        for name, bs in present.items()
    }
    return {name: bs for name, bs in new.items() if bs}, record, before


def _is_batch_after(name: str, committed: int) -> bool:
    value = batch_value(name) or ""
    return value.isdigit() and int(value) > committed


def _continues(
    spark: Any, output: str, before: Mapping[str, Any], record: Mapping[str, Any]
) -> bool:
    """Whether the earlier run's state can take this log's new batches: the same log
    and query, every batch it applied still there, its state still readable."""
    if before.get("log") != record["log"] or before.get("run") != record["run"]:
        return False
    if not isinstance(before.get("batch"), int) or not before.get("state"):
        return False
    loads = record["loads"]
    for name, applied in (before.get("loads") or {}).items():
        if not set(applied) <= set(loads.get(name, ())):
            return False
    return f"{STATE_DIR}" in list_dirs(spark, output) and str(before["state"]) in list_dirs(
        spark, f"{output}/{STATE_DIR}"
    )


def _remove(spark: Any, path: str) -> None:
    if is_local(path):
        import shutil

        shutil.rmtree(path.removeprefix("file://"), ignore_errors=True)
        return
    context = spark.sparkContext
    hadoop = context._jvm.org.apache.hadoop.fs.Path(path)
    hadoop.getFileSystem(context._jsc.hadoopConfiguration()).delete(hadoop, True)


def _swap(spark: Any, written: str, target: str, old: str) -> None:
    """Put the directory ``written`` at ``target``: the previous one moves to ``old``
    first, and is deleted once the new one is in."""
    _remove(spark, old)
    parent = old.rsplit("/", 1)[0]
    if is_local(parent):
        Path(parent.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    name = target.rsplit("/", 1)[1]
    if name in list_dirs(spark, target.rsplit("/", 1)[0]):
        rename_path(spark, target, old)
    rename_path(spark, written, target)
    _remove(spark, old)


def materialize(
    spark: Any,
    changes: str | Path,
    output: str | Path,
    on_progress: Callable[[str], None] | None = None,
    full: bool = False,
) -> dict[str, int]:
    """Write the current state of every table in the change log under ``output``
    (one Parquet directory per table, ``<schema>.<table>``): the table's columns in order,
    with the Spark types its change log records (those of its latest batch), as a
    ``SELECT *`` of it gives them. Return the row counts. Needs no database.

    Onto an output it wrote before from the same log, only the batches written since are
    applied, and only the tables they touch rewritten (see the module docstring);
    ``full`` rebuilds from the whole log. ``on_progress`` gets a line for each step."""
    from pyspark.sql import functions as F

    from pgtail.spark.load import refuse_unfinished

    say = on_progress or (lambda line: None)
    root = str(changes).rstrip("/")
    out = str(output).rstrip("/")
    refuse_unfinished(spark, root)
    batches, record, previous = _plan(spark, root, out, full)
    before = None if previous is None or previous.get("rebuild") else previous
    kept = None
    if before is not None:
        kept = spark.read.parquet(f"{out}/{STATE_DIR}/{before['state']}")
        count = sum(len(b) for b in batches.values())
        say(f"applying {count} new batch directories onto the state of the last run")
    else:
        say(f"reading the change logs of {len(batches)} tables")
    follow_parallelism(spark)  # again: on a cluster, executors may have registered since
    # the tables with batches to apply, by their directories' names (no job)
    touched = {table for name in batches if (table := table_of_dir(name)) is not None}
    log = read_changes(spark, root, batches).where(F.col("op") != "message").cache()
    cached: list[Any] = [log]
    try:
        if before is not None and not touched:
            say("nothing new since the last run")
            return {str(k): int(v) for k, v in (before.get("counts") or {}).items()}
        last = str((previous or {}).get("state") or "")
        generation = int(last) + 1 if last.isdigit() else 0
        state_path = f"{out}/{STATE_DIR}/{generation}"
        state, more = _state_frame(log, kept)
        cached.extend(more)
        state.write.mode("overwrite").parquet(state_path)  # beside the last run's
        state = spark.read.parquet(state_path)
        totals = {
            (r["schema"], r["table"]): int(r["n"])
            for r in state.groupBy(*PARTITION_COLUMNS).agg(F.sum("copies").alias("n")).collect()
        }
        say(f"current state: {sum(totals.values())} rows")
        earlier = (before or {}).get("counts") or {}
        counts = {str(k): int(v) for k, v in earlier.items()}
        for number, (schema_name, table_name) in enumerate(sorted(touched), 1):
            name = _write_table(spark, root, out, state, schema_name, table_name)
            if name is None:
                continue
            counts[name] = totals.get((schema_name, table_name), 0)
            target = table_dir(out, schema_name, table_name)
            say(f"[{number}/{len(touched)}] {name}: {counts[name]} rows written to {target}")
        write_text(
            spark,
            f"{out}/{RECORD_FILE}",
            json.dumps({**record, "state": str(generation), "counts": counts}) + "\n",
        )
        if last and last != str(generation):
            _remove(spark, f"{out}/{STATE_DIR}/{last}")
        return counts
    finally:
        for frame in cached:
            frame.unpersist()


def _write_table(
    spark: Any, root: str, out: str, state: Any, schema_name: str, table_name: str
) -> str | None:
    """Write one table's current rows aside, then swap them in; its name as SQL quotes
    it, or None when its log has no typed columns."""
    from pyspark.sql import functions as F

    columns = recorded_columns(spark, table_dir(root, schema_name, table_name))
    if not columns:
        # no typed columns: the table was gone before its first batch was written
        # (its rows are in the log's JSON only)
        return None
    schema = log_schema(f"{schema_name}.{table_name}", columns)
    mine = (F.col("schema") == schema_name) & (F.col("table") == table_name)
    # equal rows of a table without a primary key (REPLICA IDENTITY FULL), each as often
    # as the table holds it
    rows = state.where(mine).select(F.explode(F.array_repeat("row", "copies")).alias("row"))
    frame = rows.select(*typed_columns(columns, schema, F.col("row")))
    target = table_dir(out, schema_name, table_name)
    directory = target.rsplit("/", 1)[1]
    written = f"{out}/{NEXT_DIR}/{directory}"
    frame.write.mode("overwrite").parquet(written)
    _swap(spark, written, target, f"{out}/{OLD_DIR}/{directory}")
    # quoted as SQL would (plain names as they are): "a.b".c is not a."b.c"
    return f"{quote_ident(schema_name)}.{quote_ident(table_name)}"
