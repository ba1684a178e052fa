"""`OutputState`: the ``--output`` bookkeeping that keeps a restart from writing twice."""

from __future__ import annotations

import json
from pathlib import Path

from pgtail.stream import OutputState


def test_fresh_file_records_its_current_size(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"someone else's line\n")
    logs: list[str] = []
    state = OutputState(str(out), "s")
    state.load(logs.append)
    assert state.position == 0
    recorded = json.loads((tmp_path / "out.jsonl.pgtail-state").read_text())
    assert recorded == {"slot": "s", "position": 0, "size": 20}
    assert out.read_bytes() == b"someone else's line\n"  # nothing cut
    assert logs == []


def test_unrecorded_tail_is_cut_and_position_restored(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    state = OutputState(str(out), "s")
    state.load(lambda _: None)
    out.write_bytes(b"tx1\n")
    state.save(100, 4)
    out.write_bytes(b"tx1\ntx2 partial")  # killed before tx2 was recorded
    logs: list[str] = []
    again = OutputState(str(out), "s")
    again.load(logs.append)
    assert out.read_bytes() == b"tx1\n"
    assert again.position == 100
    assert any("removed 11 bytes" in m for m in logs)


def test_other_slot_state_is_not_applied(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    OutputState(str(out), "a").load(lambda _: None)
    first = OutputState(str(out), "a")
    first.load(lambda _: None)
    out.write_bytes(b"x\n")
    first.save(500, 2)
    out.write_bytes(b"x\ny\n")
    other = OutputState(str(out), "b")
    other.load(lambda _: None)
    assert other.position == 0  # positions of another slot are not comparable
    assert out.read_bytes() == b"x\ny\n"


def test_position_never_moves_back(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    state = OutputState(str(out), "s")
    state.load(lambda _: None)
    state.save(300, 10)
    state.save(200, 12)
    recorded = json.loads((tmp_path / "out.jsonl.pgtail-state").read_text())
    assert recorded["position"] == 300 and recorded["size"] == 12


def test_unreadable_state_is_ignored_with_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"a\n")
    (tmp_path / "out.jsonl.pgtail-state").write_text("{not json")
    logs: list[str] = []
    state = OutputState(str(out), "s")
    state.load(logs.append)
    assert state.position == 0
    assert any("unreadable" in m for m in logs)
    assert out.read_bytes() == b"a\n"


# --- `>> FILE`: a torn last line left by a killed run -----------------------------------


def _mend(path: Path, fmt: str, mode: str = "ab") -> list[str]:
    from pgtail.stream.writer import LINE_STARTS, mend_torn_tail

    logs: list[str] = []
    with open(path, mode) as fh:
        mend_torn_tail(fh, LINE_STARTS.get(fmt, ()), logs.append)
        fh.write(b'{"op":"insert"}\n')
    return logs


def test_torn_json_line_is_cut_before_appending(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"op":"insert","a":1}\n{"op":"insert","schema":"pub')
    logs = _mend(out, "json")
    assert out.read_bytes() == b'{"op":"insert","a":1}\n{"op":"insert"}\n'
    assert any("removed a torn last line (28 bytes)" in m for m in logs), logs


def test_torn_sql_statement_is_cut_even_at_the_start_of_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out.sql"
    out.write_bytes(b"INSERT INTO public.t (id, v) VALUES (1, 'unterminated")
    logs = _mend(out, "sql")
    assert out.read_bytes() == b'{"op":"insert"}\n'
    assert logs and "removed a torn last line" in logs[0]


def test_a_short_torn_prefix_is_ours_too(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"op":"insert"}\n{"o')
    _mend(out, "json")
    assert out.read_bytes() == b'{"op":"insert"}\n{"op":"insert"}\n'


def test_someone_elses_unterminated_line_is_ended_not_cut(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"# header without a line end")
    logs = _mend(out, "json")
    assert out.read_bytes() == b'# header without a line end\n{"op":"insert"}\n'
    assert logs and "did not end with a line end" in logs[0]
    # a table or raw run cuts nothing either
    out.write_bytes(b'{"op":"insert"')
    _mend(out, "table")
    assert out.read_bytes() == b'{"op":"insert"\n{"op":"insert"}\n'


def test_whole_lines_and_empty_files_are_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    for content in (b"", b'{"op":"insert"}\n'):
        out.write_bytes(content)
        assert _mend(out, "json") == []
        assert out.read_bytes() == content + b'{"op":"insert"}\n'
    # a write-only descriptor whose offset is not at the end (1<> FILE): not an append
    out.write_bytes(b'{"op":"ins')
    assert _mend(out, "json", "r+b") == []
