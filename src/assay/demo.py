"""`make demo`: the forge suite played by every reference agent, three trials each, one table."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import sys

from rich.console import Console

from assay.agents.reference import REFERENCE_AGENTS
from assay.errors import BadInput
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store.db import open_store
from assay.ui import print_summary, progress_bar


def main() -> int:
    console = Console(width=None if sys.stdout.isatty() else 120)
    try:
        store = open_store()
        bundle = resolve_suite("forge")
        results = []
        for name in REFERENCE_AGENTS:
            with progress_bar(len(bundle.scenarios) * 3, f"forge · reference:{name}") as advance:
                batch = run_suite(bundle, agent_spec=f"reference:{name}", trials=3, workers=4, progress=advance, store=store)
            results.append(results_json(store, batch.batch_id, actor=OPERATOR))
    except BadInput as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        return 2
    print_summary(console, results)
    console.print("pass rate = passed trials / planned trials; consistency = share of cases whose trials all agree;")
    console.print("false success = claimed success on a run that did not pass; pass^k = chance k trials of a case all pass.")
    console.print(f"results stored in {store.url} — try `.venv/bin/assay debrief RUN_ID` with a run id from "
                  "`.venv/bin/assay results`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
