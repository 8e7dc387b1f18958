"""One CLI grammar: `-h` is `--help`, `--version` answers, flags show no value placeholder."""

from __future__ import annotations

import pytest

from assay import HARNESS_VERSION, __version__

from .test_cli import assay, ok


def test_version() -> None:
    result = ok(assay("--version", db_file=None))
    assert result.out.strip() == f"assay {__version__} ({HARNESS_VERSION})"


@pytest.mark.parametrize("command", [(), ("run",), ("resume",), ("submissions",), ("board",)])
def test_dash_h_is_help_and_flags_take_no_placeholder(command: tuple[str, ...]) -> None:
    short = ok(assay(*command, "-h", db_file=None))
    long = ok(assay(*command, "--help", db_file=None))
    assert short.out == long.out and "Usage: assay" in short.out
    assert "<bool>" not in short.out


@pytest.mark.parametrize(("url", "says"), [
    ("", "an empty URL names no store"),
    ("sqlite://", "an in-memory SQLite database is lost"),
    ("sqlite:///:memory:", "an in-memory SQLite database is lost"),
    ("mysql://user@host/db", "'mysql' is not supported (supported: sqlite, postgresql)"),
])
def test_a_store_url_that_keeps_nothing_or_is_not_supported_is_refused(url: str, says: str) -> None:
    for command in (("batches",), ("run", "forge", "--agent", "reference:idle", "--trials", "1")):
        result = assay(*command, "--db", url, db_file=None)
        assert result.code == 2, str(result)
        assert result.err.count("\n") == 1 and result.err.startswith("assay: error: --db")
        assert says in result.err
