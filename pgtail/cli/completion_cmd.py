"""``pgtail completion bash|zsh|fish``: print the shell completion script; and the
callbacks that complete slot and publication names from the server.

The scripts come from click's shell completion classes; they call back into
``pgtail`` with ``_PGTAIL_COMPLETE`` set, so completions follow the installed CLI.
A ``shell_complete`` callback (`complete_slot`, `complete_publication`) asks the server
the command line points at (``--dsn`` / a DSN argument / psql-style connection options
typed before the word, else ``DATABASE_URL`` and libpq's environment) for the names;
with no server, or any failure, it offers nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    ShellComplete,
    ZshComplete,
)

from pgtail.cli import cli

if TYPE_CHECKING:
    from pgtail.catalog.completion import NameKind

COMPLETE_VAR = "_PGTAIL_COMPLETE"
SHELLS: dict[str, type[ShellComplete]] = {
    "bash": BashComplete,
    "zsh": ZshComplete,
    "fish": FishComplete,
}


# connection options a command may have, by parameter name -> libpq keyword
_LIBPQ_PARAMS = {
    "host": "host",
    "port": "port",
    "user": "user",
    "username": "user",
    "dbname": "dbname",
    "database": "dbname",
}


def _connection(ctx: click.Context) -> tuple[str | None, dict[str, str]]:
    """The DSN and libpq keywords typed on the command line so far."""
    params: dict[str, Any] = {}
    current: click.Context | None = _reparsed(ctx) or ctx
    while current is not None:  # a group's options count too
        for key, value in current.params.items():
            params.setdefault(key, value)
        current = current.parent
    dsn = params.get("dsn") or params.get("dsn_arg")
    settings = {
        keyword: str(params[name])
        for name, keyword in _LIBPQ_PARAMS.items()
        if params.get(name) not in (None, "")
    }
    return (dsn if isinstance(dsn, str) else None), settings


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

    dsn, settings = _connection(ctx)
    names = names_for_completion(dsn, kind, incomplete, settings)
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


def completion_script(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish)."""
    complete = SHELLS[shell](cli, {}, "pgtail", COMPLETE_VAR)
    return complete.source()


@cli.command("completion")
@click.argument("shell", type=click.Choice(sorted(SHELLS)))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    Load it from your shell's startup file so commands, options and choices
    complete with TAB.

    \b
    Examples:
      eval "$(pgtail completion bash)"     # in ~/.bashrc
      eval "$(pgtail completion zsh)"      # in ~/.zshrc
      pgtail completion fish > ~/.config/fish/completions/pgtail.fish
    """
    click.echo(completion_script(shell), nl=False)
