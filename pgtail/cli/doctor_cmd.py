"""``pgtail doctor`` and ``pgtail identity``: diagnose logical replication and replica
identity problems, with the exact fix for each (checks in `pgtail.doctor`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from pgtail.catalog import IdentityReport
from pgtail.cli import ExitCode, cli
from pgtail.cli.completers import complete_slot
from pgtail.cli.options import (
    PUBLICATION_FORM,
    SLOT_NAME,
    Checked,
    connection_options,
    json_option,
    publication_option,
    usage_error,
)
from pgtail.cli.slot_cmd import print_fields, print_json, stdout_is_terminal
from pgtail.doctor import DEFAULT_WAL_WARN_BYTES, Check, human_bytes, parse_size

_SECTION_TITLES = {
    "server": "Server",
    "role": "Role",
    "publication": "Publications",
    "table": "Tables",
    "slot": "Slots",
}
_MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def _print_report(checks: Sequence[Check]) -> None:
    sections: dict[str, list[Check]] = {}
    for check in checks:
        sections.setdefault(check.section, []).append(check)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail")}
    summary = f"{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failure(s)"
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
                text = escape(c.summary)
                if c.fix:
                    text += f"\n[dim]fix:[/dim] [cyan]{escape(c.fix)}[/cyan]"
                table.add_row(f"[{_STYLE[c.status]}]{_MARK[c.status]}[/]", escape(c.subject), text)
            console.print(table)
            console.print()
        console.print(summary)
        return
    for section, items in sections.items():
        click.echo(f"{_SECTION_TITLES.get(section, section)}:")
        for c in items:
            click.echo(f"  [{_MARK[c.status]}] {c.subject}: {c.summary}")
            if c.fix:
                click.echo(f"         fix: {c.fix}")
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
    help=f"Warn about an inactive slot holding more WAL than this "
    f"(default {human_bytes(DEFAULT_WAL_WARN_BYTES)}; e.g. 512MB).",
)
@json_option("Print the checks as JSON: {status, counts, checks: [...]}.")
def doctor(
    publications: tuple[str, ...],
    slots: tuple[str, ...],
    wal_warn: int | None,
    dsn: str | None,
    as_json: bool,
) -> None:
    """Check that logical replication works and will keep working.

    \b
    Checks, each with a status (ok, warn, fail), one line and the exact fix:
      server      wal_level, max_replication_slots, max_wal_senders (and use)
      role        REPLICATION privilege (or rds_replication-style roles),
                  right to create publications
      tables      replica identity of every published table: what UPDATE and
                  DELETE carry, tables whose UPDATE/DELETE fail, FULL cost,
                  unchanged-TOAST columns, partitions, row filters and column
                  lists not covered by the identity
      slots       inactive slots holding WAL, slots near or past
                  max_slot_wal_keep_size, invalidated slots, streams whose
                  publication no longer exists

    Exits with 1 when a check fails (warnings do not), so it fits into CI.

    \b
    Examples:
      pgtail doctor
      pgtail doctor --publication app_pub --slot app
      pgtail doctor postgresql://me@db.example.com/shop
      pgtail doctor --json | jq '.checks[] | select(.status != "ok")'
    """
    from pgtail import catalog
    from pgtail import doctor as checks_module

    threshold = wal_warn if wal_warn is not None else DEFAULT_WAL_WARN_BYTES
    facts = catalog.doctor_facts(dsn, publications, slots)
    checks = checks_module.evaluate(facts, wal_warn_bytes=threshold)
    if as_json:
        print_json(checks_module.report_dict(checks))
    else:
        _print_report(checks)
    if checks_module.overall(checks) == "fail":
        # not ctx.exit(): with standalone_mode=False click would return the code, not exit
        sys.exit(ExitCode.ERROR)


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
