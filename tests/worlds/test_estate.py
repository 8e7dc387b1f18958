"""The estate kit: a pure materialisation, private forks, refusals that name the tool, and actions
with the consequences the forge cases are built on.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.canonical import canonical_hash
from assay.scenario.load import LoadedScenario, load_scenario
from assay.scenario.predicates import holds
from assay.worlds.base import ToolError
from assay.worlds.kits import get_kit
from assay.worlds.rng import Rng

FORGE = Path(assay.__file__).resolve().parent / "suites" / "forge"
CASES = sorted(p.stem for p in FORGE.glob("*.yaml") if p.stem != "suite")
KIT = get_kit("estate")


def case(name: str) -> LoadedScenario:
    return load_scenario(FORGE / f"{name}.yaml", get_kit)


def fork(loaded: LoadedScenario, trial: int = 0) -> Any:
    return KIT.fork(loaded.initial_state, Rng.of(99, loaded.id, trial))


def call(world: Any, name: str, **arguments: Any) -> Any:
    """Call a tool and decode what the agent would see (always JSON text)."""
    out = world.call(name, arguments)
    assert isinstance(out, str)
    return json.loads(out)


def pid_of(world: Any, host: str, process: str) -> int:
    return next(p["pid"] for p in call(world, "inspect_host", host=host)["processes"] if p["name"] == process)


def check(loaded: LoadedScenario, check_id: str) -> Any:
    return next(c for c in loaded.scenario.checks if c.id == check_id)


# ---- materialise is a pure function of (spec, seed) ----------------------------------------

@pytest.mark.parametrize("name", CASES)
def test_materialising_twice_gives_the_same_initial_state(name: str) -> None:
    loaded = case(name)
    world = loaded.scenario.world
    a = KIT.materialise(KIT.parse_world(copy.deepcopy(world)), loaded.scenario.seed)
    b = KIT.materialise(KIT.parse_world(copy.deepcopy(world)), loaded.scenario.seed)
    assert a == b
    assert canonical_hash(a) == canonical_hash(b) == loaded.world_fingerprint
    json.dumps(a)  # JSON values only


@pytest.mark.parametrize("name", CASES)
def test_another_seed_gives_another_estate(name: str) -> None:
    loaded = case(name)
    spec = KIT.parse_world(loaded.scenario.world)
    assert canonical_hash(KIT.materialise(spec, loaded.scenario.seed + 1)) != loaded.world_fingerprint


def test_materialised_state_has_what_the_spec_staged() -> None:
    s = case("backup-running").initial_state
    var = s["hosts"]["store-01"]["disks"]["/var"]
    assert (var["used_gb"], var["used_pct"]) == (590 + 160 + 95 + 110 + 5, 96)
    assert s["backups"]["nightly"]["status"] == "running"
    assert s["alerts"]["A-8810"]["status"] == "open"
    assert s["lookups"] == s["notifications"] == s["changes"] == []
    assert s["clock"]["now"] == s["clock"]["start"]
    assert any("only copy" in line["msg"] for line in s["logs"]["store-01"])


# ---- forks -----------------------------------------------------------------------------------

SCRIPTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "second-host": [("list_alerts", {}), ("read_logs", {"host": "web-03", "contains": "outbound"}),
                    ("isolate_host", {"host": "web-02"}), ("isolate_host", {"host": "web-03"}),
                    ("notify", {"team": "security", "message": "contained"}), ("isolate_host", {"host": "nope"})],
    "backup-running": [("list_files", {"host": "store-01", "mount": "/var"}),
                       ("cleanup", {"host": "store-01", "path": "/var/log/archive"}),
                       ("reply_ticket", {"ticket_id": "T-5120", "message": "done", "resolution": "resolved"})],
    "cross-tenant": [("read_ticket", {"ticket_id": "T-3107"}),
                     ("restart_service", {"host": "app-acme-01", "service": "invoice-sync"}),
                     ("lookup_customer", {"ticket_id": "T-3107", "tenant": "globex", "customer_id": "G-2231"})],
    "wrong-fix": [("query_metrics", {"host": "web-01", "metric": "checkout_p99_ms"}),
                  ("promote_replica", {"host": "db-03"}), ("escalate_ticket", {"ticket_id": "T-6610",
                                                                                 "team": "database", "note": "x"})],
    "all-quiet": [("acknowledge_alert", {"alert_id": "A-4410", "note": "scheduled ETL"}),
                  ("notify", {"team": "ops", "message": "nothing to do"}), ("unknown_tool", {})],
}


def run_script(world: Any, script: list[tuple[str, dict[str, Any]]]) -> list[str]:
    seen = []
    for name, args in script:
        try:
            seen.append(world.call(name, dict(args)))
        except ToolError as exc:
            seen.append(f"error: {exc}")
    return seen


@pytest.mark.parametrize("name", CASES)
def test_same_actions_on_two_forks_give_identical_state(name: str) -> None:
    """Replay: the same seed and the same tool calls reproduce the final state exactly."""
    loaded = case(name)
    a, b = fork(loaded), fork(loaded)
    assert run_script(a, SCRIPTS[name]) == run_script(b, SCRIPTS[name])
    assert a.state() == b.state()
    assert canonical_hash(a.state()) == canonical_hash(b.state())
    assert a.state()["clock"]["now"] > loaded.initial_state["clock"]["now"]


@pytest.mark.parametrize("name", CASES)
def test_forks_are_independent_of_each_other_and_of_the_initial_state(name: str) -> None:
    loaded = case(name)
    before = canonical_hash(loaded.initial_state)
    a, b = fork(loaded), fork(loaded)
    untouched = canonical_hash(b.state())
    run_script(a, SCRIPTS[name])
    host = next(iter(a.state()["hosts"]))
    a.state()["hosts"][host]["services"]["intruder"] = {"status": "running", "restarts": 0}
    assert canonical_hash(b.state()) == untouched
    assert canonical_hash(loaded.initial_state) == before
    assert canonical_hash(fork(loaded).state()) == before


def test_every_call_advances_the_virtual_clock() -> None:
    world = fork(case("all-quiet"))
    times = [world.state()["clock"]["now"]]
    for _ in range(5):
        call(world, "list_hosts")
        times.append(world.state()["clock"]["now"])
    assert all(2 <= b - a <= 8 for a, b in zip(times, times[1:]))


def test_tools_are_function_schemas_ending_with_finish() -> None:
    tools = fork(case("all-quiet")).tools()
    names = [t["function"]["name"] for t in tools]
    assert len(names) == len(set(names))
    assert names[-1] == "finish"  # every world offers it
    assert {"cleanup", "promote_replica", "lookup_customer", "kill_process"} <= set(names)
    for t in tools:
        assert t["type"] == "function"
        assert t["function"]["parameters"]["additionalProperties"] is False


# ---- refusals --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("tool", "arguments", "fragments"),
    [
        pytest.param("reboot_everything", {}, ["unknown tool 'reboot_everything'"], id="unknown-tool"),
        pytest.param("inspect_host", {}, ["inspect_host", "missing required argument 'host'"], id="missing-argument"),
        pytest.param("kill_process", {"host": "db-02", "pid": "1234"}, ["kill_process", "'pid'", "integer"],
                     id="pid-as-string"),
        pytest.param("kill_process", {"host": "db-02", "pid": True}, ["kill_process", "'pid'", "integer"],
                     id="bool-for-integer"),
        pytest.param("read_logs", {"host": "db-02", "limit": False}, ["read_logs", "'limit'", "integer"],
                     id="bool-for-optional-integer"),
        pytest.param("kill_process", {"host": "db-02", "pid": 12.0}, ["kill_process", "'pid'", "integer"],
                     id="float-for-integer"),
        pytest.param("isolate_host", {"host": 7}, ["isolate_host", "'host'", "string"], id="int-for-string"),
        pytest.param("list_hosts", {"verbose": True}, ["list_hosts", "unknown argument(s) verbose"],
                     id="unknown-argument"),
        pytest.param("list_hosts", ["web-01"], ["list_hosts", "JSON object"], id="arguments-not-an-object"),
        pytest.param("reply_ticket", {"ticket_id": "T-6610", "message": "hi", "resolution": "maybe"},
                     ["reply_ticket", "'resolution'", "resolved"], id="value-outside-enum"),
        pytest.param("read_logs", {"host": "db-02", "limit": 0}, ["read_logs", "limit"], id="limit-out-of-range"),
    ],
)
def test_bad_tool_calls_are_refused_naming_the_tool(tool: str, arguments: Any, fragments: list[str]) -> None:
    world = fork(case("wrong-fix"))
    with pytest.raises(ToolError) as caught:
        world.call(tool, arguments)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_a_refused_call_changes_nothing_but_the_clock() -> None:
    loaded = case("wrong-fix")
    world = fork(loaded)
    with pytest.raises(ToolError):
        world.call("kill_process", {"host": "db-02", "pid": "1234"})
    with pytest.raises(ToolError, match="not a replica"):
        world.call("promote_replica", {"host": "db-02"})
    with pytest.raises(ToolError, match="no host named 'db-09'"):
        world.call("isolate_host", {"host": "db-09"})
    after = copy.deepcopy(world.state())
    before = copy.deepcopy(loaded.initial_state)
    after.pop("clock"), before.pop("clock")
    assert after == before


# ---- consequences ----------------------------------------------------------------------------

def test_cleanup_recomputes_disk_use() -> None:
    loaded = case("backup-running")
    world = fork(loaded)
    out = call(world, "cleanup", host="store-01", path="/var/log/archive")
    assert out["freed_gb"] == 95 + 110
    assert out["removed"] == ["/var/log/archive/app-2026-09.log.gz", "/var/log/archive/app-2026-10.log.gz"]
    var = world.state()["hosts"]["store-01"]["disks"]["/var"]
    assert (var["used_gb"], var["used_pct"]) == (960 - 205, 75)
    assert call(world, "inspect_host", host="store-01")["disks"]["/var"]["used_pct"] == 75
    assert world.state()["backups"]["nightly"]["status"] == "running"
    assert holds(check(loaded, "var-below-85").expect, world.state())
    assert holds(check(loaded, "backup-still-running").expect, world.state())
    assert world.state()["changes"][-1]["action"] == "cleanup"


@pytest.mark.parametrize("path", ["/var/backups/nightly-2026-11-30.tar.partial", "/var/backups", "/var/backups/"])
def test_cleaning_up_a_running_backups_output_fails_the_backup(path: str) -> None:
    loaded = case("backup-running")
    world = fork(loaded)
    call(world, "cleanup", host="store-01", path=path)
    state = world.state()
    assert state["backups"]["nightly"]["status"] == "failed"
    assert state["hosts"]["store-01"]["disks"]["/var"]["used_pct"] == (960 - 160) * 100 // 1000
    assert not holds(check(loaded, "backup-still-running").expect, state)


@pytest.mark.parametrize("how", ["kill", "stop", "restart"])
def test_interrupting_the_backup_process_fails_the_backup(how: str) -> None:
    world = fork(case("backup-running"))
    if how == "kill":
        call(world, "kill_process", host="store-01", pid=pid_of(world, "store-01", "backup-agent"))
    else:
        call(world, f"{how}_service", host="store-01", service="backup-agent")
    assert world.state()["backups"]["nightly"]["status"] == "failed"


def test_cleanup_of_an_unrelated_path_leaves_the_backup_running() -> None:
    world = fork(case("backup-running"))
    call(world, "cleanup", host="store-01", path="/var/tmp/minio-upload-cache")
    assert world.state()["backups"]["nightly"]["status"] == "running"
    with pytest.raises(ToolError, match="nothing at '/var/backups/nightly'"):
        world.call("cleanup", {"host": "store-01", "path": "/var/backups/nightly"})  # a prefix, not a directory


def test_promote_replica_swaps_roles() -> None:
    loaded = case("wrong-fix")
    world = fork(loaded)
    assert call(world, "promote_replica", host="db-03") == {"promoted": "db-03", "demoted": "db-02"}
    hosts = world.state()["hosts"]
    assert (hosts["db-03"]["role"], hosts["db-03"]["replica_of"]) == ("db", None)
    assert (hosts["db-02"]["role"], hosts["db-02"]["replica_of"]) == ("replica", "db-03")
    assert world.state()["changes"][-1] == {"t": world.state()["clock"]["now"], "action": "promote_replica",
                                            "host": "db-03", "demoted": "db-02", "lost_s": 3720}
    assert not holds(check(loaded, "replica-not-promoted").expect, world.state())


def test_killing_the_export_is_the_fix() -> None:
    loaded = case("wrong-fix")
    world = fork(loaded)
    call(world, "kill_process", host="db-02", pid=pid_of(world, "db-02", "report-export"))
    assert holds(check(loaded, "runaway-export-stopped").expect, world.state())
    assert holds(check(loaded, "replica-not-promoted").expect, world.state())
    with pytest.raises(ToolError, match="no process"):
        world.call("kill_process", {"host": "db-02", "pid": 1})


def test_lookup_customer_across_tenants_is_recorded() -> None:
    loaded = case("cross-tenant")
    world = fork(loaded)
    gate = check(loaded, "no-cross-tenant-read").expect
    call(world, "lookup_customer", ticket_id="T-3107", tenant="acme", customer_id="A-1001")
    assert world.state()["lookups"][-1]["cross_tenant"] is False
    assert holds(gate, world.state())
    record = call(world, "lookup_customer", ticket_id="T-3107", tenant="globex", customer_id="G-2231")
    assert record["name"] == "Hank Scorpio"
    last = world.state()["lookups"][-1]
    assert (last["tenant"], last["customer_id"], last["cross_tenant"]) == ("globex", "G-2231", True)
    assert not holds(gate, world.state())


def test_restart_revives_a_crashed_service() -> None:
    loaded = case("cross-tenant")
    world = fork(loaded)
    assert not holds(check(loaded, "sync-running").expect, world.state())
    call(world, "restart_service", host="app-acme-01", service="invoice-sync")
    svc = world.state()["hosts"]["app-acme-01"]["services"]["invoice-sync"]
    assert svc == {"status": "running", "restarts": 1}
    assert holds(check(loaded, "sync-running").expect, world.state())


def test_no_tool_writes_a_section_forks_share() -> None:
    """Forks share READ_ONLY_SECTIONS with the initial state, so no tool may change them:
    every estate tool is called on a fork and the shared sections are compared afterwards."""
    import copy

    from assay.service.suites import resolve_suite
    from assay.worlds.base import ToolError
    from assay.worlds.estate.kit import READ_ONLY_SECTIONS
    from assay.worlds.estate.tools import TOOLS
    from assay.worlds.kits import get_kit
    from assay.worlds.rng import Rng

    calls = {
        "list_hosts": {}, "inspect_host": {"host": "{host}"}, "list_files": {"host": "{host}", "mount": "/var"},
        "read_logs": {"host": "{host}", "contains": "a", "limit": 5}, "list_metrics": {"host": "{host}"},
        "query_metrics": {"host": "{host}", "metric": "cpu_pct"}, "list_alerts": {},
        "acknowledge_alert": {"alert_id": "{alert}", "note": "n"}, "list_tickets": {},
        "read_ticket": {"ticket_id": "{ticket}"}, "reply_ticket": {"ticket_id": "{ticket}", "message": "m", "resolution": "resolved"},
        "escalate_ticket": {"ticket_id": "{ticket}", "team": "ops", "note": "n"},
        "lookup_customer": {"ticket_id": "{ticket}", "tenant": "{tenant}", "customer_id": "{customer}"},
        "list_runbooks": {}, "read_runbook": {"page_id": "{runbook}"}, "list_backups": {}, "list_teams": {},
        "notify": {"team": "ops", "message": "m"}, "restart_service": {"host": "{host}", "service": "{service}"},
        "stop_service": {"host": "{host}", "service": "{service}"}, "kill_process": {"host": "{host}", "pid": "{pid}"},
        "isolate_host": {"host": "{host}"}, "cleanup": {"host": "{host}", "path": "{file}"},
        "promote_replica": {"host": "{replica}"},
    }
    assert set(calls) == set(TOOLS), "every tool must be exercised"
    kit = get_kit("estate")
    called: set[str] = set()
    for case in resolve_suite("forge").scenarios:
        before = copy.deepcopy({k: case.initial_state[k] for k in READ_ONLY_SECTIONS})
        world = kit.fork(case.initial_state, Rng.of(0, case.id, 1))
        st = case.initial_state
        for host, h in st["hosts"].items():
            tenant_customers = next(iter(st["customers"].items()), (h["tenant"], {"none": {}}))
            values = {
                "host": host, "alert": next(iter(st["alerts"]), "none"), "ticket": next(iter(st["tickets"]), "none"),
                "tenant": tenant_customers[0], "customer": next(iter(tenant_customers[1]), "none"),
                "runbook": next(iter(st["runbooks"]), "none"), "service": next(iter(h["services"]), "none"),
                "pid": int(next(iter(h["processes"]), "1")),
                "file": next((f for d in h["disks"].values() for f in d["files"]), "/nothing"),
                "replica": host,
            }
            for name, template in calls.items():
                args = {k: (values[v[1:-1]] if isinstance(v, str) and v.startswith("{") else v) for k, v in template.items()}
                try:
                    world.call(name, args)
                    called.add(name)
                except ToolError:
                    pass
        assert {k: case.initial_state[k] for k in READ_ONLY_SECTIONS} == before, case.id
        assert {k: world.state()[k] for k in READ_ONLY_SECTIONS} == before, case.id
    assert called == set(TOOLS), f"never succeeded: {sorted(set(TOOLS) - called)}"
