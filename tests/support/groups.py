"""xdist groups that hold under pytest 9: the group set into the node id, and a guard that proves it.

`pytest --dist loadgroup` sends the tests marked `@pytest.mark.xdist_group(NAME)` to one worker by
reading the group from the end of each node id (`path::test@NAME`). pytest-xdist 3.8 writes it to
`item._nodeid`, which pytest 9 no longer reads (the id is `item._id`, a `NodeId`): the mark reached
no node id, so every worker that ran a browser or a Ray test started its own Chromium or Ray.
`tests/conftest.py` sets the group itself (`with_group`), and `first_in_run` fails a second worker
that starts what its group keeps to one: a group that stops being honoured fails, loudly.
"""

from __future__ import annotations

import fcntl
import os

import pytest
from _pytest.nodeid import NodeId


def group_of(item: pytest.Item) -> str | None:
    """The item's xdist group (as xdist names it: its groups sorted, joined by `_`), or None."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) or None


def with_group(item: pytest.Item) -> None:
    """Put the item's group at the end of its node id, as `--dist loadgroup` reads it (once)."""
    group = group_of(item)
    if group is not None and not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")  # noqa: SLF001 - the one place a node id is kept


def loadgroup(config: pytest.Config) -> bool:
    """True on an xdist worker of a `--dist loadgroup` run (where groups must hold)."""
    return hasattr(config, "workerinput") and bool(getattr(config.option, "loadgroup", False))


def first_in_run(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory, what: str) -> None:
    """Under `--dist loadgroup`, fail when another worker of this run already started `what` (its
    group was split across workers); record this worker otherwise. A no-op in any other run.

    The workers of one run share the parent of their base temporary directories."""
    if not loadgroup(config):
        return
    worker = str(config.workerinput["workerid"])  # type: ignore[attr-defined]
    ledger = tmp_path_factory.getbasetemp().parent / f"started-{what}"
    with ledger.open("a+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        others = {line.strip() for line in file if line.strip()} - {worker}
        file.write(worker + os.linesep)
    if others:
        pytest.fail(f"{what} started on {worker} and on {', '.join(sorted(others))}: its xdist group was split "
                    "across workers (see tests/support/groups.py)", pytrace=False)
