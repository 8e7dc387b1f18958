"""The fast canonical-JSON path must be byte-for-byte RFC 8785, or defer to the reference."""

from __future__ import annotations

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from assay.canonical import SharedSections, _plain, canonical_bytes
from tests.support.strategies import examples

# Keys and strings drawn from the whole of Unicode (astral characters and escapes included),
# integers beyond 2^53, floats: every place where stdlib JSON and RFC 8785 could part ways.
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**60), max_value=2**60) | text | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(text, inner, max_size=5), max_leaves=30)


def _reference(value: object) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except Exception as exc:  # noqa: BLE001 - the reference refuses some values (e.g. huge ints)
        return type(exc)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=examples(400), deadline=None)
@given(json_values)
def test_fast_path_equals_rfc8785(value: object) -> None:
    expected = _reference(value)
    if isinstance(expected, bytes):
        assert canonical_bytes(value) == expected
    else:
        try:
            canonical_bytes(value)
        except Exception as exc:  # noqa: BLE001
            assert type(exc) is expected
        else:
            raise AssertionError("the fast path accepted a value RFC 8785 refuses")


def test_fast_path_is_taken_for_world_states() -> None:
    from assay.service.suites import resolve_suite

    for case in resolve_suite("forge").scenarios:
        assert _plain(case.initial_state), case.id


def test_values_that_need_the_reference() -> None:
    assert not _plain({"x": 1.5})
    assert not _plain({"\U0001f600": 1})       # astral key: UTF-16 order differs from code points
    assert not _plain([2**53])
    assert _plain({"é": ["ü", True, None, -3]})
    # the orderings really differ, so the guard matters
    assert canonical_bytes({"\U0001f600": 1, "\uffee": 2}) == rfc8785.dumps({"\U0001f600": 1, "\uffee": 2})


ascii_keys = st.text(alphabet=st.characters(max_codepoint=127), max_size=6)
small_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8)
objects = st.dictionaries(text | ascii_keys, small_values, max_size=5)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=examples(200), deadline=None)
@given(objects, objects, st.integers(min_value=0))
def test_shared_sections_encode_exactly_as_canonical_bytes(base: dict, own: dict, pick: int) -> None:
    """A value mixing the base's own sections (by identity) with new ones, and the same value
    encoded a second time from the cache, are both byte for byte `canonical_bytes`."""
    shared = [k for i, k in enumerate(sorted(base)) if pick >> i & 1]
    value = {**own, **{k: base[k] for k in shared}}
    if not isinstance(_reference(value), bytes):
        return
    encode = SharedSections(base)
    assert encode(value) == canonical_bytes(value)
    assert encode(value) == canonical_bytes(value)
    assert encode([value]) == canonical_bytes([value])


def test_shared_sections_never_serve_a_cached_section_for_a_different_object() -> None:
    base = {"logs": [1, 2], "hosts": {"a": 1}}
    encode = SharedSections(base)
    assert encode(base) == canonical_bytes(base)
    changed = {"logs": [1, 2, 3], "hosts": base["hosts"]}
    assert encode(changed) == b'{"hosts":{"a":1},"logs":[1,2,3]}'
