"""Hypothesis strategies shared by the property tests, made cheap where the library's own are costly."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st


def small_fractions(low: int, high: int, max_denominator: int) -> st.SearchStrategy[Fraction]:
    """Exactly the values of `st.fractions(low, high, max_denominator=...)` (a finite set: every n/d in
    [low, high] with d ≤ max_denominator), drawn from the list of them, simplest first so examples shrink
    toward 0 and small denominators. `st.fractions` builds strategies per draw: about 7x the cost of
    the draw here, which was most of the statistics tests' time, for the same values."""
    values = {Fraction(n, d) for d in range(1, max_denominator + 1) for n in range(low * d, high * d + 1)}
    return st.sampled_from(sorted(values, key=lambda f: (abs(f), f.denominator, f < 0)))


#: `pytest --hypothesis-profile thorough`: every property test at its full example count (registered
#: in tests/conftest.py). The default profile, `make test`'s, runs the costliest ones at `examples(n)`.
THOROUGH = "thorough"


def examples(n: int) -> int:
    """`n` examples under the thorough profile; otherwise a quarter of them, never fewer than 25.

    For the property tests whose examples are each costly (a store written, a world built, an
    export verified, a deep JSON value generated) and whose strategy is already as cheap as it gets:
    the example count is then the cost, and the thorough run keeps the full count."""
    from hypothesis import settings

    current = getattr(settings, "_current_profile", THOROUGH)  # unknown: the full count
    return n if current == THOROUGH else max(25, n // 4)
