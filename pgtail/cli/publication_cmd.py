"""``pgtail publication ...``: list, show, create, alter and drop publications.

Before a publication starts publishing UPDATE/DELETE of a table, the table's
replica identity is checked (in the same transaction, by `pgtail.doctor`'s
`publication_problems`, which the catalog calls before it commits).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from pgtail.catalog.names import OPERATIONS
from pgtail.cli import cli
from pgtail.cli.completers import complete_publication
from pgtail.cli.printing import print_fields, print_json, print_table
from pgtail.cli.shared_options import Checked, connection_options, json_option, usage_error
from pgtail.errors import ConfigurationError
from pgtail.render.escape import escape_text

if TYPE_CHECKING:
    from pgtail.catalog import PublicationChange, PublicationInfo, TableTarget


@cli.group("publication")
def publication() -> None:
    """Manage publications: which tables and operations a slot streams.

    \b
    Examples:
      pgtail publication list
      pgtail publication create app_pub --table public.orders --table public.customers
      pgtail publication create big --table 'public.orders(id, total)' --where 'total > 100'
      pgtail publication show app_pub
    """


def _tables_summary(pub: PublicationInfo) -> str:
    if pub.all_tables:
        return "ALL TABLES"
    parts = [t.qualified for t in pub.tables]
    parts += [f"schema {s}" for s in pub.schemas]
    return ", ".join(parts) or "-"


@publication.command("list")
@connection_options
@json_option()
def publication_list(dsn: str | None, as_json: bool) -> None:
    """List the publications of the database.

    \b
    Examples:
      pgtail publication list
      pgtail publication list --json | jq '.[].name'
    """
    from pgtail import catalog

    pubs = catalog.list_publications(dsn)
    if as_json:
        print_json([p.to_dict() for p in pubs])
        return
    if not pubs:
        click.echo("no publications in this database", err=True)
        return
    print_table(
        ["publication", "owner", "operations", "via_root", "tables", "objects"],
        [
            [
                p.name,
                p.owner,
                ",".join(p.operations),
                "yes" if p.via_partition_root else "no",
                str(len(p.published_tables)),
                _tables_summary(p),
            ]
            for p in pubs
        ],
        # narrow terminals: owner and via_root give way before the objects column, which
        # wraps and keeps at least 16 cells
        importance=[100, 40, 70, 30, 80, 90],
        flex=(0, 1),
    )


@publication.command("show")
@click.argument("name", shell_complete=complete_publication)
@connection_options
@json_option()
def publication_show(name: str, dsn: str | None, as_json: bool) -> None:
    """Show one publication: operations, tables with column lists and row filters,
    schemas, FOR ALL TABLES, publish_via_partition_root, and every published table.

    \b
    Example:
      pgtail publication show app_pub
    """
    from pgtail import catalog

    pub = catalog.get_publication(dsn, name)
    if as_json:
        print_json(pub.to_dict())
        return
    _print_publication(pub)


def _print_publication(pub: PublicationInfo) -> None:
    print_fields(
        [
            ("owner", pub.owner),
            ("operations", ", ".join(pub.operations) or "-"),
            ("all tables", "yes" if pub.all_tables else "no"),
            ("schemas", ", ".join(pub.schemas) or "-"),
            ("publish_via_partition_root", "yes" if pub.via_partition_root else "no"),
            ("published tables", ", ".join(pub.published_tables) or "-"),
        ],
        title=f"publication {pub.name}",
    )
    if pub.tables:
        print_table(
            ["table", "columns", "row filter"],
            [
                [
                    t.qualified,
                    ", ".join(t.columns) if t.columns is not None else "(all)",
                    t.row_filter or "-",
                ]
                for t in pub.tables
            ],
        )


def _targets(tables: Sequence[str], wheres: Sequence[str]) -> list[TableTarget]:
    from pgtail.catalog import TableTarget, parse_table_spec

    if len(wheres) > len(tables):
        raise usage_error(
            "more --where than --table options (the Nth --where filters the Nth --table;"
            " use --where '' for no filter)"
        )
    targets = []
    for i, table in enumerate(tables):
        where = wheres[i] if i < len(wheres) else None
        targets.append(TableTarget(parse_table_spec(table), where if where else None))
    return targets


def _schemas(schemas: Sequence[str]) -> list[str]:
    from pgtail.catalog import parse_name

    return [parse_name(s) for s in schemas]


def _report(verb: str, change: PublicationChange) -> None:
    for warning in change.warnings:
        click.echo(f"warning: {escape_text(warning)}", err=True)
    pub = change.publication
    click.echo(
        f"{verb} publication {escape_text(pub.name)}: {', '.join(pub.operations)} on "
        f"{len(pub.published_tables)} table(s)"
    )


_table_option = click.option(
    "--table",
    "tables",
    multiple=True,
    metavar="TABLE",
    help="[schema.]table, optionally with a column list: 'public.orders(id, total)'. "
    'Quote odd names SQL-style: \'"My Schema"."My Table"\'. Repeatable.',
)
_where_option = click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="EXPR",
    help="Row filter (PG15+) for the --table in the same position: 'total > 100'. "
    "One boolean expression; ';' and comments are refused. Repeatable.",
)
_schema_option = click.option(
    "--schema",
    "schemas",
    multiple=True,
    metavar="SCHEMA",
    help="Publish every table of a schema (FOR TABLES IN SCHEMA, PG15+). Repeatable.",
)
_remove_table_option = click.option(
    "--table",
    "tables",
    multiple=True,
    metavar="TABLE",
    help="[schema.]table to stop publishing (no column list). "
    'Quote odd names SQL-style: \'"My Schema"."My Table"\'. Repeatable.',
)
_remove_schema_option = click.option(
    "--schema",
    "schemas",
    multiple=True,
    metavar="SCHEMA",
    help="Stop publishing a schema (one added as FOR TABLES IN SCHEMA, PG15+). Repeatable.",
)
_force_option = click.option(
    "--force",
    is_flag=True,
    help="Go ahead even if UPDATE/DELETE on a table would start failing "
    "for want of a replica identity (prints a warning instead).",
)


def _parse_ops(text: str) -> list[str]:
    ops = [o.strip().lower() for o in text.split(",") if o.strip()]
    for op in ops:
        if op not in OPERATIONS:
            raise ConfigurationError(
                f"unknown operation {op} in --ops", hint=f"choose from {','.join(OPERATIONS)}"
            )
    return ops


def _require_change(tables: Sequence[str], schemas: Sequence[str]) -> None:
    if not tables and not schemas:
        raise usage_error("nothing to change (give --table and/or --schema)")


@publication.command("create")
@click.argument("name")
@connection_options
@_table_option
@_where_option
@_schema_option
@click.option("--all-tables", is_flag=True, help="FOR ALL TABLES (needs a superuser).")
@click.option(
    "--ops",
    type=Checked("operations", _parse_ops),
    default=",".join(OPERATIONS),
    show_default=True,
    metavar="OPS",
    help="Operations to publish, comma-separated.",
)
@click.option(
    "--via-partition-root",
    is_flag=True,
    help="Publish changes of partitions as their partitioned root table.",
)
@_force_option
def publication_create(
    name: str,
    tables: tuple[str, ...],
    wheres: tuple[str, ...],
    schemas: tuple[str, ...],
    all_tables: bool,
    ops: list[str],
    via_partition_root: bool,
    force: bool,
    dsn: str | None,
) -> None:
    """Create a publication.

    The name is taken literally (no quoting needed). If the publication publishes
    updates or deletes, every table it adds is checked: a table without a usable
    replica identity would make its UPDATE/DELETE fail, so pgtail refuses and
    prints the fix (or warns, with --force).

    \b
    Examples:
      pgtail publication create app_pub --table orders --table public.customers
      pgtail publication create eu --table 'orders(id, total, region)' --where "region = 'eu'"
      pgtail publication create inserts_only --all-tables --ops insert
      pgtail publication create sales --schema sales --via-partition-root
    """
    from pgtail import catalog, doctor

    if all_tables and (tables or schemas):
        raise usage_error("--all-tables cannot be combined with --table or --schema")
    change = catalog.create_publication(
        dsn,
        name,
        tables=_targets(tables, wheres),
        schemas=_schemas(schemas),
        all_tables=all_tables,
        operations=ops,
        via_partition_root=via_partition_root,
        force=force,
        guard=doctor.publication_problems,
    )
    _report("created", change)


@publication.command("add")
@click.argument("name", shell_complete=complete_publication)
@connection_options
@_table_option
@_where_option
@_schema_option
@_force_option
def publication_add(
    name: str,
    tables: tuple[str, ...],
    wheres: tuple[str, ...],
    schemas: tuple[str, ...],
    force: bool,
    dsn: str | None,
) -> None:
    """Add tables or schemas to a publication (with the same replica identity check
    as create).

    \b
    Examples:
      pgtail publication add app_pub --table public.invoices
      pgtail publication add app_pub --table 'orders(id, total)' --where 'total > 0'
    """
    from pgtail import catalog, doctor

    _require_change(tables, schemas)
    change = catalog.alter_publication(
        dsn,
        name,
        "add",
        tables=_targets(tables, wheres),
        schemas=_schemas(schemas),
        force=force,
        guard=doctor.publication_problems,
    )
    _report("altered", change)


@publication.command("remove")
@click.argument("name", shell_complete=complete_publication)
@connection_options
@_remove_table_option
@_remove_schema_option
def publication_remove(
    name: str, tables: tuple[str, ...], schemas: tuple[str, ...], dsn: str | None
) -> None:
    """Remove tables or schemas from a publication.

    \b
    Example:
      pgtail publication remove app_pub --table public.invoices
    """
    from pgtail import catalog

    _require_change(tables, schemas)
    change = catalog.alter_publication(
        dsn, name, "remove", tables=_targets(tables, ()), schemas=_schemas(schemas)
    )
    _report("altered", change)


@publication.command("drop")
@click.argument("name", shell_complete=complete_publication)
@connection_options
@click.option("--if-exists", is_flag=True, help="Succeed if there is no such publication.")
def publication_drop(name: str, if_exists: bool, dsn: str | None) -> None:
    """Drop a publication.

    Slots streaming through it will fail (or, on PostgreSQL 18, skip it) until
    their consumer uses another publication.

    \b
    Example:
      pgtail publication drop app_pub --if-exists
    """
    from pgtail import catalog

    if catalog.drop_publication(dsn, name, if_exists=if_exists):
        click.echo(f"dropped publication {escape_text(name)}")
    else:
        click.echo(f"publication {escape_text(name)} does not exist; nothing to do")
