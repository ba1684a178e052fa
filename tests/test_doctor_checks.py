"""pgtail.doctor as a pure function: hand-made facts in, checks out (no server)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from pgtail import doctor
from pgtail.catalog import (
    ColumnFacts,
    DoctorFacts,
    IndexFacts,
    PublicationInfo,
    PublicationTableRow,
    RoleFacts,
    ServerFacts,
    SlotInfo,
    SlotListing,
    TableFacts,
    WalsenderFacts,
)
from pgtail.errors import ConfigurationError

COLS = (
    ColumnFacts("id", 1, "integer", True, False),
    ColumnFacts("code", 2, "text", True, True),
    ColumnFacts("maybe", 3, "integer", False, False),
    ColumnFacts("body", 4, "text", False, True),
)


def index(name: str, *columns: str | None, **kw: bool) -> IndexFacts:
    base = dict(valid=True, unique=True, immediate=True, partial=False)
    base.update(kw)
    return IndexFacts(name, tuple(columns), **base)


def table(kind: str = "d", **kw: object) -> TableFacts:
    base: dict[str, object] = dict(
        oid=1,
        schema="public",
        name="t",
        relkind="r",
        replica_identity=kind,
        is_partition=False,
        columns=COLS,
        primary_key=None,
        identity_index=None,
    )
    base.update(kw)
    return TableFacts(**base)  # type: ignore[arg-type]


def pub(**kw: object) -> PublicationInfo:
    base: dict[str, object] = dict(
        name="p",
        owner="me",
        all_tables=False,
        insert=True,
        update=True,
        delete=True,
        truncate=True,
        via_partition_root=False,
        tables=(),
        schemas=(),
        published_tables=("public.t",),
    )
    base.update(kw)
    return PublicationInfo(**base)  # type: ignore[arg-type]


PK = index("t_pkey", "id")


@pytest.mark.parametrize(
    ("facts", "mode", "keys", "reason"),
    [
        (table("d", primary_key=PK), "key", ("id",), "primary key t_pkey (id)"),
        (table("d"), "nothing", (), "without a primary key"),
        (table("f"), "full", ("id", "code", "maybe", "body"), "FULL"),
        (table("n", primary_key=PK), "nothing", (), "NOTHING"),
        (table("i", identity_index=index("ix", "code")), "key", ("code",), "unique index ix"),
        (table("i"), "nothing", (), "no longer exists"),
        (table("i", identity_index=index("ix", "code", valid=False)), "nothing", (), "not valid"),
        (table("i", identity_index=index("ix", "maybe")), "nothing", (), "nullable"),
        (table("i", identity_index=index("ix", "id", immediate=False)), "nothing", (), "deferr"),
        (table("i", identity_index=index("ix", "id", partial=True)), "nothing", (), "partial"),
        (table("i", identity_index=index("ix", "id", None)), "nothing", (), "expression"),
    ],
)
def test_identity_of(facts: TableFacts, mode: str, keys: tuple[str, ...], reason: str) -> None:
    ident = doctor.identity_of(facts)
    assert ident.mode == mode
    assert ident.key_columns == keys
    assert reason in ident.reason


def test_stream_carries() -> None:
    assert doctor.stream_carries(table("d", primary_key=PK)) == {
        "insert": "new row",
        "update": "new row; old key (id) only when the key changes",
        "delete": "old key only (id)",
    }
    assert doctor.stream_carries(table("f"))["delete"] == "the full old row"
    assert "fails on the source" in doctor.stream_carries(table("n"))["update"]


def test_identity_fix_prefers_usable_unique_index() -> None:
    unusable = index("nullable_ix", "maybe")
    usable = index("code_ix", "code")
    facts = table("d", unique_indexes=(unusable, usable))
    assert (
        doctor.identity_fix(facts) == "ALTER TABLE public.t REPLICA IDENTITY USING INDEX code_ix;"
    )
    assert "REPLICA IDENTITY FULL" in doctor.identity_fix(table("d"))
    assert doctor.identity_fix(table("n", primary_key=PK)) == (
        "ALTER TABLE public.t REPLICA IDENTITY DEFAULT;"
    )
    odd = table("d", name="My T", unique_indexes=(index("Odd Ix", "code"),))
    assert doctor.identity_fix(odd) == (
        'ALTER TABLE public."My T" REPLICA IDENTITY USING INDEX "Odd Ix";'
    )


def ids(checks: list[doctor.Check]) -> dict[str, str]:
    return {c.id: c.status for c in checks}


def test_table_checks() -> None:
    good = table("d", primary_key=PK)
    assert ids(doctor.table_publication_checks(good, pub(), None)) == {
        "table.replica_identity": "ok",
        "table.unchanged_toast": "ok",  # code and body could go out of line; none has
    }
    bad = doctor.table_publication_checks(table("d"), pub(delete=False), None)
    (ri,) = [c for c in bad if c.id == "table.replica_identity"]
    assert ri.status == "fail" and ri.summary.startswith("UPDATE on public.t fail")
    inserts = doctor.table_publication_checks(table("n"), pub(update=False, delete=False), None)
    assert ids(inserts) == {"table.replica_identity": "ok"}
    # FULL is what the TOAST warning recommends: never warned against, its cost an INFO
    full = doctor.table_publication_checks(table("f", primary_key=PK), pub(), None)
    assert ids(full) == {"table.replica_identity": "info"}
    assert full[0].fix is None and "more WAL" in full[0].summary


def test_toast_check_respects_column_list() -> None:
    row = PublicationTableRow("p", 1, ("id", "maybe"), None, ())
    checks = doctor.table_publication_checks(table("d", primary_key=PK), pub(), row)
    assert "table.unchanged_toast" not in ids(checks)


def test_row_filter_and_column_list() -> None:
    facts = table("d", primary_key=PK)
    row = PublicationTableRow("p", 1, ("code",), "(maybe > 1)", ("maybe",))
    checks = {c.id: c for c in doctor.table_publication_checks(facts, pub(), row)}
    assert checks["table.row_filter"].status == "fail"
    assert "uses maybe" in checks["table.row_filter"].summary
    assert checks["table.column_list"].status == "fail"
    assert checks["table.column_list"].fix == (
        "ALTER PUBLICATION p DROP TABLE public.t; "
        "ALTER PUBLICATION p ADD TABLE public.t (code, id);"
    )
    full_row = PublicationTableRow("p", 1, None, "(maybe > 1)", ("maybe",))
    full = {c.id: c for c in doctor.table_publication_checks(table("f"), pub(), full_row)}
    assert full["table.row_filter"].status == "ok"


def test_partitions() -> None:
    root = table("d", relkind="p", primary_key=PK, partitions=("public.t_1",))
    (check,) = doctor.table_publication_checks(root, pub(), None)
    assert check.id == "table.partitioning" and check.status == "warn"
    (check,) = doctor.table_publication_checks(root, pub(via_partition_root=True), None)
    assert check.status == "ok"


def server(**settings: str) -> ServerFacts:
    base = {"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}
    base.update(settings)
    return ServerFacts(150000, base, 0, 0, False)


ROLE = RoleFacts("me", False, True, (), True, "shop")


def facts(**kw: object) -> DoctorFacts:
    base: dict[str, object] = dict(
        server=server(),
        role=ROLE,
        requested_publications=(),
        publications=(pub(),),
        tables=(table("d", primary_key=PK),),
        publication_rows=(PublicationTableRow("p", 1, None, None, ()),),
        requested_slots=(),
        slots=SlotListing(150000, (), ()),
        walsenders=(),
        all_publications=("p",),
    )
    base.update(kw)
    return DoctorFacts(**base)  # type: ignore[arg-type]


def test_server_checks() -> None:
    assert ids(doctor.server_checks(facts())) == {
        "wal_level": "ok",
        "max_replication_slots": "ok",
        "max_wal_senders": "ok",
    }
    broken = facts(server=replace(server(wal_level="replica", max_wal_senders="0"), slots_in_use=9))
    assert ids(doctor.server_checks(broken)) == {
        "wal_level": "fail",
        "max_replication_slots": "warn",
        "max_wal_senders": "fail",
    }
    standby = facts(server=replace(server(), in_recovery=True))
    assert ids(doctor.server_checks(standby))["standby"] == "fail"


def test_role_checks() -> None:
    assert ids(doctor.role_checks(facts())) == {
        "replication_privilege": "ok",
        "create_publication": "ok",
        "select_privilege": "ok",
    }
    plain = RoleFacts("Bob", False, False, (), False, "My DB")
    asked = facts(role=plain, requested_publications=("new",), publications=())
    checks = {c.id: c for c in doctor.role_checks(asked)}
    assert checks["replication_privilege"].status == "fail"
    assert checks["replication_privilege"].fix is not None
    assert checks["replication_privilege"].fix.startswith('ALTER ROLE "Bob" REPLICATION;')
    assert checks["create_publication"].fix == 'GRANT CREATE ON DATABASE "My DB" TO "Bob";'
    azure = RoleFacts("a", False, False, ("azure_pg_admin",), False, "d")
    assert ids(doctor.role_checks(facts(role=azure)))["replication_privilege"] == "ok"


def slot(**kw: object) -> SlotInfo:
    base: dict[str, object] = dict(
        name="s",
        plugin="pgoutput",
        slot_type="logical",
        database="shop",
        temporary=False,
        active=False,
        active_pid=None,
        two_phase=False,
        restart_lsn=1000,
        confirmed_flush_lsn=2000,
        current_lsn=1000 + 5 * 1024**3,
        wal_status="extended",
        safe_wal_size=None,
    )
    base.update(kw)
    return SlotInfo(**base)  # type: ignore[arg-type]


def slot_facts(*slots: SlotInfo, keep: str = "-1", **kw: object) -> DoctorFacts:
    return facts(
        slots=SlotListing(170000, ("invalidation_reason",), slots),
        server=server(max_slot_wal_keep_size=keep),
        **kw,
    )


def test_slot_checks() -> None:
    (check,) = doctor.slot_checks(slot_facts(slot()))
    assert check.status == "warn" and "5.0 GB" in check.summary
    (check,) = doctor.slot_checks(slot_facts(slot(wal_status="reserved")))
    assert check.status == "ok"
    reserved = slot(wal_status="reserved")
    (check,) = doctor.slot_checks(slot_facts(reserved), wal_warn_bytes=1024**3)
    assert check.status == "warn" and "--wal-warn 1.0 GB" in check.summary
    (check,) = doctor.slot_checks(slot_facts(slot(active=True, active_pid=7)))
    assert check.status == "ok" and "PID 7" in check.summary
    lost = slot(wal_status="lost", invalidation_reason="wal_removed")
    (check,) = doctor.slot_checks(slot_facts(lost))
    assert check.id == "slot.invalidated" and "wal_removed" in check.summary
    unreserved = slot(wal_status="unreserved", active=True)
    assert ids(doctor.slot_checks(slot_facts(unreserved)))["slot.wal_keep"] == "fail"
    near = slot(safe_wal_size=10 * 1024**2, active=True)
    assert ids(doctor.slot_checks(slot_facts(near, keep=str(1024**3))))["slot.wal_keep"] == "warn"
    other = slot(plugin="wal2json", active=True)
    checks = doctor.slot_checks(slot_facts(other, requested_slots=("s",)))
    assert ids(checks)["slot.plugin"] == "fail"
    missing = doctor.slot_checks(slot_facts(requested_slots=("nope",)))
    assert ids(missing) == {"slot.exists": "fail"}


def test_walsender_with_missing_publication() -> None:
    senders = (
        WalsenderFacts(1, "shop", "s", ("p", "gone")),
        WalsenderFacts(2, "elsewhere", "x", ("gone",)),  # another database: not judged
    )
    checks = doctor.slot_checks(slot_facts(walsenders=senders))
    (check,) = [c for c in checks if c.id == "slot.publication"]
    assert check.status == "fail" and "'gone'" in check.summary and check.subject == "s"


def test_publication_checks() -> None:
    assert (
        ids(doctor.publication_checks(facts(requested_publications=("x",)))).get(
            "publication.exists"
        )
        == "fail"
    )
    empty = facts(publications=(), all_publications=(), publication_rows=(), tables=())
    assert ids(doctor.publication_checks(empty)) == {"publication.exists": "warn"}
    nothing = facts(publications=(pub(published_tables=()),), publication_rows=())
    assert ids(doctor.publication_checks(nothing)) == {"publication.tables": "warn"}


def test_overall_and_report() -> None:
    checks = doctor.evaluate(facts(role=RoleFacts("me", False, False, (), True, "shop")))
    assert doctor.overall(checks) == "fail"
    report = doctor.report_dict(checks)
    assert report["status"] == "fail" and report["counts"]["fail"] == 1
    assert {"id", "section", "subject", "status", "summary", "fix"} == set(report["checks"][0])
    assert doctor.overall([]) == "ok"


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0, "0 bytes"), (1023, "1023 bytes"), (1536, "1.5 kB"), (5 * 1024**3, "5.0 GB")],
)
def test_human_bytes(value: int | None, text: str) -> None:
    assert doctor.human_bytes(value) == text


def test_parse_size() -> None:
    assert doctor.parse_size("4096") == 4096
    assert doctor.parse_size("512MB") == 512 * 1024**2
    assert doctor.parse_size("1.5 gb") == int(1.5 * 1024**3)
    with pytest.raises(ConfigurationError):
        doctor.parse_size("lots")


def test_slot_to_dict_only_has_server_columns() -> None:
    s = slot(inactive_since=datetime(2026, 1, 1, tzinfo=UTC))
    assert "inactive_since" not in s.to_dict(())
    assert s.to_dict(("inactive_since",))["inactive_since"] == "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize("terminal", [True, False])
def test_report_rendering(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    from click.testing import CliRunner

    from pgtail.cli import doctor_cmd

    monkeypatch.setattr(doctor_cmd, "stdout_is_terminal", lambda: terminal)
    monkeypatch.setenv("COLUMNS", "200")
    checks = doctor.evaluate(facts(role=RoleFacts("me", False, False, (), True, "shop")))
    with CliRunner().isolation() as (out, _, _):
        doctor_cmd._print_report(checks)
        text = out.getvalue().decode()
    assert "Server" in text and "Role" in text and "Tables" in text
    assert "FAIL" in text and "ALTER ROLE me REPLICATION;" in text
    assert text.rstrip().endswith("1 failure(s)")
    if not terminal:
        assert "  [FAIL] me: role me has no REPLICATION privilege" in text


def test_requested_slot_in_another_database() -> None:
    elsewhere = slot(database="other", active=True)
    checks = {c.id: c for c in doctor.slot_checks(slot_facts(elsewhere, requested_slots=("s",)))}
    assert checks["slot.database"].status == "fail"
    assert checks["slot.database"].fix == "connect with dbname=other (pgtail ... -d other)"
    assert "slot.database" not in ids(doctor.slot_checks(slot_facts(elsewhere)))


def test_severities_and_strict() -> None:
    def check(status: doctor.Status) -> doctor.Check:
        return doctor.Check("x", "server", "x", status, "x")

    infos = [check("ok"), check("info")]
    assert doctor.overall(infos) == "info"
    assert not doctor.failed(infos) and not doctor.failed(infos, strict=True)
    warned = [*infos, check("warn")]
    assert not doctor.failed(warned) and doctor.failed(warned, strict=True)
    assert doctor.failed([*warned, check("fail")])
    assert doctor.counts(warned) == {"ok": 1, "info": 1, "warn": 1, "fail": 0}


TOASTY = (
    ColumnFacts("id", 1, "integer", True, False),
    ColumnFacts("body", 2, "text", False, True, storage="x"),
    ColumnFacts("note", 3, "text", False, True, storage="x"),
    ColumnFacts("n", 4, "numeric", False, False, storage="m"),
    ColumnFacts("cc", 5, "character(2)", False, True, storage="x", max_bytes=12),
)


def toasty(*seen: str, toast_bytes: int | None = 8192, sampled: bool = True) -> TableFacts:
    columns = tuple(
        replace(c, out_of_line=c.name in seen, sampled_bytes=100 if sampled else None)
        if c.storage != "p" and sampled
        else c
        for c in TOASTY
    )
    return table("d", primary_key=PK, columns=columns, toast_bytes=toast_bytes)


def test_unchanged_toast_needs_evidence() -> None:
    nothing_yet = doctor.unchanged_toast(toasty(toast_bytes=0), ("id",), [None])
    assert nothing_yet == doctor.UnchangedToast(("body", "note"), None)  # not n, not cc
    seen = doctor.unchanged_toast(toasty("body"), ("id",), [None])
    assert seen is not None and seen.columns == ("body",) and "8.0 kB" in (seen.evidence or "")
    # main storage counts only when seen out of line
    main = doctor.unchanged_toast(toasty("n"), ("id",), [None])
    assert main is not None and main.columns == ("n",)
    # TOAST data, but the sample shows no column: every column that can go out of line
    unknown = doctor.unchanged_toast(toasty(), ("id",), [None])
    assert unknown is not None and unknown.columns == ("body", "note")
    assert "sampled" in (unknown.evidence or "")
    unread = doctor.unchanged_toast(toasty(sampled=False), ("id",), [None])
    assert unread is not None and "may not read" in (unread.evidence or "")
    # key columns and columns left out of every column list are not named
    keyed = doctor.unchanged_toast(toasty("body"), ("body",), [None])
    assert keyed is not None and keyed.columns == ("note",)
    listed = doctor.unchanged_toast(toasty("note"), ("id",), [("id", "note")])
    assert listed is not None and listed.columns == ("note",)
    assert doctor.unchanged_toast(toasty("body"), ("id",), [("id",)]) is None


def test_one_finding_per_table_for_many_publications() -> None:
    both = [(pub(name="a"), None), (pub(name="b", delete=False), None)]
    checks = doctor.table_checks(toasty("body"), both)
    assert ids(checks) == {"table.replica_identity": "ok", "table.unchanged_toast": "warn"}
    assert len(checks) == 2
    (fail,) = doctor.table_checks(table("d"), both)
    assert fail.status == "fail" and "in publications a, b" in fail.summary


def test_identity_remedies() -> None:
    nullable = table("d", unique_indexes=(index("maybe_ix", "maybe"),))
    fix, why = doctor.identity_remedy(nullable)
    assert fix == (
        "ALTER TABLE public.t ALTER COLUMN maybe SET NOT NULL; "
        "ALTER TABLE public.t REPLICA IDENTITY USING INDEX maybe_ix;"
    )
    assert "maybe" in why
    deferrable = table("d", unique_indexes=(index("d_ix", "id", immediate=False),))
    assert doctor.identity_fix(deferrable) == "ALTER TABLE public.t REPLICA IDENTITY FULL;"
    broken = index("ix", "id", valid=False)
    rebuild = table("i", identity_index=broken, unique_indexes=(broken,))
    assert doctor.identity_fix(rebuild) == "REINDEX INDEX CONCURRENTLY public.ix;"
    assert doctor.identity_fix(table("d", primary_key=PK), prefer_full=True).endswith("FULL;")


def test_create_publication_by_task() -> None:
    plain = RoleFacts(
        "bob",
        False,
        True,
        (),
        False,
        "shop",
        tables_owned=0,
        tables_not_owned=2,
        owners_not_held=("app",),
    )
    # streams an existing publication: worth knowing only
    check = {c.id: c for c in doctor.role_checks(facts(role=plain, requested_publications=("p",)))}
    assert check["create_publication"].status == "info"
    assert check["create_publication"].fix is None  # nothing to fix for this task
    # asked for a publication that does not exist: it cannot be created
    missing = facts(role=plain, requested_publications=("new",), publications=())
    check = {c.id: c for c in doctor.role_checks(missing)}
    assert check["create_publication"].status == "fail"
    assert check["create_publication"].fix == (
        "GRANT CREATE ON DATABASE shop TO bob; GRANT app TO bob;"
    )
    # no publication at all, none asked for
    none = facts(role=plain, publications=(), publication_rows=(), tables=())
    assert {c.id: c.status for c in doctor.role_checks(none)}["create_publication"] == "warn"
    (fix,) = [c.fix for c in doctor.publication_checks(none) if c.id == "publication.exists"]
    assert fix == "pgtail publication create pgtail --table SCHEMA.TABLE  # the tables to stream"
    root = replace(none, role=RoleFacts("postgres", True, True, (), True, "shop"))
    (fix,) = [c.fix for c in doctor.publication_checks(root) if c.id == "publication.exists"]
    assert fix == (
        "pgtail publication create pgtail --all-tables"
        "  # refuses while a table has no replica identity, naming its fix"
    )
    # a keyless table in the database: its fix comes first, or --all-tables refuses
    keyless = replace(root, keyless_tables=(table(primary_key=None), table(kind="f")))
    (fix,) = [c.fix for c in doctor.publication_checks(keyless) if c.id == "publication.exists"]
    assert fix is not None and fix.startswith("first give each table a replica identity: ")
    assert fix.count("ALTER TABLE") == 1  # the FULL one has one already
    assert fix.index("REPLICA IDENTITY") < fix.index(
        "pgtail publication create pgtail --all-tables"
    )


def test_slot_past_max_wal_size_before_13() -> None:
    old = slot(wal_status=None, current_lsn=1000 + 40 * 1024**2)
    facts_ = slot_facts(old)
    facts_ = replace(facts_, server=server(max_wal_size=str(32 * 1024**2)))
    (check,) = doctor.slot_checks(facts_)
    assert check.status == "warn" and "past max_wal_size (32.0 MB)" in check.summary
    small = slot(wal_status=None, current_lsn=1000 + 16 * 1024**2)
    (check,) = doctor.slot_checks(replace(facts_, slots=SlotListing(120000, (), (small,))))
    assert check.status == "ok"
