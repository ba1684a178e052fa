"""The ``pgtail`` command line: a thin click layer over the library.

Commands parse options, call one library function, and leave error handling to
`main`, which maps every outcome to an exit code in one place (`ExitCode`): one
clear ``pgtail: error:`` line on stderr for an expected error (usage errors add a
``pgtail: hint:`` line pointing at ``--help``), a traceback only with ``--debug``.
Command groups live in sibling modules and register themselves on `cli`; options
several commands share are declared once, in `pgtail.cli.shared_options`.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
import signal
import sys
import traceback
from enum import IntEnum

import click

from pgtail import __version__
from pgtail.errors import Interrupted, PgtailError, redact


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    # `pgtail doctor` only: it could not look (no connection, an error while reading),
    # told apart from 1, a check that failed, so a CI gate can tell the two apart
    NOT_CHECKED = 3
    SIGHUP = 129
    SIGINT = 130
    SIGTERM = 143


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    """Global options, reachable from every command through the click context."""

    def __init__(self, debug: bool = False) -> None:
        self.debug = debug


class _Commands(click.Group):
    """The top-level group: a command's module is imported when the command is asked for
    (`_COMMAND_MODULES`), so ``pgtail stream`` does not import Spark's, top's or the
    doctor's code; listing the commands (help, completion) imports them all."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = _COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            import importlib

            importlib.import_module(f"pgtail.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _register_commands()
        return super().list_commands(ctx)


@click.group(cls=_Commands, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="pgtail")
@click.option("--debug", is_flag=True, envvar="PGTAIL_DEBUG", help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Tail PostgreSQL logical replication.

    pgtail streams a replication slot with the built-in pgoutput plugin and shows
    every change as a table, JSON lines or SQL, manages slots and publications,
    and diagnoses replica identity problems.

    Commands that connect take a connection string as their last argument (or
    --dsn) and psql's -h/-p/-U/-d; else DATABASE_URL, then libpq's PG* variables.

    \b
    Examples:
      pgtail stream --slot app --publication app_pub | jq .
      pgtail doctor --publication app_pub
      pgtail slot list postgresql://me@db.example.com/shop
    """
    ctx.obj = State(debug=debug)


# the shared options live in pgtail.cli.shared_options; `dsn_option` is their older name
from pgtail.cli.shared_options import connection_options  # noqa: E402

dsn_option = connection_options


def _register_commands() -> None:
    """Import every command's module (each adds its commands to `cli` on import)."""
    import importlib

    for name in dict.fromkeys(_COMMAND_MODULES.values()):
        importlib.import_module(f"pgtail.cli.{name}")


# Each top-level command and the module that defines it (imported when it is run)
_COMMAND_MODULES: dict[str, str] = {
    "spark": "spark_cmd",
    "demo": "demo_cmd",
    "completion": "completion_cmd",
    "slot": "slot_cmd",
    "publication": "publication_cmd",
    "doctor": "doctor_cmd",
    "identity": "doctor_cmd",
    "top": "top_cmd",
    "stream": "stream_cmd",
}


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("PGTAIL_DEBUG", "") not in ("", "0")


def _debug_first(args: list[str]) -> list[str]:
    """``--debug`` is the group's option, but users put it anywhere (``pgtail stream
    --debug``): move it before the subcommand (not past a ``--``)."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug", *[a for a in args[:end] if a != "--debug"], *args[end:]]


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    args = _debug_first(list(sys.argv[1:] if argv is None else argv))
    debug = _debug_requested(args)
    try:
        if os.environ.get("_PGTAIL_COMPLETE"):  # shell completion: pgtail's own classes
            _register_commands()
        # with standalone_mode=False, click returns ctx.exit()'s code instead of exiting
        result = cli.main(args=args, prog_name="pgtail", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # click's name for a KeyboardInterrupt (or an EOF at a prompt): Ctrl-C before a
        # command took over its signals (connecting, reading the catalog)
        if isinstance(exc.__context__, KeyboardInterrupt):
            _print_stopped()
        sys.exit(ExitCode.SIGINT)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()  # a group without its command: its help, as click prints it
        sys.exit(ExitCode.USAGE)
    except click.UsageError as exc:
        _print_usage_error(exc, args)
        sys.exit(ExitCode.USAGE)
    except click.ClickException as exc:
        _print_error(exc.format_message())
        sys.exit(exc.exit_code)
    except PgtailError as exc:
        if debug:
            traceback.print_exc()
        _print_error(str(exc))
        sys.exit(ExitCode.ERROR)
    except KeyboardInterrupt:  # before a command took over its signals (start-up)
        _print_stopped()
        sys.exit(ExitCode.SIGINT)
    except Interrupted as exc:  # a wait on the server (a slot's creation) cancelled
        with contextlib.suppress(Exception):
            click.echo(
                f"pgtail: stopped: cancelled the wait to {exc.what} (nothing was left behind)",
                err=True,
            )
        sys.exit(ExitCode.SIGTERM if exc.signum == signal.SIGTERM else ExitCode.SIGINT)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:  # | head
            _quiet_broken_pipe()
            # unless on its way out of a Ctrl-C (click writes a line end to stderr,
            # which `2>&1 | tee` closed: Ctrl-C ended tee too)
            interrupted = isinstance(exc.__context__, KeyboardInterrupt)
            sys.exit(ExitCode.SIGINT if interrupted else ExitCode.OK)
        if debug:
            traceback.print_exc()
        _print_error(redact(str(exc)))
        sys.exit(ExitCode.ERROR)
    sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else ExitCode.OK)


def report_error(exc: PgtailError) -> None:
    """The error line `main` prints for ``exc`` (with the traceback under --debug), for a
    command that exits with its own status instead of raising."""
    ctx = click.get_current_context(silent=True)
    state = ctx.find_object(State) if ctx is not None else None
    if state is not None and state.debug:
        traceback.print_exc()
    _print_error(str(exc))


def _print_stopped() -> None:
    with contextlib.suppress(Exception):
        click.echo("pgtail: stopped (interrupted)", err=True)


def _print_error(message: str) -> None:
    # a name from the database in the message is shown, not obeyed: its control
    # characters (a terminal escape) are escaped
    from pgtail.render.escape import escape_text

    with contextlib.suppress(Exception):
        click.echo(f"pgtail: error: {escape_text(message)}", err=True)


def usage_message(exc: click.UsageError) -> str:
    """click's message for a usage error, in pgtail's words: lower case, no final period,
    a suggestion for a misspelled command."""
    if isinstance(exc, click.NoSuchOption):
        message = f"no such option: {exc.option_name}"
        if exc.possibilities:
            message += f" (did you mean {', '.join(sorted(exc.possibilities))}?)"
        return message
    message = exc.format_message().strip()
    match = re.match(r"No such command '(.*?)'\.", message)
    ctx = exc.ctx
    if match and ctx is not None and isinstance(ctx.command, click.Group):
        close = difflib.get_close_matches(match.group(1), ctx.command.list_commands(ctx), n=1)
        message = f"no such command: {match.group(1)}"
        if close:
            message += f" (did you mean {close[0]}?)"
        return message
    message = " ".join(message.split())  # click's line breaks and tabs (a Choice's list)
    if message.endswith("."):
        message = message[:-1]
    message = message[:1].lower() + message[1:]
    if message == "option '-h' requires an argument":
        message += " (-h is --host, as in psql, where a command connects; help is --help)"
    return message


def _command_path(args: list[str]) -> str:
    """The command named by ``args`` (for errors click reports without its context)."""
    path = ["pgtail"]
    command: click.Command = cli
    for arg in args:
        if arg.startswith("-"):
            continue
        sub = (
            command.get_command(click.Context(command), arg)
            if isinstance(command, click.Group)
            else None
        )
        if sub is None:
            break
        path.append(arg)
        command = sub
    return " ".join(path)


def _print_usage_error(exc: click.UsageError, args: list[str]) -> None:
    # like PostgreSQL's tools: the error, then where to read how it is used
    command = exc.ctx.command_path if exc.ctx is not None else _command_path(args)
    # a connection string given in the wrong place comes back in click's message
    _print_error(redact(usage_message(exc)))
    with contextlib.suppress(Exception):
        click.echo(f'pgtail: hint: Try "{command} --help" for more information.', err=True)


def _quiet_broken_pipe() -> None:
    # stdout is gone (| head): point it at /dev/null so the interpreter's final
    # flush does not print "Exception ignored ... BrokenPipeError".
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except Exception:
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
