"""``pgtail spark run|materialize``: the standard change-data pipeline on Spark, with no
Spark code to write: slot -> Parquet change log -> current state of every table.

Thin: options are parsed here, the work is in `pgtail.spark.pipeline`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from pgtail.cli import ExitCode, cli
from pgtail.cli.shared_options import (
    PUBLICATION_FORM,
    SLOT_NAME,
    Checked,
    binary_option,
    connection_options,
    publication_option,
)
from pgtail.errors import ConfigurationError
from pgtail.progress import progress_line


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=what)
        result[key.strip()] = value
    return result


@contextmanager
def _spark_errors() -> Iterator[None]:
    """Whatever Spark raises becomes one `PgtailError` line (main shows the traceback
    only with --debug, through the chained cause)."""
    from pgtail.errors import PgtailError

    try:
        yield
    except (PgtailError, KeyboardInterrupt, click.ClickException, click.exceptions.Exit):
        raise
    except Exception as exc:
        from pgtail.spark.pipeline import spark_failure

        raise spark_failure(exc) from exc


def _session(master: str, conf: dict[str, str], app_name: str) -> Any:
    from pgtail.spark import require_pyspark

    require_pyspark()
    from pgtail.spark.pipeline import quiet_py4j_interrupts, quiet_query_errors, session

    debug = getattr(click.get_current_context().obj, "debug", False)
    if not debug:
        quiet_py4j_interrupts()  # a Ctrl-C during Spark's start-up: one line
    spark = session(master, app_name, conf)
    spark.sparkContext.setLogLevel("ERROR")
    if not debug:
        quiet_query_errors(spark)  # the error is shown once, as one line
    return spark


def _master(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """Spark's own rule for a master (SparkSubmit's), checked before Spark starts: a
    master it refuses would otherwise end in a Java stack trace after ~10 s."""
    if value == "yarn" or value.startswith(("local", "spark", "k8s")):
        return value
    raise click.BadParameter(
        f"{value!r}: Spark takes local, local[N], local[*], spark://HOST:PORT, "
        "k8s://https://HOST:PORT or yarn"
    )


master_option = click.option(
    "--master",
    default="local[*]",
    show_default=True,
    metavar="URL",
    callback=_master,
    help="Spark master: local[*], local[N], spark://host:7077, yarn, ...",
)
conf_option = click.option(
    "--conf",
    "conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark configuration, repeatable (e.g. --conf spark.executor.memory=4g).",
)


@cli.group("spark")
def spark_group() -> None:
    """Run the change-data pipeline on Apache Spark (needs pgtail[spark]).

    \b
    The slot is read through the pgoutput Spark data source with exactly-once
    replay: the slot advances only after Spark has committed a batch. Spark
    speculation is turned off (two tasks must never read one slot). Spark's
    Python workers run pgtail's own interpreter unless PYSPARK_PYTHON is set.

    \b
    Examples:
      pgtail spark run --slot app --publication app_pub \\
          --output /data/changes --checkpoint /data/chk --trigger available-now
      pgtail spark materialize --changes /data/changes --output /data/current
    """


def _trigger(text: str) -> str:
    from pgtail.spark.pipeline import parse_trigger

    parse_trigger(text)  # a bad trigger fails before Spark starts
    return text


def _run_options(
    dsn: str | None,
    slot: str,
    publications: tuple[str, ...],
    fail_on_data_loss: bool,
    binary: bool,
    max_bytes_per_trigger: int | None,
) -> dict[str, str]:
    """The source options of ``spark run``'s options."""
    from pgtail.spark.pipeline import source_options

    extra = {
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
        "binary": "true" if binary else "false",
    }
    if max_bytes_per_trigger is not None:
        extra["maxBytesPerTrigger"] = str(max_bytes_per_trigger)
    return source_options(dsn=dsn, slot=slot, publication=",".join(publications), extra=extra)


def _check_before_spark(options: dict[str, str], writer: str, output: str, checkpoint: str) -> None:
    """What `spark run` can refuse in one clear line before Spark's start-up (10-20 s): a
    bad --writer for --output, a missing slot or publication, and (local paths) an
    output another query wrote."""
    from pgtail.spark.changelog import is_local
    from pgtail.spark.pipeline import check_output, validate_source
    from pgtail.spark.writers import chosen_writer

    chosen_writer(writer, output)
    validate_source(options)
    if is_local(output) and is_local(checkpoint):
        check_output(None, output, checkpoint)


@spark_group.command("run")
@connection_options
@click.option(
    "--slot",
    type=SLOT_NAME,
    required=True,
    metavar="NAME",
    help="Replication slot (pgoutput plugin) to read.",
)
@publication_option(f"Publication to read through {PUBLICATION_FORM}.", required=True)
@click.option(
    "--output", required=True, metavar="DIR", help="Change log directory (one per table inside)."
)
@click.option("--checkpoint", required=True, metavar="DIR", help="Spark checkpoint directory.")
@master_option
@click.option(
    "--trigger",
    type=Checked("trigger", _trigger),
    default="10s",
    show_default=True,
    metavar="WHEN",
    help="An interval (10s, 1m), 'once', or 'available-now' (drain what is there, then stop).",
)
@click.option(
    "--max-bytes-per-trigger",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES",
    help="Limit each micro-batch to about this much WAL (rounded to transactions).",
)
@click.option(
    "--fail-on-data-loss/--no-fail-on-data-loss",
    default=True,
    show_default=True,
    help="Stop when the slot was consumed past the checkpoint by someone else.",
)
@click.option(
    "--writer",
    type=click.Choice(["auto", "pyarrow", "spark"]),
    default="auto",
    show_default=True,
    help="Who writes the logs: pyarrow, in the task that reads the slot (local or shared "
    "paths only), or Spark's Parquet writer (any file system); auto picks pyarrow for a "
    "local --output.",
)
@click.option(
    "--snapshot",
    is_flag=True,
    help="First load the published tables' rows into the logs (_pg_op 'snapshot'), "
    "consistent with the slot, in parallel block ranges; then the changes.",
)
@click.option(
    "--snapshot-table",
    "snapshot_tables",
    multiple=True,
    metavar="GLOB",
    help="Load only these tables (schema.table or table globs, repeatable; implies "
    "--snapshot): e.g. to load one table again into a running pipeline.",
)
@binary_option
@conf_option
def spark_run(
    dsn: str | None,
    slot: str,
    publications: tuple[str, ...],
    output: str,
    checkpoint: str,
    master: str,
    trigger: str,
    max_bytes_per_trigger: int | None,
    fail_on_data_loss: bool,
    binary: bool,
    writer: str,
    snapshot: bool,
    snapshot_tables: tuple[str, ...],
    conf: tuple[str, ...],
) -> None:
    """Stream a slot into typed Parquet change logs, one per table.

    Each micro-batch goes to OUTPUT/<schema>.<table>/pgtail_batch=<id>/ (in a
    name, characters other than letters, digits, _ and - as %XX): one
    row per change, the table's own columns with Spark types (the new row of
    an insert or update, the key or old row of a delete, nulls for a
    truncate), then the metadata columns _pg_op, _pg_commit_lsn,
    _pg_end_lsn, _pg_commit_time, _pg_xid, _pg_seq, _pg_unchanged_toast,
    _pg_origin, _pg_schema, _pg_table and _pg_key, _pg_before, _pg_after
    (the rows as JSON). Logical decoding messages go to
    OUTPUT/_messages/pgtail_batch=<id>/. A column added mid-stream appears in the
    batches written after it was added (read a log with mergeSchema: earlier
    rows are null there); a column whose type changes stops the run with an error. Columns
    may not start with _pg_ nor be named pgtail_batch. An earlier version's
    _pg_batch=<id> directories are renamed pgtail_batch=<id>. Restarting
    with the same --checkpoint continues
    exactly where the last committed batch ended; a batch replayed after a
    crash rewrites its own directories. An OUTPUT belongs to one checkpoint
    (recorded in OUTPUT/_pgtail_run.json): a run with another one, whose
    batch ids start from 0 again, is refused.

    --snapshot first copies the published tables (--snapshot-table: those
    only) into the logs as _pg_op 'snapshot' rows in
    OUTPUT/<schema>.<table>/pgtail_batch=snapshot-<LSN>-<n>/, all at the LSN of
    an exported snapshot (a temporary slot's, held open by the driver until
    the load is committed), read in parallel block ranges; materialize takes
    them as the table's state at that LSN, then the changes after it. The
    slot is not read during the load. A load a crash interrupted is deleted
    and loaded again by the next run.

    \b
    Examples:
      pgtail spark run --slot app --publication app_pub \\
          --output /data/changes --checkpoint /data/chk --trigger available-now
      pgtail spark run --slot app --publication app_pub --output s3a://lake/changes \\
          --checkpoint s3a://lake/chk --master spark://spark:7077 --trigger 30s
    """
    from pgtail.spark import require_pyspark

    require_pyspark()
    from pgtail.spark.pipeline import Interrupted, run

    options = _run_options(
        dsn, slot, publications, fail_on_data_loss, binary, max_bytes_per_trigger
    )
    spark_conf = _pairs(conf, "--conf")
    _check_before_spark(options, writer, output, checkpoint)
    with _spark_errors():
        spark = _session(master, spark_conf, f"pgtail spark run {slot}")

    def progress(p: dict[str, Any]) -> None:
        progress_line(f"batch {p.get('batchId')}: {p.get('numInputRows', 0)} changes")

    try:
        with _spark_errors():
            try:
                result = run(
                    spark,
                    options=options,
                    output=output,
                    checkpoint=checkpoint,
                    trigger=trigger,
                    on_progress=progress,
                    writer=writer,
                    snapshot=snapshot,
                    snapshot_tables=snapshot_tables,
                    on_load=progress_line,
                )
            except Interrupted as stopped:
                done = stopped.result
                progress_line(
                    f"stopped: {done.rows} changes in {done.batches} batches written to "
                    f"{output}; the slot is confirmed up to the last of them"
                )
                # said: exit 130 without main's own line for an interrupt
                raise click.exceptions.Exit(ExitCode.SIGINT) from None
    finally:
        spark.stop()
    progress_line(f"{result.rows} changes in {result.batches} batches written to {output}")


@spark_group.command("materialize")
@click.option("--changes", required=True, metavar="DIR", help="Change log written by spark run.")
@click.option("--output", required=True, metavar="DIR", help="Where to write one dir per table.")
@click.option(
    "--full",
    is_flag=True,
    help="Rebuild from the whole change log, not from the last run's state.",
)
@master_option
@conf_option
def spark_materialize(
    changes: str, output: str, full: bool, master: str, conf: tuple[str, ...]
) -> None:
    """Compute the current state of every table from a change log, as Parquet.

    The latest change per replica identity key wins (ordered by commit_lsn, then
    seq); deletes remove a row; a truncate empties the table as of its position.
    Equal rows of a table without a primary key (REPLICA IDENTITY FULL) are
    kept as often as the table holds them. Progress goes to stderr;
    spark.sql.shuffle.partitions defaults to the cluster's parallelism (the
    cores of a local master). Each table goes to OUTPUT/<schema>.<table>/ with
    the table's columns in order and the Spark types of its change log, as
    SELECT * gives them. No database connection is needed.

    Run onto an OUTPUT it wrote before from the same log, it applies only the
    batches written since (OUTPUT/_pgtail_materialized.json records what it
    applied, OUTPUT/_pgtail_state/ each key's row) and rewrites only the tables
    they touch; --full rebuilds from the whole log. Each table is written
    aside, then swapped in: an interrupted run leaves the last state readable.

    \b
    Examples:
      pgtail spark materialize --changes /data/changes --output /data/current
      pgtail spark materialize --changes /data/changes --output /data/current \\
          --master local[4] --conf spark.driver.memory=4g
    """
    from pathlib import Path

    from pgtail.spark import require_pyspark

    require_pyspark()
    from pgtail.spark.changelog import is_local
    from pgtail.spark.pipeline import materialize

    if is_local(changes) and not Path(changes).exists():
        raise ConfigurationError(
            f"change log {changes!r} does not exist", hint="run pgtail spark run first"
        )

    with _spark_errors():
        spark = _session(master, _pairs(conf, "--conf"), "pgtail spark materialize")
    try:
        with _spark_errors():
            counts = materialize(
                spark,
                changes,
                output,
                on_progress=progress_line,
                full=full,
            )
    finally:
        spark.stop()
    for table, count in sorted(counts.items()):
        click.echo(f"{table}: {count} rows")
