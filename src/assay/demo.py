"""`make demo`: forge 2.0 (55 cases from 11 families) played by every reference agent, three trials each,
one table."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import sys
from typing import Any

from assay.agents.reference import REFERENCE_AGENTS
from assay.errors import BadInput
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store.db import open_store
from assay.cli.ui import out, print_summary, progress_bar

#: The forge release the demo plays: 2.0, whose 55 cases × 3 trials can tell the agents apart.
VERSION = "2.0"


def main() -> int:
    console = out
    try:
        store = open_store()
        bundle = resolve_suite("forge", VERSION)
        results = []
        for name in REFERENCE_AGENTS:
            with progress_bar(len(bundle.scenarios) * 3, f"forge {VERSION} · reference:{name}") as advance:
                batch = run_suite(bundle, agent_spec=f"reference:{name}", trials=3, workers=4, progress=advance, store=store)
            results.append(results_json(store, batch.batch_id, actor=OPERATOR))
    except BadInput as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        return 2
    print_summary(console, results)
    console.print("pass rate = passed trials / planned trials; consistency = share of cases whose trials all agree;")
    console.print("false success = claimed success on a run that did not pass; pass^k = chance k trials of a case all pass.")
    console.print(f"results stored in {store.url}", markup=False, highlight=False, soft_wrap=True)
    for line in next_commands(results):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def next_commands(results: list[dict[str, Any]]) -> list[str]:
    """The three commands a newcomer runs next, with this demo's own ids: a batch's cases and run
    ids, the debrief of a run that claimed a success it did not earn, and its replay."""
    by_label = {r["agent"]["label"]: r for r in results}
    first = by_label.get("hasty", results[0])
    runs = [t for r in results for c in r["cases"] for t in c["trials"] if t["run_id"]]
    false = next((t for t in runs if t["false_success"]), None) or next((t for t in runs if not t["passed"]), runs[0])
    return ["next:",
            f"  .venv/bin/assay results {first['batch_id']}    # {first['agent']['label']}: each case, its run ids",
            f"  .venv/bin/assay debrief {false['run_id']}    # the hidden truth, every check, the claim",
            f"  .venv/bin/assay replay {false['run_id']}    # rebuild the world, re-apply its actions"]


if __name__ == "__main__":
    sys.exit(main())
