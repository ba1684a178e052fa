"""The command tree's options, walked: options that several commands share read and behave
the same everywhere, and every command that connects takes the same connection options.

No server needed: this reads click's command tree and resolves connection settings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import click
import pytest

from pgtail.catalog import connection_string
from pgtail.cli import _register_commands, cli
from pgtail.cli.shared_options import CONNECTION_PARAM_NAMES, PUBLICATION_FORM
from pgtail.errors import ConfigurationError

_register_commands()


def _commands(
    command: click.Command = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = dict(_commands())

# commands that never connect to a server of yours
NOT_CONNECTING = {"demo", "completion", "spark materialize"}

# (command, option) whose help says what the option is for in that command; everything
# else about the option (names, type, multiple-ness, flag form) is still checked
OWN_HELP = {
    ("doctor", "--json"): "says what the JSON holds",
    ("top", "--json"): "one document per interval",
    ("top", "--interval"): "seconds between two looks (demo: between transactions)",
    ("demo", "--interval"): "pause between the workload's transactions",
    ("top", "--publication"): "one publication, sampled by top's own temporary slot",
    ("doctor", "--publication"): "checks rather than streams; default: all",
    ("doctor", "--slot"): "checks several slots; default: all",
    ("slot peek", "--publication"): "default: all of the database",
    ("spark run", "--publication"): "required, no default",
    ("spark run", "--slot"): "required",
    ("spark run", "--output"): "a Parquet directory",
    ("spark run", "--snapshot"): "loads into the change logs, in parallel ranges",
    ("spark run", "--snapshot-table"): "loads into a running pipeline",
    ("spark materialize", "--output"): "a directory per table",
    ("stream", "--output"): "a file, appended to",
    ("stream", "--schema"): "only with --create-publication",
    ("stream", "--table"): "a glob filter (and the tables of --create-publication)",
    ("slot peek", "--table"): "a glob filter",
    ("publication remove", "--table"): "no column list when removing",
    ("publication remove", "--schema"): "removes rather than adds",
    ("stream", "--ops"): "filters rather than publishes",
    ("slot peek", "--ops"): "filters rather than publishes",
    ("slot create", "--two-phase"): "the slot's property (PG14+), not pgoutput's option",
    ("slot drop", "--force"): "--force means something else in each command",
    ("identity", "--force"): "--force means something else in each command",
    ("slot drop", "--if-exists"): "names its object",
    ("publication drop", "--if-exists"): "names its object",
}

# (command, option) allowed a different metavar, multiple-ness or short name
OWN_FORM = {
    ("stream", "--table"): "a glob, not a table name",
    ("slot peek", "--table"): "a glob, not a table name",
    ("doctor", "--slot"): "checks several slots",
    ("stream", "--output"): "-o, like other tools writing a file",
    ("stream", "--ops"): "ops of a stream include 'message'",
    ("slot peek", "--ops"): "ops of a stream include 'message'",
}


def _options() -> dict[str, list[tuple[str, click.Option]]]:
    found: dict[str, list[tuple[str, click.Option]]] = defaultdict(list)
    for path, command in COMMANDS.items():
        for param in command.params:
            if isinstance(param, click.Option) and "--help" not in param.opts:
                long = [o for o in param.opts if o.startswith("--")][0]
                found[long].append((path, param))
    return found


def _type(param: click.Parameter) -> str:
    kind = param.type
    if isinstance(kind, click.Choice):
        return "choice"  # the choices themselves may differ (--format: no raw for peek)
    return kind.name


def _form(param: click.Option) -> tuple[object, ...]:
    return (
        tuple(sorted(param.opts)),
        tuple(param.secondary_opts),
        _type(param),
        param.multiple,
        param.is_flag,
        param.metavar,
        param.envvar,
    )


SHARED = _options()
REPEATED = sorted(name for name, found in SHARED.items() if len(found) > 1)


def test_the_walk_sees_the_shared_options() -> None:
    for name in ("--dsn", "--host", "--json", "--format", "--publication", "--binary", "--table"):
        assert name in REPEATED, name


@pytest.mark.parametrize("name", REPEATED)
def test_a_shared_option_has_one_form_and_one_help(name: str) -> None:
    found = SHARED[name]
    usual = [(path, p) for path, p in found if (path, name) not in OWN_FORM]
    forms = {_form(p) for _, p in usual}
    assert len(forms) == 1, f"{name} differs: " + "; ".join(f"{c}: {_form(p)}" for c, p in usual)
    helps = {p.help for path, p in found if (path, name) not in OWN_HELP}
    assert len(helps) <= 1, f"{name} has different help texts: {helps}"
    types = {_type(p) for _, p in found}
    assert len(types) == 1, f"{name} has different types: {types}"


def test_publication_is_repeatable_and_reads_the_same_everywhere() -> None:
    for path, param in SHARED["--publication"]:
        assert param.multiple and param.envvar == "PGTAIL_PUBLICATION", path
        assert param.help is not None and PUBLICATION_FORM in param.help, path


def test_binary_has_the_same_form_everywhere() -> None:
    for path, param in SHARED["--binary"]:
        assert param.opts == ["--binary"] and param.secondary_opts == ["--no-binary"], path


@pytest.mark.parametrize("path", sorted(set(COMMANDS) - NOT_CONNECTING))
def test_every_connecting_command_takes_the_connection_options(path: str) -> None:
    params = {p.name: p for p in COMMANDS[path].params}
    assert set(CONNECTION_PARAM_NAMES) <= set(params), path
    shorts = {
        "host": ["-h", "--host"],
        "port": ["-p", "--port"],
        "username": ["-U", "--username"],
        "dbname": ["-d", "--dbname"],
        "dsn": ["--dsn"],
    }
    for name, opts in shorts.items():
        assert params[name].opts == opts, (path, name)
    # the connection string is the last positional argument
    arguments = [p for p in COMMANDS[path].params if isinstance(p, click.Argument)]
    assert arguments[-1].name == "dsn_argument" and not arguments[-1].required, path


def test_commands_that_do_not_connect_have_no_connection_options() -> None:
    for path in NOT_CONNECTING:
        names = {p.name for p in COMMANDS[path].params}
        assert not names & set(CONNECTION_PARAM_NAMES), path


def test_help_is_still_help_everywhere() -> None:
    for path, command in COMMANDS.items():
        ctx = click.Context(command, info_name=path, help_option_names=["-h", "--help"])
        names = command.get_help_option_names(ctx)
        assert "--help" in names, path
        if path not in NOT_CONNECTING:
            assert "-h" not in names, path  # -h is --host, as in psql


# --------------------------------------------------------------------------- resolution


def test_nothing_given_leaves_it_to_the_environment() -> None:
    assert connection_string(environ={"DATABASE_URL": "dbname=x"}) is None


def test_one_connection_string_from_any_source() -> None:
    uri = "postgresql://app@db/shop"
    assert connection_string(argument=uri) == uri
    assert connection_string(dsn=uri) == uri
    assert connection_string(dbname=uri) == uri
    assert connection_string(argument=uri, dsn=uri) == uri  # the same twice is one


def test_a_plain_word_is_a_database_name_like_psql() -> None:
    assert connection_string(argument="shop", environ={}) == "dbname=shop"
    assert connection_string(dbname="shop", environ={}) == "dbname=shop"


def test_options_add_to_the_connection_string() -> None:
    merged = connection_string(dsn="host=db user=app", port="5433", dbname="shop")
    assert merged is not None
    from psycopg2.extensions import parse_dsn

    assert parse_dsn(merged) == {"host": "db", "user": "app", "port": "5433", "dbname": "shop"}
    same = connection_string(argument="postgresql://app@db/shop", host="db", user="app")
    assert same is not None and parse_dsn(same)["host"] == "db"


def test_options_apply_on_top_of_database_url() -> None:
    from psycopg2.extensions import parse_dsn

    merged = connection_string(host="other", environ={"DATABASE_URL": "postgresql://a@db/shop"})
    assert merged is not None
    assert parse_dsn(merged) == {"host": "other", "user": "a", "dbname": "shop"}
    assert connection_string(host="/tmp", port="5", environ={}) == "host=/tmp port=5"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"argument": "host=a", "dsn": "host=b"}, "two connection strings given"),
        ({"dsn": "host=a", "dbname": "dbname=x"}, "two connection strings given"),
        ({"argument": "shop", "dbname": "other"}, "two database names given"),
        ({"dsn": "host=a", "host": "b"}, "--host 'b' conflicts with host='a' in --dsn"),
        ({"argument": "postgresql://u@h/db", "user": "v"}, "--username 'v' conflicts"),
        ({"dsn": "dbname=a", "argument": "b"}, "--dsn"),
        ({"dsn": "nonsense", "host": "h"}, "invalid connection string in --dsn"),
    ],
)
def test_conflicting_sources_are_an_error(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        connection_string(**given, environ={})  # type: ignore[arg-type]
    assert message in str(caught.value)


def _float_options() -> list[tuple[str, str]]:
    return [
        (path, param.opts[0])
        for path, command in COMMANDS.items()
        for param in command.params
        if isinstance(param, click.Option)
        and isinstance(param.type, click.FloatRange | click.types.FloatParamType)
    ]


def test_the_walk_sees_the_float_options() -> None:
    found = set(_float_options())
    assert {("stream", "--idle-exit"), ("stream", "--reconnect-max-delay")} <= found
    assert ("demo", "--duration") in found


@pytest.mark.parametrize("path,option", _float_options())
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "infinity", "1e999"])
def test_every_float_option_refuses_nan_and_infinities(path: str, option: str, value: str) -> None:
    """NaN passes every range check: `--idle-exit nan` never exited, `--reconnect-max-delay
    nan` printed "retrying in nans" and a traceback."""
    param = next(p for p in COMMANDS[path].params if p.opts[0] == option)
    with pytest.raises(click.BadParameter, match="not"):
        param.type.convert(value, param, None)
    assert param.type.convert("1.5", param, None) == 1.5


def test_a_nan_option_is_a_usage_error() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["stream", "--reconnect-max-delay", "nan"])
    assert result.exit_code == 2, result.output
    assert "'nan' is not a finite number" in result.output
