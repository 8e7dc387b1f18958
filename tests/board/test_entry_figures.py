"""Stored figures (issue 24): a finalised submission's figures are computed once, from its own runs,
when it completes, and kept in `entry_figures`; boards and entries read them (paged, ranked from the
stored intervals) without recomputing; `assay board --recompute` rebuilds them and says what differed.
On both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import Invalid
from assay.service import board as boards
from assay.service.actors import OPERATOR, PUBLIC
from assay.stats import board as figures_of
from assay.stats.ranks import statistical_ranks
from assay.store import Store
from assay.store.board_repo import EntryRow

from ._support import account, submit


def _stored(store: Store) -> dict[str, dict[str, Any]]:
    with store.engine.connect() as conn:
        return {r.submission_id: dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM entry_figures"))}


@pytest.fixture
def board_of_four(mini: Store) -> dict[str, str]:
    for name in ("bob", "carol", "dave"):
        account(mini, name, name.title())
    return {
        "diligent": submit(mini, publish=True),
        "hasty": submit(mini, account="bob", agent="reference:hasty", publish=True),
        "idle": submit(mini, account="carol", agent="reference:idle", publish=True),
        "quiet": submit(mini, account="dave", label="quiet one", publish=True),
    }


def test_completing_a_submission_stores_its_figures_and_the_board_reads_them(mini: Store,
                                                                           board_of_four: dict[str, str]) -> None:
    stored = _stored(mini)
    assert set(stored) == set(board_of_four.values())
    assert {r["method"] for r in stored.values()} == {figures_of.METHOD}
    shown = boards.board(mini, "mini", actor=PUBLIC)["entries"]
    for entry in shown:
        held = json.loads(stored[entry["submission_id"]]["figures"])
        for key in ("n_runs", "n_cases", *figures_of.RATES, *(f"{k}_ci" for k in figures_of.RATES)):
            assert entry[key] == held[key], key
    # ranks: counted from the stored intervals, the statistical rank over the board's intervals
    ranked = [e for e in shown if e["rank"] is not None]
    assert [e["rank"] for e in ranked] == statistical_ranks([tuple(e["pass_rate_ci"]) for e in ranked])
    assert {e["submission_id"]: boards.entry_rank(mini, e["submission_id"]) for e in shown} == {
        e["submission_id"]: e["rank"] for e in shown}


def test_the_served_text_is_the_board_json_whole_and_paged(mini: Store, board_of_four: dict[str, str]) -> None:
    """`board_json` splices each entry's stored members without decoding them: the same bytes as
    `board_text(board(...))`, which the pages and the exports use."""
    for page in ({}, {"limit": 2}, {"limit": 3, "search": "a"}):
        assert boards.board_json(mini, "mini", actor=PUBLIC, **page) == boards.board_text(
            boards.board(mini, "mini", actor=PUBLIC, **page))
    text = boards.board_json(mini, "mini", actor=PUBLIC)
    assert json.loads(text) == boards.board(mini, "mini", actor=PUBLIC)
    assert sum(line.startswith('    {"submission_id": ') for line in text.splitlines()) == 4  # one line each


_maybe_text = st.none() | st.text(max_size=12)
_ABOUT = {"submission_id", "agent_label", "label_self_declared", "config_signature", "public_handle", "play_model",
          "model_provenance", "measurement_era", "measurement_era_is_current", "variance_note", "harness_version",
          "digest", "rank"}  # a shown member never shares a name with them


@settings(max_examples=200, deadline=None)
@given(row=st.fixed_dictionaries({
    "submission_id": st.text(max_size=8), "label": st.text(max_size=12), "config_signature": _maybe_text,
    "public_handle": _maybe_text, "play_model": _maybe_text, "model_provenance": _maybe_text,
    "measurement_era": _maybe_text, "measurement_era_is_current": st.sampled_from([None, True, False, 0, 1]),
    "variance_note": _maybe_text, "harness_version": _maybe_text, "digest": _maybe_text}),
    rank=st.none() | st.integers(1, 10**6), shown=st.dictionaries(st.text(max_size=6).filter(lambda k: k not in _ABOUT),
                                                                  _maybe_text, min_size=1, max_size=3))
def test_an_entry_line_is_json_dumps_of_the_entry(row: dict[str, Any], rank: int | None,
                                                  shown: dict[str, Any]) -> None:
    """The line written member by member is `json.dumps` of what the submission is, its rank and its
    shown figures: any text (quotes, controls, beyond ASCII), None, and SQLite's 0/1 for a boolean."""
    assert set(boards._about(_entry_row(row, ""))) | {"rank"} == _ABOUT
    stored = _entry_row(row, json.dumps(shown, ensure_ascii=False)[1:-1])
    expected = json.dumps({**boards._about(stored), "rank": rank, **shown}, ensure_ascii=False)
    assert boards._entry_line(stored, rank) == expected


def _entry_row(row: dict[str, Any], shown: str) -> EntryRow:
    """A stored entry row with `row`'s members (a boolean as the driver may give it: 0/1) and `shown`."""
    return EntryRow(release_id=1, shown=shown, ranked=False, rank_low=None, rank_high=None, order_key="", **row)


def _reference_text(value: dict[str, Any]) -> str:
    """The board text's layout, written independently: the value indented by two, with each entry
    compact on a line of its own."""
    rest = {k: v for k, v in value.items() if k != "entries"}
    lines = [json.dumps(e, ensure_ascii=False) for e in value["entries"]]
    out = json.dumps(rest, indent=2, ensure_ascii=False).splitlines()
    fields = list(value)
    at = 1 + sum(len(json.dumps({k: rest[k]}, indent=2, ensure_ascii=False).splitlines()) - 2
                 for k in fields[:fields.index("entries")])
    block = ['  "entries": [', *(f"    {line}," for line in lines[:-1]), f"    {lines[-1]}", "  ]"] if lines else [
        '  "entries": []']
    if at < len(out) - 1:
        block[-1] += ","
    else:
        out[at - 1] += ","
    return "\n".join([*out[:at], *block, *out[at:]]) + "\n"


def test_the_board_text_is_laid_out_as_its_reference_whatever_the_entries_hold(
        mini: Store, board_of_four: dict[str, str]) -> None:
    """Written once from its parts, the text is the indented value with an entry a line: whole, paged
    (the page after the entries), empty, one entry, and labels holding the placeholder, quotes,
    new lines and characters beyond ASCII."""
    whole = boards.board(mini, "mini", actor=PUBLIC)
    tricky = [{**e, "agent_label": label} for e, label in zip(whole["entries"], (
        boards._ENTRIES, '"entries": "@@assay-board-entries@@"', "naïve — ✓\nline", "plain"), strict=True)]
    for value in (whole, boards.board(mini, "mini", actor=PUBLIC, limit=2), {**whole, "entries": []},
                  {**whole, "entries": whole["entries"][:1]}, {**whole, "entries": tricky},
                  {**boards.board(mini, "mini", actor=PUBLIC, limit=3), "entries": tricky}):
        text = boards.board_text(value)
        assert text == _reference_text(value)
        assert json.loads(text) == value
    assert boards.board_json(mini, "mini", actor=PUBLIC) == _reference_text(whole)


def test_the_board_shows_each_entrys_usage_total_and_the_entry_its_whole_block(
        mini: Store, board_of_four: dict[str, str]) -> None:
    """The board's usage is the total's tokens, calls and cost (`board_usage`); the entry by its id
    and `full_usage` (the card's and the page's cost tables) give the block by role, models and
    latency; the stored figures keep the whole block, which `verify` and `--recompute` compare."""
    stored = _stored(mini)
    listed = boards.board(mini, "mini", actor=PUBLIC)["entries"]
    whole = {e["submission_id"]: e for e in boards.board(mini, "mini", actor=PUBLIC, full_usage=True)["entries"]}
    for e in listed:
        held = json.loads(stored[e["submission_id"]]["figures"])["usage"]
        assert set(held) == {"agent", "judge", "facilitator", "total"} and "latency_ms" in held["total"]
        assert e["usage"] == {"total": {k: held["total"][k] for k in boards.BOARD_USAGE}}
        by_id = boards.entry(mini, e["submission_id"], actor=PUBLIC)["entry"]
        assert by_id["usage"] == held == whole[e["submission_id"]]["usage"]
        assert {**by_id, "usage": e["usage"]} == e == {**whole[e["submission_id"]], "usage": e["usage"]}
        shown = stored[e["submission_id"]]["shown"]
        assert '"agent"' not in shown and '"latency_ms"' not in shown and '"models"' not in shown


def test_pages_walk_the_whole_board_in_order_and_search_finds_by_label_or_handle(
        mini: Store, board_of_four: dict[str, str]) -> None:
    whole = boards.board(mini, "mini", actor=PUBLIC)
    assert "page" not in whole
    walked, cursor = [], None
    while True:
        page = boards.board(mini, "mini", actor=PUBLIC, limit=1, cursor=cursor)
        walked += page["entries"]
        cursor = page["page"]["next_cursor"]
        if cursor is None:
            break
    assert walked == whole["entries"] and len(walked) == 4
    assert [e["agent_label"] for e in boards.board(mini, "mini", actor=PUBLIC, search="QUIET")["entries"]] == [
        "quiet one"]
    assert [e["public_handle"] for e in boards.board(mini, "mini", actor=PUBLIC, limit=10, search="car")["entries"]] == [
        "Carol"]
    assert boards.board(mini, "mini", actor=PUBLIC, search="%")["entries"] == []  # a literal, not a pattern
    with pytest.raises(Invalid) as bad:
        boards.board(mini, "mini", actor=PUBLIC, limit=1, cursor="!!not-a-cursor")
    assert bad.value.field == "cursor"
    with pytest.raises(Invalid):
        boards.board(mini, "mini", actor=PUBLIC, limit=0)


def test_the_whole_board_read_in_one_pass_is_its_pages_read_row_by_row(
        mini: Store, board_of_four: dict[str, str]) -> None:
    """The whole board joins each entry's latest handle, note and digest once; a page reads them an
    entry at a time: the same entries, handles, notes and digests, in the same order (the latest
    row of each stream wins; a withdrawn note is none)."""
    from assay.service import accounts, submissions

    submissions.note(mini, board_of_four["hasty"], "first note", actor=OPERATOR)
    submissions.note(mini, board_of_four["hasty"], "second — the latest", actor=OPERATOR)
    submissions.note(mini, board_of_four["idle"], "withdrawn", actor=OPERATOR)
    submissions.note(mini, board_of_four["idle"], "", actor=OPERATOR)
    accounts.set_handle(mini, "carol", "Carol-2", actor=OPERATOR)
    accounts.set_handle(mini, "carol", "Carol-3", actor=OPERATOR)
    whole = boards.board(mini, "mini", actor=PUBLIC)["entries"]
    paged: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = boards.board(mini, "mini", actor=PUBLIC, limit=3, cursor=cursor)
        paged += page["entries"]
        if (cursor := page["page"]["next_cursor"]) is None:
            break
    assert whole == paged and len(whole) == 4
    by_id = {e["submission_id"]: e for e in whole}
    assert by_id[board_of_four["hasty"]]["variance_note"] == "second — the latest"
    assert by_id[board_of_four["idle"]]["variance_note"] is None
    assert by_id[board_of_four["idle"]]["public_handle"] == "Carol-3"
    assert all(e["digest"] for e in whole)
    assert json.loads(boards.board_json(mini, "mini", actor=PUBLIC))["entries"] == whole


def test_recompute_rebuilds_from_the_rows_and_says_what_differed(mini: Store, board_of_four: dict[str, str]) -> None:
    before = boards.board_text(boards.board(mini, "mini", actor=PUBLIC))
    assert boards.recompute(mini, actor=OPERATOR) == {"entries": 4, "differences": []}
    sid = board_of_four["hasty"]
    with mini.engine.begin() as conn:  # the derived table tampered with (as its owner may)
        held = json.loads(conn.execute(sa.text("SELECT figures FROM entry_figures WHERE submission_id = :s"),
                                       {"s": sid}).scalar_one())
        conn.execute(sa.text("UPDATE entry_figures SET figures = :f WHERE submission_id = :s"),
                     {"f": json.dumps({**held, "pass_rate": 0.99}), "s": sid})
        conn.execute(sa.text("DELETE FROM entry_figures WHERE submission_id = :s"), {"s": board_of_four["idle"]})
    found = boards.recompute(mini, actor=OPERATOR)
    assert found["entries"] == 4
    assert {(d["submission_id"], d["field"]) for d in found["differences"]} == {
        (sid, "pass_rate"), (board_of_four["idle"], "*")}
    assert next(d for d in found["differences"] if d["field"] == "pass_rate")["stored"] == 0.99
    assert boards.board_text(boards.board(mini, "mini", actor=PUBLIC)) == before
    from assay.errors import Forbidden
    with pytest.raises(Forbidden):
        boards.recompute(mini, actor=PUBLIC)


def test_a_store_without_figures_or_with_another_methods_fills_them_on_first_read(
        mini: Store, board_of_four: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    before = boards.board_text(boards.board(mini, "mini", actor=PUBLIC))
    with mini.engine.begin() as conn:  # as a store upgraded to 0018 starts
        conn.execute(sa.text("DELETE FROM entry_figures"))
    boards._FIGURED.clear()
    assert boards.board_text(boards.board(mini, "mini", actor=PUBLIC)) == before
    assert len(_stored(mini)) == 4
    monkeypatch.setattr(figures_of, "METHOD", "figures/next")  # a method changed since they were stored
    boards._FIGURED.clear()
    boards.entry(mini, board_of_four["diligent"], actor=PUBLIC)
    assert {r["method"] for r in _stored(mini).values()} == {"figures/next"}


def _statements(store: Store, body: Any) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def listen(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        seen.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", listen)
    try:
        body()
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", listen)
    return seen


def _n_params(parameters: Any) -> int:
    if isinstance(parameters, dict):
        return len(parameters)
    if isinstance(parameters, list | tuple):
        return len(parameters) if not parameters or not isinstance(parameters[0], dict | list | tuple) else max(
            _n_params(p) for p in parameters)
    return 0


def test_reads_bind_no_parameter_per_entry_and_completion_reads_only_its_own_rows(
        mini: Store, board_of_four: dict[str, str]) -> None:
    boards.board(mini, "mini", actor=PUBLIC)  # the first read of a process checks for missing figures
    reads = _statements(mini, lambda: boards.board(mini, "mini", actor=PUBLIC))
    entry = _statements(mini, lambda: boards.entry(mini, board_of_four["idle"], actor=PUBLIC))
    assert not any("board_run_facts" in s for s, _ in entry)  # stored figures: nothing recomputed
    # completing one more submission executes the same statements on a board of four as of five
    account(mini, "erin", "Erin")
    account(mini, "fred", "Fred")
    fifth = _statements(mini, lambda: submit(mini, account="erin", publish=True))
    sixth = _statements(mini, lambda: submit(mini, account="fred", publish=True))
    assert len(fifth) == len(sixth)
    assert not any("WHERE board_run_facts.release_id" in s for s, _ in sixth)
    # the board of six is read with the same statements, binding as many parameters, as the board of four
    more = _statements(mini, lambda: boards.board(mini, "mini", actor=PUBLIC))
    assert [(s, _n_params(p)) for s, p in more] == [(s, _n_params(p)) for s, p in reads]
    assert len(boards.board(mini, "mini", actor=PUBLIC)["entries"]) == 6
