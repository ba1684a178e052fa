"""``pgtail completion bash|zsh|fish``: print the shell completion script.

The scripts come from click's shell completion classes; they call back into
``pgtail`` with ``_PGTAIL_COMPLETE`` set, so completions follow the installed CLI
(slot and publication names come from the server: see `pgtail.cli.completers`).
"""

from __future__ import annotations

import click
from click.shell_completion import BashComplete, FishComplete, ShellComplete, ZshComplete

from pgtail.cli import cli

COMPLETE_VAR = "_PGTAIL_COMPLETE"
SHELLS: dict[str, type[ShellComplete]] = {
    "bash": BashComplete,
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
