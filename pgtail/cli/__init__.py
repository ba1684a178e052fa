"""The ``pgtail`` command line: a thin click layer over the library.

Commands parse options, call one library function, and leave error handling to
`main`, which maps pgtail errors to exit codes in one place (`ExitCode`): one
clear line on stderr for an expected error, a traceback only with ``--debug``.
Command groups live in sibling modules and register themselves on `cli`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import traceback
from enum import IntEnum
from typing import Any

import click

from pgtail import __version__
from pgtail.errors import PgtailError, redact


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    SIGHUP = 129
    SIGINT = 130
    SIGTERM = 143


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    """Global options, reachable from every command through the click context."""

    def __init__(self, debug: bool = False) -> None:
        self.debug = debug


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="pgtail")
@click.option("--debug", is_flag=True, envvar="PGTAIL_DEBUG", help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Tail PostgreSQL logical replication.

    pgtail streams a replication slot with the built-in pgoutput plugin and shows
    every change as a table, JSON lines or SQL, manages slots and publications,
    and diagnoses replica identity problems.

    \b
    Examples:
      pgtail stream --slot app --publication app_pub | jq .
      pgtail doctor --publication app_pub
    """
    ctx.obj = State(debug=debug)


dsn_option = click.option(
    "--dsn",
    metavar="DSN",
    default=None,
    help="libpq connection string or URI; default: DATABASE_URL, then libpq's PG* variables.",
)


def json_option(help_text: str = "Print JSON for scripts.") -> Any:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def _register_commands() -> None:
    # Each module adds its commands to `cli` on import.
    import importlib

    for name in _COMMAND_MODULES:
        importlib.import_module(f"pgtail.cli.{name}")


_COMMAND_MODULES: list[str] = [
    "spark_cmd",
    "demo_cmd",
    "completion_cmd",
    "slot_cmd",
    "publication_cmd",
    "doctor_cmd",
    "stream_cmd",
]


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("PGTAIL_DEBUG", "") not in ("", "0")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(args)
    try:
        _register_commands()
        # with standalone_mode=False, click returns ctx.exit()'s code instead of exiting
        result = cli.main(args=args, prog_name="pgtail", standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(ExitCode.SIGINT)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code)
    except PgtailError as exc:
        if debug:
            traceback.print_exc()
        _print_error(str(exc))
        sys.exit(ExitCode.ERROR)
    except KeyboardInterrupt:
        sys.exit(ExitCode.SIGINT)
    except BrokenPipeError:
        _quiet_broken_pipe()
        sys.exit(ExitCode.OK)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _quiet_broken_pipe()
            sys.exit(ExitCode.OK)
        if debug:
            traceback.print_exc()
        _print_error(redact(str(exc)))
        sys.exit(ExitCode.ERROR)
    sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else ExitCode.OK)


def _print_error(message: str) -> None:
    with contextlib.suppress(Exception):
        click.echo(f"pgtail: error: {message}", err=True)


def _quiet_broken_pipe() -> None:
    # stdout is gone (| head): point it at /dev/null so the interpreter's final
    # flush does not print "Exception ignored ... BrokenPipeError".
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except Exception:
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
