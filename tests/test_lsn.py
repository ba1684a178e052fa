from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgtail.errors import ConfigurationError, PgtailError, SlotError
from pgtail.lsn import MAX_LSN, format_lsn, parse_lsn


def test_parse_and_format() -> None:
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert parse_lsn("0/0") == 0
    assert format_lsn(parse_lsn("16/b374d848")) == "16/B374D848"
    assert format_lsn(MAX_LSN) == "FFFFFFFF/FFFFFFFF"


@pytest.mark.parametrize("bad", ["", "16", "/1", "1/", "x/1", "1/2/3", "123456789/0", "-1/0"])
def test_bad_lsn_raises_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid LSN"):
        parse_lsn(bad)


@given(st.integers(min_value=0, max_value=MAX_LSN))
def test_round_trip(value: int) -> None:
    assert parse_lsn(format_lsn(value)) == value


def test_errors_are_picklable() -> None:
    err = SlotError("slot 'x' is active", hint="stop PID 42")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SlotError and isinstance(back, PgtailError)
    assert str(back) == "slot 'x' is active (stop PID 42)"
    assert back.hint == "stop PID 42"


def test_servers_run_with_logical_wal(db) -> None:  # type: ignore[no-untyped-def]
    (row,) = db.execute(
        "SELECT current_setting('wal_level'), current_setting('server_version_num')"
    )
    assert row[0] == "logical"
    assert int(str(row[1])) // 10000 == db.major
