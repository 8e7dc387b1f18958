"""Language tags: one rule for every document that names a language. A leaf module (it imports
nothing of Assay's), so scenario documents and world kits (a campaign's `campaign_language`)
share it without importing each other's rooms."""

from __future__ import annotations

#: The two-letter (ISO 639-1) codes that are canonical BCP-47 tags as they stand, so that the
#: common case (`en`, `pl`) is answered without importing langcodes, whose import compiles a regex
#: of every registered subtag (about 60 ms on every command that loads a suite). Everything else,
#: `EN` and `en-gb` included, goes to langcodes; a test holds each code here to langcodes' answer.
_CANONICAL_AS_WRITTEN = frozenset("""
    aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy
    da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu
    hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb
    lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om
    or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw
    ta te tg th ti tk tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
""".split())


def bcp47(value: str) -> str:
    """The canonical form of a BCP-47 tag, or a refusal (ValueError, for pydantic validators).

    Canonical (langcodes' `standardize_tag`: case by subtag kind, deprecated and overlong codes
    replaced, a suppressed script dropped) so that `en`, `EN` and `ENG` are one language with
    one content hash, and `en-gb` is `en-GB`. An underscore (`en_GB`, a POSIX locale) is
    refused even though langcodes would read it: it is not BCP-47, and quietly accepting it
    would leave documents that other tools reject; the refusal names the tag that was meant.
    """
    if value in _CANONICAL_AS_WRITTEN:
        return value
    if "_" in value:
        meant = _standard(value.replace("_", "-"))
        hint = f"; did you mean '{meant}'?" if meant is not None else ""
        raise ValueError(f"'{value}' is not a BCP-47 language tag{hint}")
    canonical = _standard(value)
    if canonical is None:
        raise ValueError(f"'{value}' is not a valid BCP-47 language tag")
    return canonical


def _standard(tag: str) -> str | None:
    import langcodes

    try:
        return str(langcodes.standardize_tag(tag)) if langcodes.tag_is_valid(tag) else None
    except ValueError:  # langcodes' LanguageTagError
        return None
