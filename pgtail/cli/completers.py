"""Shell completion of slot and publication names from the server.

A ``shell_complete`` callback (`complete_slot`, `complete_logical_slot`,
`complete_publication`) asks the server the command line points at (a DSN argument,
``--dsn`` or psql-style options typed before the word, else ``DATABASE_URL`` and libpq's
environment) for the names; with no server, or any failure, it offers nothing. Kept
apart from the ``completion`` command so option declarations can use it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

if TYPE_CHECKING:
    from pgtail.catalog.completion import NameKind


def _connection(ctx: click.Context) -> str | None:
    """The connection the words typed so far point at (None: the environment's), merged
    as the command itself would merge them; None too when they conflict."""
    params: dict[str, Any] = {}
    current: click.Context | None = _reparsed(ctx) or ctx
    while current is not None:  # a group's options count too
        for key, value in current.params.items():
            params.setdefault(key, value)
        current = current.parent
    from pgtail.catalog import connection_string

    try:
        return connection_string(
            argument=params.get("dsn_argument"),
            dsn=params.get("dsn"),
            host=params.get("host"),
            port=params.get("port"),
            user=params.get("username"),
            dbname=params.get("dbname"),
        )
    except Exception:  # noqa: BLE001 - conflicting words: nothing to complete from
        return None


def _reparsed(ctx: click.Context) -> click.Context | None:
    """The context of the words before the one completed, without a trailing option name.

    When the word completed is an option's value (``--slot <TAB>``), click parses the
    words before it with that option still waiting for its value, which leaves every
    parameter at its default; parsed without it, ``--dsn`` and the rest are there. The
    words are those click's completion classes read (``COMP_WORDS``, ``COMP_CWORD``).
    """
    words = os.environ.get("COMP_WORDS")
    if words is None:
        return None
    try:
        from click.parser import _split_opt
        from click.shell_completion import _resolve_context, split_arg_string

        args = split_arg_string(words)
        cword = int(os.environ.get("COMP_CWORD", len(args)))
        args = args[1:cword]
        if not args or not _split_opt(args[-1])[0]:
            return None
        return _resolve_context(ctx.find_root().command, {}, "pgtail", args[:-1])
    except Exception:  # noqa: BLE001 - click's internals moved: complete from ctx alone
        return None


def _complete(ctx: click.Context, kind: NameKind, incomplete: str) -> list[CompletionItem]:
    from pgtail.catalog.completion import names_for_completion

    names = names_for_completion(_connection(ctx), kind, incomplete)
    return [CompletionItem(name) for name in names]


def complete_slot(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """``shell_complete`` for a slot name: every slot on the server."""
    return _complete(ctx, "slot", incomplete)


def complete_logical_slot(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """``shell_complete`` for a slot to stream or peek: the database's logical slots."""
    return _complete(ctx, "logical_slot", incomplete)


def complete_publication(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """``shell_complete`` for a publication name: the database's publications."""
    return _complete(ctx, "publication", incomplete)
