"""The registry of world kits, by the name a scenario's `kit` field uses."""

from __future__ import annotations

from importlib import import_module

from assay.errors import BadInput
from assay.worlds.base import Kit

#: kit name -> (module, class); a kit's module is imported when a scenario names it, so loading an
#: estate suite does not pay for the campaign kit's imports, nor the reverse.
KITS: dict[str, tuple[str, str]] = {
    "estate": ("assay.worlds.estate.kit", "EstateKit"),
    "campaign": ("assay.worlds.campaign.kit", "CampaignKit"),
}


def get_kit(name: str) -> Kit:
    if name not in KITS:
        raise BadInput(f"unknown kit '{name}' (known: {', '.join(sorted(KITS))})", "kit")
    module, cls = KITS[name]
    return getattr(import_module(module), cls)()
