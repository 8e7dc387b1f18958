"""Every one-byte change to an export is caught (issue 12, item 6): flip one byte anywhere in one
file — a row's value, a quote, a brace, a newline, a manifest hash — and `assay verify` refuses the
export, naming the file it changed, and for a data file the line (a flip that breaks the JSON too)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.service import exports
from assay.service.actors import OPERATOR
from assay.service.releases import bootstrap
from assay.service.verify import verify
from assay.store import open_store

from ._support import populate
from tests.support.strategies import examples

pytestmark = pytest.mark.slow  # each builds and exports a populated store: left out of `pytest --pure`


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz")
    store = open_store(f"sqlite:///{root / 'assay.db'}")
    try:
        bootstrap(store)
        populate(store, academy=True)
        exports.export(store, root / "out", actor=OPERATOR)
    finally:
        store.close()
    assert verify(root / "out").ok
    yield root / "out"


def _files(root: Path) -> list[str]:
    """Every file of the export with at least one byte, the manifest included."""
    return sorted(p.name for p in root.iterdir() if p.stat().st_size > 0)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_one_byte_flipped_anywhere_is_caught_and_named(exported: Path, tmp_path_factory: pytest.TempPathFactory,
                                                           data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(_files(exported)), label="file")
    original = (exported / name).read_bytes()
    offset = data.draw(st.integers(0, len(original) - 1), label="offset")
    value = data.draw(st.integers(0, 255).filter(lambda b: b != original[offset]), label="new byte")
    target = tmp_path_factory.mktemp("flip") / "out"
    shutil.copytree(exported, target)
    flipped = bytearray(original)
    flipped[offset] = value
    (target / name).write_bytes(bytes(flipped))

    report = verify(target)

    assert not report.ok, (name, offset, value)
    assert report.finding is not None and report.finding.file == name, (name, offset, value, report.finding)
    if name != exports.MANIFEST:
        line = original.count(b"\n", 0, offset) + 1
        assert report.finding.line is not None and report.finding.line in (line, line + 1), report.finding
    shutil.rmtree(target.parent)


def test_a_flip_that_breaks_the_json_is_named_by_line(exported: Path, tmp_path: Path) -> None:
    target = tmp_path / "out"
    shutil.copytree(exported, target)
    data = (target / "runs.jsonl").read_bytes()
    at = data.index(b"\n", data.index(b"\n") + 1) + 1  # the first byte of line 3: its opening brace
    (target / "runs.jsonl").write_bytes(data[:at] + b"[" + data[at + 1:])
    finding = verify(target).finding
    assert finding is not None and (finding.file, finding.line) == ("runs.jsonl", 3)
    assert finding.problem.startswith("not JSON")
