"""The registry of world kits, by the name a scenario's `kit` field uses."""

from __future__ import annotations

import difflib
from importlib import import_module

from assay.errors import UnknownName
from assay.located import unknown
from assay.worlds.base import Kit

#: kit name -> (module, class); a kit's module is imported when a scenario names it, so loading an
#: estate suite does not pay for the campaign kit's imports, nor the reverse.
KITS: dict[str, tuple[str, str]] = {
    "estate": ("assay.worlds.estate.kit", "EstateKit"),
    "campaign": ("assay.worlds.campaign.kit", "CampaignKit"),
}


def get_kit(name: str) -> Kit:
    if name not in KITS:
        close = difflib.get_close_matches(name, sorted(KITS), n=1)
        raise UnknownName(unknown("kit", name, KITS, shown=len(KITS)), "kit", nearest=close[0] if close else None)
    module, cls = KITS[name]
    return getattr(import_module(module), cls)()
