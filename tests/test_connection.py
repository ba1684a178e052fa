from __future__ import annotations

import pytest

from pgtail.catalog import describe_target, resolve_dsn, translate_connect_error
from pgtail.errors import (
    ConnectionFailed,
    ServerCapabilityError,
    ServerUnreachable,
    redact,
)


def test_redact_key_value_and_uri() -> None:
    assert redact("host=db password=s3cret user=x") == "host=db password=******** user=x"
    assert redact("password='a b' x=1") == "password=******** x=1"
    assert (
        redact("postgresql://app:s3cret@db:5432/shop") == "postgresql://app:********@db:5432/shop"
    )
    assert "s3cret" not in redact("connect to postgres://u:s3cret@h/d failed")


def test_resolve_dsn_falls_back_to_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/d")
    assert resolve_dsn(None) == "postgresql://u@h/d"
    assert resolve_dsn("dbname=x") == "dbname=x"
    monkeypatch.delenv("DATABASE_URL")
    assert resolve_dsn(None) == ""


def test_describe_target_hides_password() -> None:
    text = describe_target("host=db port=6543 dbname=shop password=s3cret")
    assert text == "db:6543/shop"


@pytest.mark.parametrize(
    ("server_text", "kind", "fragment"),
    [
        (
            'FATAL:  password authentication failed for user "app"',
            ConnectionFailed,
            "authentication failed",
        ),
        ('FATAL:  database "nope" does not exist', ConnectionFailed, 'database "nope"'),
        (
            'FATAL:  no pg_hba.conf entry for replication connection from host "127.0.0.1", '
            'user "app", no encryption',
            ServerCapabilityError,
            "may not open a replication connection",
        ),
        (
            "FATAL:  must be superuser or replication role to start walsender",
            ServerCapabilityError,
            "may not open a replication connection",
        ),
        (
            'FATAL:  no pg_hba.conf entry for host "127.0.0.1", user "app", database "x"',
            ConnectionFailed,
            "refused the connection",
        ),
        (
            'connection to server at "127.0.0.1", port 1 failed: Connection refused',
            ServerUnreachable,  # a ServerUnavailable: the stream retries it
            "cannot reach PostgreSQL",
        ),
    ],
)
def test_translate_connect_error(server_text: str, kind: type, fragment: str) -> None:
    err = translate_connect_error(Exception(server_text), "host=h dbname=d password=pw")
    assert type(err) is kind
    assert fragment in str(err)
    assert "pw" not in str(err).replace("password", "")


def test_decoding_options_keep_the_users_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from pgtail.catalog import DECODING_SETTINGS, decoding_options

    ours = " ".join(f"-c {name}={value}" for name, value in DECODING_SETTINGS)
    assert "-c DateStyle=ISO" in ours and "-c TimeZone=UTC" in ours
    monkeypatch.delenv("PGOPTIONS", raising=False)
    assert decoding_options("") == ours
    assert decoding_options("dbname=x options='-c search_path=app'") == f"-c search_path=app {ours}"
    assert decoding_options("postgresql://u@h/db?options=-c%20work_mem%3D1MB") == (
        f"-c work_mem=1MB {ours}"
    )
    monkeypatch.setenv("PGOPTIONS", "-c statement_timeout=5s")  # replaced by an explicit options
    assert decoding_options("dbname=x") == f"-c statement_timeout=5s {ours}"
    assert decoding_options("dbname=x options=-cgeqo=off") == f"-cgeqo=off {ours}"
    assert decoding_options("not a dsn ===") == f"-c statement_timeout=5s {ours}"


@pytest.mark.parametrize(
    "args",
    [
        ["slot", "list", "a", "b", "host=x password=secret123"],  # click: extra arguments
        ["slot", "list", "a", "b", "postgresql://u:secret123@h/d"],
        ["slot", "list", "postgresql://u:secret123%zz@host/db"],  # libpq quotes the token
        ["doctor", "--dsn", "postgresql://u:secret123%zz@host/db"],
        ["stream", "--dsn", "postgresql://u:secret123%zz@host/db"],
        ["stream", "--dsn", "postgresql://u@host/db?password=secret123%zz"],
        ["publication", "list", "--host", "h", "--dsn", "postgresql://u:secret123%zz@host/db"],
    ],
)
def test_no_password_in_usage_or_connection_string_errors(args: list[str]) -> None:
    from tests.helpers import run_cli

    code, out, err = run_cli(args)
    assert code in (1, 2, 3), err
    assert "secret123" not in out + err, err
    assert err.startswith("pgtail: error:")
