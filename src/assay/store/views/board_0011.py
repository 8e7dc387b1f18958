"""The board views as revision 0011 creates them: 0005's, with unlisted entries kept off the list.

A bring-your-own submission may be published *unlisted* (`unlisted_submissions`): it is reachable
by its submission id and never listed on the public board. `board_submission_facts` gains `listed`
(0 for such a submission), `board_entries` keeps only listed entries, and `board_unlisted_entries`
holds the published, complete, handled entries that are not listed, unranked, in the same shape.

Derived from `board_0005` by named substitutions, each checked to apply as often as expected, so the
difference between the two generations is this file and nothing else.
"""

from __future__ import annotations

from assay.store.views import board_0005
from assay.store.views.board_0002 import _SUBMISSION_COLUMNS
from assay.store.views.derive import derive

_PUBLISHED = "f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete'"

#: view name -> (old, new, how many times old occurs in 0005's text of that view)
_SUBSTITUTIONS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "board_submission_facts": (
        ("       ELSE 0 END AS measurement_era_is_current\nFROM submissions s\n",
         "       ELSE 0 END AS measurement_era_is_current,\n"
         "  CASE WHEN ul.submission_id IS NULL THEN 1 ELSE 0 END AS listed\nFROM submissions s\n", 1),
        ("LEFT JOIN current_era ce ON 1 = 1\n",
         "LEFT JOIN current_era ce ON 1 = 1\nLEFT JOIN unlisted_submissions ul ON ul.submission_id = s.id\n", 1),
    ),
    "board_entries": ((f"WHERE {_PUBLISHED}\n", f"WHERE {_PUBLISHED} AND f.listed = 1\n", 1),),
}

# Published but not listed: reachable by id only. Never ranked (only platform entries are, and an
# unlisted entry is bring-your-own), so its rank is NULL; the columns are board_entries'.
_BOARD_UNLISTED_ENTRIES = f"""
SELECT
  {", ".join(f"f.{c} AS {c}" for c in _SUBMISSION_COLUMNS)},
  CAST(NULL AS INTEGER) AS rank
FROM board_submission_facts f
WHERE {_PUBLISHED} AND f.listed = 0
"""


def _views() -> tuple[tuple[str, str], ...]:
    derived: list[tuple[str, str]] = []
    for name, body in derive("board_0011", board_0005.VIEWS, _SUBSTITUTIONS):
        derived.append((name, body))
        if name == "board_entries":
            derived.append(("board_unlisted_entries", _BOARD_UNLISTED_ENTRIES))
    return tuple(derived)


VIEWS: tuple[tuple[str, str], ...] = _views()
