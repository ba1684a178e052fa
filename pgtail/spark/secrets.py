"""Keeping a connection string's password out of what Spark keeps and shows.

A data source's options live in the query plan, in the listener events lineage tools
read, and in a Spark Connect client's plan. Spark 4 prints a streaming source's options
in ``explain()`` (``StreamingRelationV2 ... [dsn=..., slot=...]``; a batch read's it
keeps in ``DataSourceV2Relation.options`` without printing them), and redacts only the
pairs whose key or value matches ``spark.redaction.regex`` (default
``(?i)secret|password|token|access[.]key``): a ``key=value`` DSN's ``password=`` is
hidden, a URI's ``postgresql://u:pw@host`` is not, nor a password inside the load's
pickled tasks.

So the secrets of a DSN (`SECRET_KEYS`) never travel inside option ``dsn`` or ``tasks``:
`hide_secrets` moves them to options of their own name (``password``, ``sslpassword``),
which every redaction of Spark's covers by key, and `join_dsn` puts them back on the side
that connects. Pure: libpq's own parser (`psycopg2.extensions.parse_dsn`), no connection.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_KEYS = ("password", "sslpassword")


def split_dsn(dsn: str) -> tuple[str, dict[str, str]]:
    """(the DSN without its secrets, {key: secret}); a DSN libpq cannot parse is
    returned as it is (connecting reports it, redacted)."""
    from psycopg2 import ProgrammingError
    from psycopg2.extensions import make_dsn, parse_dsn

    if not dsn:
        return dsn, {}
    try:
        params = parse_dsn(dsn)
    except ProgrammingError:
        return dsn, {}
    secrets = {key: params.pop(key) for key in SECRET_KEYS if key in params}
    if not secrets:
        return dsn, {}
    return str(make_dsn(**params)), secrets


def join_dsn(dsn: str, secrets: Mapping[str, str]) -> str:
    """The DSN with ``secrets`` (`SECRET_KEYS` only; they win over the DSN's own)."""
    from psycopg2.extensions import make_dsn

    given = {key: secrets[key] for key in SECRET_KEYS if secrets.get(key)}
    if not given:
        return dsn
    return str(make_dsn(dsn or None, **given))


def option_secrets(options: Mapping[str, str]) -> dict[str, str]:
    """The secrets among data source options (keys in any case)."""
    return {k.lower(): v for k, v in options.items() if k.lower() in SECRET_KEYS and v}


def hide_secrets(options: Mapping[str, str]) -> dict[str, str]:
    """The options with the secrets of option ``dsn`` moved to options of their own
    (an option ``password`` given already wins over the DSN's)."""
    result = dict(options)
    for key, value in options.items():
        if key.lower() != "dsn" or not value:
            continue
        public, secrets = split_dsn(value)
        result[key] = public
        given = option_secrets(options)
        for name, secret in secrets.items():
            if name not in given:
                result[name] = secret
    return result
