"""The board's TypedDict read models name exactly the columns their queries return (issue 25).

A TypedDict is only a promise: the repository builds it from a row's mapping, so a column added to
(or dropped from) a table or a query without its model would go unseen by the type checker. These
tests hold each model to the columns of the query that fills it, in order.
"""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

from assay.store.board_repo import RunFacts, RunFactsRow
from assay.store.board_schema import run_sweeps, submissions, suite_releases, win_condition_outcomes
from assay.store.releases_repo import NewRelease, PinnedScenario, ReleaseRow, ReleasesRepo
from assay.store.submissions_repo import (
    NewSubmission,
    SubmissionInfo,
    SubmissionListing,
    SubmissionRow,
    SubmissionsRepo,
    Sweep,
    WinOutcome,
)


def _columns(query_columns: object) -> list[str]:
    return [c.name for c in query_columns]  # type: ignore[attr-defined]


def test_a_release_row_is_the_release_query_in_order() -> None:
    assert list(ReleaseRow.__annotations__) == _columns(ReleasesRepo._releases().selected_columns)
    assert set(ReleaseRow.__annotations__) == {c.name for c in suite_releases.c} | {"rubric"}


def test_a_new_release_is_the_row_without_id_and_time_with_the_rubric_to_pin() -> None:
    assert set(NewRelease.__annotations__) == (
        {c.name for c in suite_releases.c} - {"id", "created_at"}) | {"rubric", "rubric_hash"}


def test_a_pinned_scenario_names_the_pin_query() -> None:
    fields = [f.name for f in dataclasses.fields(PinnedScenario)]
    assert set(fields) == {"release_id", "ordinal", "case_id", "scenario_hash", "scenario_version", "title",
                           "document", "frozen_on", "language", "kit"}


def test_submission_rows_are_the_submissions_table() -> None:
    assert list(SubmissionRow.__annotations__) == [c.name for c in submissions.c]
    assert list(NewSubmission.__annotations__) == [c.name for c in submissions.c if c.name != "created_at"]


def test_submission_info_is_the_info_columns_in_order() -> None:
    info = _columns(SubmissionsRepo._info_columns())
    assert list(SubmissionInfo.__annotations__) == info
    assert list(get_type_hints(SubmissionListing)) == [*info, "suite_key", "version"]


def test_run_facts_row_is_run_facts_with_what_stats_decides() -> None:
    assert list(RunFactsRow.__annotations__) == [
        *(f.name for f in dataclasses.fields(RunFacts)), "scored", "gated", "included"]


def test_sweep_rows_are_their_tables_less_the_write_time() -> None:
    assert [f.name for f in dataclasses.fields(Sweep)] == [c.name for c in run_sweeps.c if c.name != "created_at"]
    assert [f.name for f in dataclasses.fields(WinOutcome)] == [c.name for c in win_condition_outcomes.c]
