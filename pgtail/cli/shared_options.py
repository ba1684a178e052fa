"""Options several commands share, declared once so they read and behave the same
everywhere (tests/test_cli_options.py walks the command tree to keep it so).

`connection_options` gives every command that connects the same ways to say where:
a connection string (positionally, as the last argument, or with ``--dsn``), psql's
``-h -p -U -d``, else ``DATABASE_URL`` and libpq's ``PG*`` environment. They are merged
by `pgtail.catalog.connection_string`, and the command receives one ``dsn``.

`checked` turns a pgtail parser (an LSN, a slot name, a size) into a click type, so a
bad value is a usage error (exit 2) reported before anything connects.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from pgtail.cli.completers import complete_publication
from pgtail.errors import PgtailError

F = TypeVar("F", bound=Callable[..., Any])

DSN_HELP = (
    "Connection string or URI (also as the last argument, like psql's DBNAME); "
    "default: DATABASE_URL, then libpq's PG* variables."
)

_CONNECTION_PARAMS: list[Callable[[Any], Any]] = [
    click.argument("dsn_argument", metavar="[DSN]", required=False),
    click.option("--dsn", metavar="DSN", default=None, help=DSN_HELP),
    click.option(
        "-h",
        "--host",
        metavar="HOST",
        default=None,
        help="Database server host or socket directory (like psql; --help is help).",
    ),
    click.option("-p", "--port", metavar="PORT", default=None, help="Database server port."),
    click.option("-U", "--username", metavar="USER", default=None, help="Database user name."),
    click.option(
        "-d",
        "--dbname",
        metavar="DBNAME",
        default=None,
        help="Database name, or a connection string (like psql -d).",
    ),
]

CONNECTION_PARAM_NAMES = ("dsn_argument", "dsn", "host", "port", "username", "dbname")


def connection_options(f: F) -> F:
    """Add the connection options to a command; it receives them merged, as ``dsn``
    (None when nothing was given, so the environment decides).

    Apply it below the command's own ``click.argument``s: the DSN argument comes last.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["dsn"] = merged_dsn(kwargs)
        return f(*args, **kwargs)

    for param in reversed(_CONNECTION_PARAMS):
        wrapper = param(wrapper)
    return cast(F, wrapper)


def merged_dsn(kwargs: dict[str, Any]) -> str | None:
    """Pop the connection parameters from a command's ``kwargs``; the one DSN they say."""
    from pgtail.catalog import connection_string
    from pgtail.errors import ConfigurationError

    given = {name: kwargs.pop(name, None) for name in CONNECTION_PARAM_NAMES}
    try:
        return connection_string(
            argument=given["dsn_argument"],
            dsn=given["dsn"],
            host=given["host"],
            port=given["port"],
            user=given["username"],
            dbname=given["dbname"],
        )
    except ConfigurationError as exc:
        raise usage_error(str(exc)) from None


def usage_error(message: str) -> click.UsageError:
    """A usage error (exit 2) about the command being run."""
    return click.UsageError(message, ctx=click.get_current_context(silent=True))


class Checked(click.ParamType[Any]):
    """A value checked (and perhaps converted) by a pgtail function; its error becomes a
    usage error naming the option."""

    def __init__(self, name: str, check: Callable[[str], Any]) -> None:
        self.name = name
        self._check = check

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._check(value)
        except PgtailError as exc:
            raise ValueRefused(str(exc), ctx, param) from None


class ValueRefused(click.BadParameter):
    """A value a pgtail parser refused; its message already says what is wrong."""

    def format_message(self) -> str:
        return self.message


class Seconds(click.FloatRange):
    """A float option (a number of seconds) that also refuses NaN and the infinities: NaN
    passes every range comparison (``--idle-exit nan`` never exited), and an infinite
    wait is what leaving the option out means. Every float option is one of these."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def _slot_name(text: str) -> str:
    from pgtail.catalog import check_slot_name

    return check_slot_name(text)


def _lsn(text: str) -> int:
    from pgtail.lsn import parse_lsn

    return parse_lsn(text)


SLOT_NAME = Checked("slot name", _slot_name)
LSN = Checked("lsn", _lsn)


def json_option(help_text: str = "Print JSON for scripts.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def split_commas(values: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated values, each of which may also be a comma-separated list."""
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


# what --publication is like everywhere; the purpose and the default come before it
PUBLICATION_FORM = "(repeatable, or comma-separated; env PGTAIL_PUBLICATION)"
PUBLICATION_HELP = f"Publication to stream {PUBLICATION_FORM}. Default: the only one."
PEEK_PUBLICATION_HELP = (
    f"Publication to decode through {PUBLICATION_FORM}. Default: all of the database."
)


def publication_option(
    help_text: str = PUBLICATION_HELP, *, required: bool = False
) -> Callable[[F], F]:
    """``--publication NAME``, repeatable; a value may also be a comma-separated list. The
    command receives the names one by one, as ``publications``."""
    return click.option(
        "--publication",
        "publications",
        multiple=True,
        required=required,
        metavar="NAME",
        envvar="PGTAIL_PUBLICATION",
        callback=lambda _ctx, _param, values: split_commas(values),
        shell_complete=complete_publication,
        help=help_text,
    )


binary_option = click.option(
    "--binary/--no-binary", default=False, help="Binary tuple data (PG14+)."
)
