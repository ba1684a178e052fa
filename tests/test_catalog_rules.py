"""Pure rules of pgtail.catalog, without a server: the statements chosen per server
version (12 to 18), the one slot usability rule, and the one error translation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pgtail import catalog
from pgtail.catalog import publications as pubs_module
from pgtail.catalog import slots as slots_module
from pgtail.errors import (
    ConfigurationError,
    DataLossError,
    PublicationError,
    ReplicationError,
    ServerCapabilityError,
    SlotError,
)

VERSIONS = [120000, 130000, 140000, 150000, 160000, 170000, 180000]


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize("version", VERSIONS)
def test_slot_columns_by_version(version: int) -> None:
    columns, optional = catalog.slot_columns(version)
    assert len(columns) == 13 + len(optional)
    assert ("wal_status" in columns) == (version >= 130000)
    assert ("safe_wal_size" in columns) == (version >= 130000)
    assert ("two_phase" in columns) == (version >= 140000)
    if version < 130000:
        assert "NULL AS wal_status" in columns and "NULL AS safe_wal_size" in columns
    if version < 140000:
        assert "NULL AS two_phase" in columns
    assert ("conflicting" in optional) == (version >= 160000)
    for column in ("failover", "synced", "inactive_since", "invalidation_reason"):
        assert (column in optional) == (version >= 170000)
    assert columns[13:] == list(optional)


@pytest.mark.parametrize("version", VERSIONS)
def test_publication_columns_by_version(version: int) -> None:
    columns = catalog.publication_columns(version)
    assert columns[-1] == ("p.pubviaroot" if version >= 130000 else "false")


def _text(composable: object) -> str:
    # Literal renders only with a connection; the structure is enough here
    return repr(composable)


def test_publish_via_partition_root_only_where_the_server_has_it() -> None:
    for version in (130000, 180000):
        text = _text(pubs_module._with_options(version, ["insert"], False))
        assert "publish_via_partition_root" in text
    assert "publish_via_partition_root" not in _text(
        pubs_module._with_options(120000, ["insert", "update"], False)
    )
    with pytest.raises(ServerCapabilityError, match="PostgreSQL 13 or later"):
        pubs_module._with_options(120000, ["insert"], True)


def test_create_slot_call_by_version() -> None:
    query, params = slots_module._create_slot_call(140000, "s", False, True)
    assert params == ("s", "pgoutput", False, True)
    assert query.count("%s") == 4
    query, params = slots_module._create_slot_call(130000, "s", True, False)
    assert params == ("s", "pgoutput", True) and query.count("%s") == 3
    with pytest.raises(ServerCapabilityError, match="PostgreSQL 14 or later"):
        slots_module._create_slot_call(130000, "s", False, True)


def test_peek_options_by_version() -> None:
    names = ["p", 'My "Pub"']
    assert catalog.peek_options(150000, names) == [
        "proto_version",
        "1",
        "publication_names",
        '"p","My ""Pub"""',
        "messages",
        "true",
    ]
    # pgoutput before 14 refuses options it does not know
    assert "messages" not in catalog.peek_options(130000, names)
    assert catalog.peek_options(140000, names, binary=True)[-2:] == ["binary", "true"]
    with pytest.raises(ServerCapabilityError, match="PostgreSQL 14 or later"):
        catalog.peek_options(130000, names, binary=True)


# --------------------------------------------------------------------------- slot rule

GOOD = catalog.SlotInfo(
    name="s",
    plugin="pgoutput",
    slot_type="logical",
    database="app",
    temporary=False,
    active=False,
    active_pid=None,
    two_phase=False,
    restart_lsn=100,
    confirmed_flush_lsn=200,
    current_lsn=300,
    wal_status="reserved",
    safe_wal_size=None,
)


def test_usable_slot_passes() -> None:
    catalog.check_slot_usable(GOOD, "app")
    catalog.check_slot_usable(GOOD, "app", idle=True)
    # a server before 13 has no wal_status: nothing to hold against the slot
    catalog.check_slot_usable(replace(GOOD, wal_status=None, two_phase=None), "app")
    # readers through SQL functions wait for a busy slot; only the stream needs it idle
    catalog.check_slot_usable(replace(GOOD, active=True, active_pid=7), "app")


@pytest.mark.parametrize(
    ("slot", "error", "match"),
    [
        (replace(GOOD, slot_type="physical", plugin=None), SlotError, "is a physical slot"),
        (replace(GOOD, plugin="test_decoding"), SlotError, "uses plugin 'test_decoding'"),
        (replace(GOOD, database="other"), SlotError, "belongs to database 'other', not 'app'"),
        (replace(GOOD, wal_status="lost"), DataLossError, r"wal_status = lost"),
        (replace(GOOD, confirmed_flush_lsn=None), SlotError, "no confirmed position"),
    ],
)
def test_unusable_slots(slot: catalog.SlotInfo, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        catalog.check_slot_usable(slot, "app")


def test_busy_slot_when_idle_is_required() -> None:
    busy = replace(GOOD, active=True, active_pid=4242)
    with pytest.raises(SlotError, match="active for PID 4242") as info:
        catalog.check_slot_usable(busy, "app", idle=True)
    assert info.value.hint is not None and "pg_terminate_backend(4242)" in info.value.hint


# --------------------------------------------------------------------------- errors


class FakeDiag:
    def __init__(self, primary: str) -> None:
        self.message_primary = primary
        self.message_hint = None
        self.message_detail = None


class FakePgError(Exception):
    """What psycopg2 raises: a message, a SQLSTATE (or None) and diagnostics."""

    def __init__(self, message: str, pgcode: str | None) -> None:
        super().__init__(message)
        self.pgcode = pgcode
        self.diag = FakeDiag(message)


@pytest.mark.parametrize(
    ("message", "code", "kind"),
    [
        ('replication slot "s" is active for PID 12', "55006", "slot_busy"),
        ('replication slot "s" is active for PID 12', None, "slot_busy"),
        ('replication slot "s" does not exist', "42704", "slot_missing"),
        ('publication "p" does not exist', "42704", "publication_missing"),
        (
            "requested WAL segment 000000010000000000000001 has already been removed",
            "58P01",
            "wal_removed",
        ),
        ("permission denied to use replication slots", "42501", "privilege"),
        ("logical decoding requires wal_level >= logical", "55000", "wal_level"),
        ("all replication slots are in use", "53400", "slots_full"),
        ("something else entirely", "XX000", None),
    ],
)
def test_classify(message: str, code: str | None, kind: str | None) -> None:
    assert catalog.classify(FakePgError(message, code)) == kind


def test_code_decides_over_text() -> None:
    # a privilege error is one whatever its text says
    exc = FakePgError("must be owner of table t", "42501")
    assert catalog.classify(exc) == "privilege"
    assert isinstance(catalog.translate_error(exc), ServerCapabilityError)
    assert isinstance(catalog.translate_slot_error(exc, "s"), ServerCapabilityError)


def test_translations_by_caller() -> None:
    busy = FakePgError('replication slot "s" is active for PID 12', "55006")
    assert isinstance(catalog.translate_slot_error(busy, "s"), SlotError)
    assert "in use by another process" in str(catalog.translate_slot_error(busy, "s"))
    assert isinstance(catalog.translate_replication_error(busy, "s"), SlotError)
    missing_pub = FakePgError('publication "p" does not exist', "42704")
    assert isinstance(catalog.translate_replication_error(missing_pub, "s"), PublicationError)
    assert isinstance(catalog.translate_slot_error(missing_pub, "s"), PublicationError)
    gone = FakePgError("requested WAL segment x has already been removed", "58P01")
    assert isinstance(catalog.translate_replication_error(gone, "s"), DataLossError)
    other = FakePgError("boom", "XX000")
    err = catalog.translate_replication_error(other, "s", during="streaming")
    assert isinstance(err, ReplicationError) and "stopped the replication stream" in str(err)
    full = FakePgError("all replication slots are in use", "53400")
    assert "max_replication_slots" in str(catalog.translate_create_slot_error(full, "s"))
    syntax = FakePgError('syntax error at or near "x"', "42601")
    assert isinstance(catalog.translate_error(syntax), ConfigurationError)


def test_primary_message_redacts_without_diagnostics() -> None:
    exc = Exception("could not connect: password=secret host=x\nsecond line")
    assert catalog.primary_message(exc) == "could not connect: password=******** host=x"
