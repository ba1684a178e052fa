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


# bash splits the words it hands over at COMP_WORDBREAKS (":" and "=" among them), so a
# URI or --dsn='...' arrive in pieces; pgtail's bash script also sends the line itself
BASH_BREAKS = ":="


def typed_words() -> tuple[list[str], str] | None:
    """The words typed before the one being completed (without the program name), and
    that word so far; None outside completion. From the command line as typed
    (``COMP_LINE`` up to ``COMP_POINT``, split as the shell quotes) when the script sends
    it, else from ``COMP_WORDS`` / ``COMP_CWORD``."""
    from click.shell_completion import split_arg_string

    line = os.environ.get("COMP_LINE")
    if line is not None:
        point = os.environ.get("COMP_POINT", "")
        text = line[: int(point)] if point.isdigit() else line
        args = split_arg_string(text)
        incomplete = "" if not text or text[-1].isspace() or not args else args.pop()
        return args[1:], incomplete
    words = os.environ.get("COMP_WORDS")
    if words is None:
        return None
    cwords = split_arg_string(words)
    cword = int(os.environ.get("COMP_CWORD", len(cwords)))
    return cwords[1:cword], cwords[cword] if cword < len(cwords) else ""


def _reparsed(ctx: click.Context) -> click.Context | None:
    """The context of the words before the one completed, without a trailing option name.

    When the word completed is an option's value (``--slot <TAB>``), click parses the
    words before it with that option still waiting for its value, which leaves every
    parameter at its default; parsed without it, ``--dsn`` and the rest are there. The
    words are those click's completion classes read (``COMP_WORDS``, ``COMP_CWORD``).
    """
    try:
        from click.parser import _split_opt
        from click.shell_completion import _resolve_context

        typed = typed_words()
        if typed is None:
            return None
        args = typed[0]
        # the last word an option name waiting for its value (not --dsn=VALUE)
        if not args or not _split_opt(args[-1])[0] or "=" in args[-1]:
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
