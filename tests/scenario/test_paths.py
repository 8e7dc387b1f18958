"""Paths name keys, dots and all: one parser (`split_path`), its inverse (`format_path`), and a
predicate model, `lookup` and `paths()` that agree with them.

- A key holding a dot, a backslash or a space writes it escaped with a backslash
  (`files./var/log/app\\.log`); an unescaped space, an empty key or a stray trailing backslash is
  not a path, refused by the predicate model and by `split_path` alike.
- `split_path(format_path(keys)) == keys` for any keys, and a path the model accepts is one
  `split_path` parses (the model validates with the same regular expression engine).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from assay.scenario.predicates import (
    CountOf,
    ValueAt,
    format_path,
    holds,
    lookup,
    missing_paths,
    split_path,
)

KEYS = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6)


@given(KEYS)
def test_a_formatted_path_parses_back_to_its_keys(keys: list[str]) -> None:
    path = format_path(keys)
    assert split_path(path) == tuple(keys)
    assert ValueAt(path=path, exists=True).paths() == [path]  # the model accepts every formatted path


@given(st.text(max_size=30))
def test_the_model_and_the_parser_accept_the_same_paths(text: str) -> None:
    try:
        keys = split_path(text)
    except ValueError:
        with pytest.raises(ValidationError):
            ValueAt(path=text, exists=True)
        return
    assert ValueAt(path=text, exists=True).path == text
    assert split_path(format_path(keys)) == keys


@given(KEYS, st.integers())
def test_lookup_follows_the_keys_a_formatted_path_names(keys: list[str], value: int) -> None:
    state: dict = {}
    node = state
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    path = format_path(keys)
    assert lookup(state, path) == value
    assert holds(ValueAt(path=path, equals=value), state)
    assert missing_paths(ValueAt(path=path, equals=value), state) == []


@pytest.mark.parametrize(("path", "keys"), [
    ("hosts.web-02.isolated", ("hosts", "web-02", "isolated")),
    (r"files./var/log/app\.log.size", ("files", "/var/log/app.log", "size")),
    (r"a\\.b", ("a\\", "b")),
    (r"a\\\.b", ("a\\.b",)),
    (r"my\ file.x", ("my file", "x")),
    ("przełęcz.met", ("przełęcz", "met")),
])
def test_escapes_read_as_documented(path: str, keys: tuple[str, ...]) -> None:
    assert split_path(path) == keys


@pytest.mark.parametrize("path", ["a..b", ".a", "a.", "a b", "a\\", "", "a.\\"])
def test_what_is_not_a_path_is_refused_by_both(path: str) -> None:
    with pytest.raises(ValueError, match="is not a path"):
        split_path(path)
    with pytest.raises(ValidationError):
        ValueAt(path=path, exists=True)
    with pytest.raises(ValidationError):
        CountOf(count=path, at_least=1)


def test_a_file_name_with_dots_is_checked_through_its_escaped_key() -> None:
    state = {"files": {"/var/log/app.log.gz": 3}}
    escaped = ValueAt(path=r"files./var/log/app\.log\.gz", at_least=3)
    split = ValueAt(path="files./var/log/app.log.gz", at_least=3)
    assert holds(escaped, state) and not holds(split, state)
    assert missing_paths(split, state) == ["files./var/log/app.log.gz"]
    assert escaped.roots() == {"files"}
