"""``pgtail doctor`` and ``pgtail identity``: diagnose logical replication and replica
identity problems, with the exact fix for each (checks in `pgtail.doctor`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from pgtail.cli import ExitCode, cli, report_error
from pgtail.cli.completers import complete_slot
from pgtail.cli.printing import print_fields, print_json, stdout_is_terminal
from pgtail.cli.shared_options import (
    PUBLICATION_FORM,
    SLOT_NAME,
    Checked,
    connection_options,
    json_option,
    publication_option,
    usage_error,
)
from pgtail.doctor.findings import parse_size
from pgtail.errors import PgtailError
from pgtail.render.escape import escape_text

if TYPE_CHECKING:
    from pgtail.catalog import IdentityReport
    from pgtail.doctor import Check

_SECTION_TITLES = {
    "server": "Server",
    "role": "Role",
    "publication": "Publications",
    "table": "Tables",
    "slot": "Slots",
}
_MARK = {"ok": "ok", "info": "INFO", "warn": "WARN", "fail": "FAIL"}
_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}


def _print_report(checks: Sequence[Check]) -> None:
    sections: dict[str, list[Check]] = {}
    for check in checks:
        sections.setdefault(check.section, []).append(check)
    from pgtail.doctor import counts as count_checks

    counts = count_checks(checks)
    summary = (
        f"{counts['ok']} ok, {counts['info']} info, {counts['warn']} warning(s), "
        f"{counts['fail']} failure(s)"
    )
    if stdout_is_terminal():
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        console = Console()
        for section, items in sections.items():
            table = Table(
                title=_SECTION_TITLES.get(section, section),
                title_justify="left",
                show_header=False,
                show_edge=False,
                box=None,
                pad_edge=False,
            )
            table.add_column("status", no_wrap=True)
            table.add_column("subject", style="bold", no_wrap=True)
            table.add_column("explanation", overflow="fold")
            for c in items:
                text = escape(escape_text(c.summary))
                if c.fix:
                    text += f"\n[dim]fix:[/dim] [cyan]{escape(escape_text(c.fix))}[/cyan]"
                subject = escape(escape_text(c.subject))
                table.add_row(f"[{_STYLE[c.status]}]{_MARK[c.status]}[/]", subject, text)
            console.print(table)
            console.print()
        console.print(summary)
        return
    for section, items in sections.items():
        click.echo(f"{_SECTION_TITLES.get(section, section)}:")
        for c in items:
            click.echo(f"  [{_MARK[c.status]}] {escape_text(c.subject)}: {escape_text(c.summary)}")
            if c.fix:
                click.echo(f"         fix: {escape_text(c.fix)}")
    click.echo(summary)


@cli.command("doctor")
@connection_options
@publication_option(
    f"Check this publication and its tables {PUBLICATION_FORM}. Default: all of the database."
)
@click.option(
    "--slot",
    "slots",
    type=SLOT_NAME,
    multiple=True,
    metavar="NAME",
    shell_complete=complete_slot,
    help="Check this slot (repeatable; default: every slot on the server).",
)
@click.option(
    "--wal-warn",
    type=Checked("size", parse_size),
    default=None,
    metavar="SIZE",
    help="Also warn about an inactive slot holding more WAL than this (e.g. 512MB); "
    "by default one warns once it holds more than max_wal_size.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit with 1 on a warning too, not only on a failure (for CI).",
)
@json_option("Print the checks as JSON: {status, counts, checks: [...]}.")
def doctor(
    publications: tuple[str, ...],
    slots: tuple[str, ...],
    wal_warn: int | None,
    strict: bool,
    dsn: str | None,
    as_json: bool,
) -> None:
    """Check that logical replication works and will keep working.

    \b
    Each check has a status by its consequence, one line, and a fix that
    can be run as given:
      FAIL  a change will be rejected at the source or lost, or the stream
            cannot run (exit status 1)
      WARN  it works, but will surprise you (exit status 1 with --strict)
      INFO  worth knowing; ok: checked and fine
    A healthy setup has no FAIL and no WARN. When the doctor cannot look (no
    connection, an error while reading) it exits 3, and --json prints
    {"status": "error", "error": {kind, message, hint}}.

    \b
    Checks:
      server      wal_level, max_replication_slots, max_wal_senders (and use)
      role        REPLICATION (or rds_replication-style roles); CREATE on the
                  database and table ownership when a publication asked for
                  does not exist yet; SELECT on the published tables
      tables      replica identity of every published table (none needed when
                  only inserts are published), FULL's cost, columns that can
                  arrive as unchanged TOAST when the table holds values
                  stored out of line, partitions, row filters and column
                  lists not covered by the identity
      slots       inactive slots holding WAL past max_wal_size, slots near or
                  past max_slot_wal_keep_size, invalidated slots, slots asked
                  for with another plugin or of another database, streams
                  whose publication no longer exists

    \b
    Examples:
      pgtail doctor
      pgtail doctor --publication app_pub --slot app --strict
      pgtail doctor postgresql://me@db.example.com/shop
      pgtail doctor --json | jq '.checks[] | select(.status != "ok")'
    """
    from pgtail import catalog
    from pgtail import doctor as checks_module

    try:
        facts = catalog.doctor_facts(dsn, publications, slots)
    except PgtailError as exc:
        # could not look: not a failed check (exit 1), its own status; --json still
        # prints one document, saying what went wrong
        if as_json:
            print_json(_error_dict(exc))
        report_error(exc)
        sys.exit(ExitCode.NOT_CHECKED)
    checks = checks_module.evaluate(facts, wal_warn_bytes=wal_warn)
    if as_json:
        print_json(checks_module.report_dict(checks))
    else:
        _print_report(checks)
    if checks_module.failed(checks, strict=strict):
        # not ctx.exit(): with standalone_mode=False click would return the code, not exit
        sys.exit(ExitCode.ERROR)


def _error_dict(exc: PgtailError) -> dict[str, object]:
    return {
        "status": "error",
        "error": {"kind": type(exc).__name__, "message": exc.message, "hint": exc.hint},
        "counts": None,
        "checks": [],
    }


def _index_or_dsn(f: Callable[..., Any]) -> Callable[..., Any]:
    # The connection string is the last argument everywhere; INDEX exists only with
    # --set index, so without it a second argument is the connection string.
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode") != "index" and kwargs.get("dsn_argument") is None:
            kwargs["dsn_argument"], kwargs["index_name"] = kwargs.get("index_name"), None
        return f(*args, **kwargs)

    return wrapper


@cli.command("identity")
@click.argument("table")
@click.argument("index_name", required=False, metavar="[INDEX]")
@_index_or_dsn
@connection_options
@click.option(
    "--set",
    "mode",
    type=click.Choice(["default", "full", "nothing", "index"], case_sensitive=False),
    default=None,
    help="Change the replica identity; 'index' takes the index name as the next argument.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Change it even if UPDATE/DELETE would then fail because a publication publishes them.",
)
@json_option()
def identity(
    table: str,
    index_name: str | None,
    mode: str | None,
    force: bool,
    dsn: str | None,
    as_json: bool,
) -> None:
    """Show or change a table's replica identity, and what the stream carries.

    The replica identity decides what UPDATE and DELETE events contain: the old
    key (DEFAULT with a primary key, or USING INDEX), the full old row (FULL),
    or nothing, in which case UPDATE/DELETE on a table published for them fail.

    INDEX is given only with --set index; without it, a second argument is the
    connection string (which comes last, as in every command).

    \b
    Examples:
      pgtail identity public.orders
      pgtail identity public.orders postgresql://me@db.example.com/shop
      pgtail identity public.orders --set full
      pgtail identity public.orders --set index orders_code_key
      pgtail identity '"My Schema"."My Table"' --set default
    """
    from pgtail import catalog

    if mode is None:
        if index_name is not None:
            raise usage_error("an index name goes with --set index")
        report = catalog.table_identity(dsn, table)
        if as_json:
            print_json(_identity_dict(report))
        else:
            _print_identity(report, title=f"table {report.table.qualified}")
        return
    from pgtail import doctor as checks_module

    before, after = catalog.set_replica_identity(
        dsn, table, mode, index_name, force=force, guard=checks_module.identity_breaks
    )
    if as_json:
        print_json({"before": _identity_dict(before), "after": _identity_dict(after)})
        return
    _print_identity(before, title=f"before: {before.table.qualified}")
    _print_identity(after, title="after:")


def _identity_dict(report: IdentityReport) -> dict[str, object]:
    from pgtail import doctor as checks_module

    table = report.table
    ident = checks_module.identity_of(table)
    return {
        "table": table.qualified,
        "schema": table.schema,
        "name": table.name,
        "replica_identity": ident.setting,
        "mode": ident.mode,
        "key_columns": list(ident.key_columns),
        "reason": ident.reason,
        "carries": checks_module.stream_carries(table),
        "publications": [
            {"name": p.name, "operations": list(p.operations)} for p in report.publications
        ],
        "fix": checks_module.identity_fix(table) if ident.mode == "nothing" else None,
    }


def _print_identity(report: IdentityReport, *, title: str) -> None:
    data = _identity_dict(report)
    carries = data["carries"]
    assert isinstance(carries, dict)
    pubs = [f"{p.name} ({', '.join(p.operations)})" for p in report.publications]
    pairs = [
        ("replica identity", str(data["replica_identity"])),
        ("key", str(data["reason"])),
        ("INSERT carries", str(carries["insert"])),
        ("UPDATE carries", str(carries["update"])),
        ("DELETE carries", str(carries["delete"])),
        ("publications", ", ".join(pubs) or "-"),
    ]
    if data["fix"]:
        pairs.append(("fix", str(data["fix"])))
    print_fields(pairs, title=title)
