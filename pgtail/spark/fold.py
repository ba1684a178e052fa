"""What materialize folds each key's history with (pure: no Spark): `targets`, what one
change does to the current state; `fold_copies`, a key's row after its changes in order;
`fill`, the columns an update left out as unchanged TOAST, from the old key's row.

Values stay the JSON text they were written as (`pgtail.spark.json_rows`): rows are
merged, never parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SNAPSHOT_OP = "snapshot"  # a row of an initial load (`pgtail.spark.load`)


def _canonical(obj: Mapping[str, Any]) -> str:
    import orjson

    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def targets(
    op: str, key: str | None, after: str | None, commit_lsn: int, seq: int
) -> list[tuple[str, str, int, str | None]]:
    """What one change does to the current state: [(row key, kind, order, origin)], where
    kind is "insert" (one more row of this key), "upsert" (the key's row changes, and is
    there) or "delete" (one row of this key fewer).

    An update that changes the replica identity is a delete of the old key and an insert
    of the new one, whose origin is the old key (where unchanged TOAST values live). Under
    REPLICA IDENTITY FULL the key is the whole row, and a table without a primary key can
    hold several equal rows: they count (see `fold_copies`), as in the table. Rows of a
    table without a key are kept as they are (inserts only).
    """
    import orjson

    if op == SNAPSHOT_OP:  # a row of an initial load (`pgtail.spark.load`): an insert
        if after is None:
            return []  # the table's marker: loaded, and maybe empty
        if key is None:
            # no key: equal rows are copies of one row (the text makes them one key)
            return [(f"@{commit_lsn}/{seq}/{after}", "insert", 0, None)]
        op = "insert"
    if key is None:
        if op == "insert":
            return [(f"@{commit_lsn}/{seq}", "insert", 0, None)]
        return []
    old = orjson.loads(key)
    if op == "delete":
        return [(_canonical(old), "delete", 0, None)]
    if op == "insert":
        return [(_canonical(old), "insert", 0, None)]
    new_row = orjson.loads(after) if after is not None else {}
    new = {name: new_row.get(name, old.get(name)) for name in old}
    if new != old:
        old_key = _canonical(old)
        return [(old_key, "delete", 0, None), (_canonical(new), "insert", 1, old_key)]
    return [(_canonical(old), "upsert", 0, None)]


def fold(history: Iterable[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """(current row JSON, hole JSON) after a key's changes in order; (None, None) when it
    was deleted (`fold_copies` without the count)."""
    row, hole, _copies = fold_copies(history)
    return row, hole


def fold_copies(history: Iterable[Mapping[str, Any]]) -> tuple[str | None, str | None, int]:
    """(current row JSON, hole JSON, copies) after a key's changes in order; (None, None,
    0) when none is left.

    Copies: an insert adds one row of the key, a delete takes one away (never below none:
    the log may begin after a row was written), an upsert changes the row in place (one,
    when none was known). Only a key that is the whole row (REPLICA IDENTITY FULL without
    a primary key) can have several; they are the same row.

    Columns an update left out as unchanged TOAST keep their previous value. When the row
    came from a key change, their value is in the old key's row, which this key's history
    does not hold: the hole says where to find the columns still missing at the end
    (``{"from": old key, "lsn", "seq": the key change, "columns": [...]}``; see `fill`).
    """
    import orjson

    from pgtail.spark.json_rows import raw_members, raw_object

    # Values stay the JSON text they were written as (a json/jsonb value keeps the
    # server's text): rows are merged, never parsed.
    state: dict[str, str] | None = None
    hole: dict[str, Any] | None = None
    copies = 0
    for change in history:
        if change["kind"] == "delete":
            copies -= 1
            if copies <= 0:
                state = hole = None
                copies = 0
            continue
        if state is None or change["kind"] == "insert":
            copies += 1
        row = raw_members(change["after"]) if change["after"] is not None else {}
        toast = change["unchanged_toast"] or ()
        if state is None:
            origin = change["origin"]
            hole = None
            if origin is not None and toast:
                hole = {
                    "from": origin,
                    "lsn": change["commit_lsn"],
                    "seq": change["seq"],
                    "columns": list(toast),
                }
        else:
            if hole is not None:
                hole["columns"] = [name for name in hole["columns"] if name not in row]
            for name in toast:
                if name in state:
                    row[name] = state[name]
            ordered = {name: row[name] for name in state if name in row}
            ordered.update(row)
            row = ordered
        state = row
    if state is None:
        return None, None, 0
    missing = hole is not None and hole["columns"]
    return raw_object(state), orjson.dumps(hole).decode() if missing else None, copies


def fill(
    row: str, hole: str, origin_history: Iterable[Mapping[str, Any]] | None
) -> tuple[str, str | None]:
    """Fill a `fold` hole from the old key's row just before the key change.

    Returns the row and what is still missing: a hole in the old key's own row (a chain of
    key changes) moves the search one key further back. Without the old key's row (its
    history starts after the key change, or the log began after it was written) the
    columns stay out.
    """
    import orjson

    from pgtail.spark.json_rows import raw_members, raw_object

    wanted = orjson.loads(hole)
    at = (wanted["lsn"], wanted["seq"])
    before = [c for c in origin_history or () if (c["commit_lsn"], c["seq"]) < at]
    source_row, source_hole = fold(before)
    if source_row is None:
        return row, None
    source = raw_members(source_row)
    filled = raw_members(row)
    still = []
    for name in wanted["columns"]:
        if name in source:
            filled[name] = source[name]
        else:
            still.append(name)
    further = None
    if still and source_hole is not None:
        back = orjson.loads(source_hole)
        back["columns"] = [name for name in still if name in back["columns"]]
        if back["columns"]:
            further = orjson.dumps(back).decode()
    return raw_object(filled), further
