"""``pgtail completion bash|zsh|fish``: print the shell completion script.

The scripts come from click's shell completion classes; they call back into
``pgtail`` with ``_PGTAIL_COMPLETE`` set, so completions follow the installed CLI
(slot and publication names come from the server: see `pgtail.cli.completers`).
"""

from __future__ import annotations

import os

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    ShellComplete,
    ZshComplete,
    add_completion_class,
)

from pgtail.cli import cli
from pgtail.cli.completers import BASH_BREAKS, typed_words

COMPLETE_VAR = "_PGTAIL_COMPLETE"


class PgtailBashComplete(BashComplete):
    """click's bash completion, told the command line as typed (``COMP_LINE``,
    ``COMP_POINT``) besides ``COMP_WORDS``: bash splits those at COMP_WORDBREAKS (":" and
    "="), so a URI --dsn or --dsn='key=value ...' reached pgtail in pieces and names
    came from another server, or none."""

    source_template = BashComplete.source_template.replace(
        "COMP_CWORD=$COMP_CWORD",
        'COMP_CWORD=$COMP_CWORD COMP_LINE="$COMP_LINE" COMP_POINT=$COMP_POINT',
    )
    _replaced = ""  # the part of the word before bash's last word break

    def get_completion_args(self) -> tuple[list[str], str]:
        typed = typed_words() if "COMP_LINE" in os.environ else None
        if typed is None:
            return super().get_completion_args()
        args, incomplete = typed
        # bash puts a completion in place of the word after its last break character
        cut = max(incomplete.rfind(c) for c in BASH_BREAKS)
        self._replaced = incomplete[: cut + 1]
        return args, incomplete

    def format_completion(self, item: CompletionItem) -> str:
        value = item.value
        if self._replaced and isinstance(value, str) and value.startswith(self._replaced):
            value = value[len(self._replaced) :]
        return f"{item.type},{value}"


add_completion_class(PgtailBashComplete, "bash")
SHELLS: dict[str, type[ShellComplete]] = {
    "bash": PgtailBashComplete,
    "zsh": ZshComplete,
    "fish": FishComplete,
}


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
