"""SQLite's group commit (issue 26): write transactions that wait at the same moment are committed
together (`Store.batched`), each body in a savepoint of its own, each result handed back to its own
thread once the group committed, and a body that is refused undoes only its own writes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import Store, open_store
from assay.store import handle as store_repo


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    opened = open_store(f"sqlite:///{tmp_path}/group.db")
    with opened.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scratch (k TEXT PRIMARY KEY)")
    try:
        yield opened
    finally:
        opened.close()


def _insert(key: str) -> Any:
    def body(conn: sa.Connection) -> str:
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES (?)", (key,))
        return f"stored {key}"
    return body


def _keys(store: Store) -> set[str]:
    with store.engine.connect() as conn:
        return {r[0] for r in conn.exec_driver_sql("SELECT k FROM scratch")}


def test_writes_that_wait_together_are_committed_together_each_told_its_own_outcome(store: Store) -> None:
    commits: list[int] = []
    sa.event.listen(store.engine, "commit", lambda conn: commits.append(1))
    group = store_repo._group(store.engine)
    assert group is not None
    lock = store_repo._writer_lock(store.engine)
    assert lock is not None
    bodies = {"a": _insert("a"), "b": _insert("b"), "c": _insert("c"), "d": _insert("d"),
              "dup": _insert("a")}  # refused: "a" is taken by then (the leader's "a" commits first)
    outcomes: dict[str, Any] = {}

    def write(name: str) -> None:
        try:
            outcomes[name] = store.batched(bodies[name])
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[name] = exc

    with lock:  # the disk is busy: the first writer leads and waits; the others queue behind it
        first = threading.Thread(target=write, args=("a",))
        first.start()
        while not group.leading:
            time.sleep(0.001)
        others = [threading.Thread(target=write, args=(n,)) for n in ("b", "c", "dup", "d")]
        for t in others:
            t.start()
        while len(group.queue) < 4:
            time.sleep(0.001)
    for t in [first, *others]:
        t.join(30)
    assert len(commits) == 2  # "a" alone (it led before the others came), then the four together
    assert outcomes["a"] == "stored a" and outcomes["b"] == "stored b" and outcomes["d"] == "stored d"
    assert isinstance(outcomes["dup"], sa.exc.IntegrityError)  # raised in its own thread only
    assert _keys(store) == {"a", "b", "c", "d"}


def test_with_group_commit_off_each_write_commits_alone(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(store_repo.GROUP_COMMIT_ENV, "0")
    assert store_repo._group(store.engine) is None
    commits: list[int] = []
    sa.event.listen(store.engine, "commit", lambda conn: commits.append(1))
    threads = [threading.Thread(target=store.batched, args=(_insert(k),)) for k in "wxyz"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(commits) == 4 and _keys(store) == set("wxyz")
