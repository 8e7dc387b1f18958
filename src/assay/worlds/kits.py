"""The registry of world kits, by the name a scenario's `kit` field uses."""

from __future__ import annotations

from assay.errors import BadInput
from assay.worlds.base import Kit


def get_kit(name: str) -> Kit:
    from assay.worlds.campaign.kit import CampaignKit
    from assay.worlds.estate.kit import EstateKit

    kits: dict[str, Kit] = {"estate": EstateKit(), "campaign": CampaignKit()}
    if name not in kits:
        raise BadInput(f"unknown kit '{name}' (known: {', '.join(sorted(kits))})", "kit")
    return kits[name]
