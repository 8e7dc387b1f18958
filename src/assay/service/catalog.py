"""The index of suites: which suites an actor finds listed, one entry per suite.

Listing is narrower than resolving (`releases.find_release`): an unlisted version opens by its
URL but is not in the public index. Agents are the exception: an agent plays the runs of
submissions its account made, which may be to an unlisted suite, so its index lists public and
unlisted suites. Internal suites are listed to the staff alone. Each entry is the suite's latest
version among those listed to the actor.
"""

from __future__ import annotations

from assay.service import releases
from assay.service.actors import Actor, is_listed
from assay.store.releases_repo import ReleasesRepo
from assay.store.db import Store


def suites(store: Store, *, actor: Actor) -> list[releases.SummaryView]:
    """One entry per suite the actor's index lists (its latest listed version), by key."""
    latest: dict[str, releases.ReleaseRow] = {}
    for release in ReleasesRepo(store).releases():
        if not is_listed(actor, release):
            continue
        held = latest.get(release["suite_key"])
        if held is None or releases.version_key(release["version"]) > releases.version_key(held["version"]):
            latest[release["suite_key"]] = release
    return [releases.summary_view(latest[key]) for key in sorted(latest)]
