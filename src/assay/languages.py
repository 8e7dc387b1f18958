"""Language tags: one rule for every document that names a language. A leaf module (it imports
nothing of Assay's), so scenario documents and world kits (a campaign's `campaign_language`)
share it without importing each other's rooms."""

from __future__ import annotations

import langcodes


def bcp47(value: str) -> str:
    """The canonical form of a BCP-47 tag, or a refusal (ValueError, for pydantic validators).

    Canonical (langcodes' `standardize_tag`: case by subtag kind, deprecated and overlong codes
    replaced, a suppressed script dropped) so that `en`, `EN` and `ENG` are one language with
    one content hash, and `en-gb` is `en-GB`. An underscore (`en_GB`, a POSIX locale) is
    refused even though langcodes would read it: it is not BCP-47, and quietly accepting it
    would leave documents that other tools reject; the refusal names the tag that was meant.
    """
    if "_" in value:
        meant = _standard(value.replace("_", "-"))
        hint = f"; did you mean '{meant}'?" if meant is not None else ""
        raise ValueError(f"'{value}' is not a BCP-47 language tag{hint}")
    canonical = _standard(value)
    if canonical is None:
        raise ValueError(f"'{value}' is not a valid BCP-47 language tag")
    return canonical


def _standard(tag: str) -> str | None:
    try:
        return str(langcodes.standardize_tag(tag)) if langcodes.tag_is_valid(tag) else None
    except ValueError:  # langcodes' LanguageTagError
        return None
