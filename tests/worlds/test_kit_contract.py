"""The Kit and World protocols declare every hook a caller uses, and every kit answers each one —
its own or `KitDefaults`' — so the service never probes a kit with `getattr`."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from assay.worlds import base
from assay.worlds.kits import KITS, get_kit

SRC = Path(__file__).resolve().parents[2] / "src" / "assay"


def _declared(protocol: type) -> set[str]:
    members = set(getattr(protocol, "__annotations__", {}))
    members |= {n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")}
    return members


@pytest.mark.parametrize("name", sorted(KITS))
def test_every_kit_answers_every_declared_hook(name: str) -> None:
    kit = get_kit(name)
    missing = sorted(m for m in _declared(base.Kit) if not hasattr(kit, m))
    assert not missing, f"kit {name} lacks {missing}"
    assert isinstance(kit.participation_floor, tuple) and isinstance(kit.worded, bool)


def test_the_defaults_cover_every_optional_hook() -> None:
    hooks = {"participation_floor", "worded", "run_options", "replay_options", "resume_options",
             "observed_facilitators"}
    assert hooks <= _declared(base.Kit)
    assert hooks <= set(dir(base.KitDefaults))
    assert "blocking" in _declared(base.World) and base.WorldDefaults.blocking is False
    plain = base.KitDefaults()
    assert plain.run_options({"spec": "openai:m"}) is None and plain.observed_facilitators([]) == []


def test_no_caller_probes_a_declared_hook_with_getattr() -> None:
    """Outside `worlds/` (whose facilitators have a `blocking` of their own), nothing asks a kit or a
    world whether it has a hook."""
    hooks = _declared(base.Kit) | _declared(base.World)
    probes = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "worlds"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in hooks):
                probes.append(f"{path.relative_to(SRC)}:{node.lineno} {node.func.id}(…, {node.args[1].value!r})")
    assert not probes, "\n".join(probes)
