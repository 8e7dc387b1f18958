"""Bradley–Terry (issue 12, item 5, the fit only): maximum-likelihood log-strengths from pairwise
preferences, a tie counting half a win to each side, centred so the fitted models average 0; a
model that never wins or never loses is reported as such, not as ±infinity; a seeded bootstrap.

The reference fit here is independent of the MM iterations under test: Newton–Raphson on the
log-likelihood (gradient and Hessian written out, one model's strength pinned to 0), solved by
Gaussian elimination. (scipy.optimize would do the same job; it is not a dependency.)
"""

from __future__ import annotations

import random
from math import exp, isfinite, log

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats.bt import bootstrap_intervals, bradley_terry, ranks, win_matrix

FAST = settings(max_examples=60, deadline=None)


def synthetic(strengths: dict[str, float], n: int, seed: int, tie_rate: float = 0.1) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    names = sorted(strengths)
    prefs = []
    for _ in range(n):
        a, b = rng.sample(names, 2)
        if rng.random() < tie_rate:
            prefs.append((a, b, "tie"))
            continue
        p_a = 1.0 / (1.0 + exp(strengths[b] - strengths[a]))
        prefs.append((a, b, "a" if rng.random() < p_a else "b"))
    return prefs


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    n = len(rhs)
    m = [row[:] + [rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]


def newton_fit(prefs: list[tuple[str, str, str]]) -> dict[str, float]:
    """The BT maximum-likelihood log-strengths by Newton–Raphson, centred to mean 0."""
    wins = win_matrix(prefs)
    names = sorted(wins)
    free = names[1:]  # names[0] pinned at 0
    theta = {n: 0.0 for n in names}
    for _ in range(100):
        grad = {n: 0.0 for n in free}
        hess = {(i, j): 0.0 for i in free for j in free}
        for x, i in enumerate(names):
            for j in names[x + 1:]:
                n_ij = wins[i].get(j, 0.0) + wins[j].get(i, 0.0)
                if n_ij == 0:
                    continue
                p = 1.0 / (1.0 + exp(theta[j] - theta[i]))
                g = wins[i].get(j, 0.0) - n_ij * p  # d loglik / d theta_i
                h = n_ij * p * (1 - p)
                if i in grad:
                    grad[i] += g
                    hess[i, i] -= h
                if j in grad:
                    grad[j] -= g
                    hess[j, j] -= h
                if i in grad and j in grad:
                    hess[i, j] += h
                    hess[j, i] += h
        step = _solve([[hess[i, j] for j in free] for i in free], [grad[i] for i in free])
        for name, s in zip(free, step):
            theta[name] -= s
        if max(abs(s) for s in step) < 1e-13:
            break
    centre = sum(theta.values()) / len(theta)
    return {n: v - centre for n, v in theta.items()}


TRUE = {"m1": 1.2, "m2": 0.6, "m3": 0.1, "m4": -0.3, "m5": -0.7, "m6": -0.9}


def test_strengths_equal_an_independent_maximum_likelihood_fit_on_a_large_sample() -> None:
    prefs = synthetic(TRUE, 30_000, seed=7)
    fit = bradley_terry(prefs)
    assert fit.converged and all(m.status == "fitted" for m in fit.models.values())
    reference = newton_fit(prefs)
    got = fit.strengths()
    assert max(abs(got[n] - reference[n]) for n in TRUE) < 0.02
    assert max(abs(got[n] - reference[n]) for n in TRUE) < 1e-6  # in fact to the convergence test


def test_strengths_recover_the_ones_that_generated_the_preferences() -> None:
    # Without ties (ties drawn regardless of strength would pull every strength towards 0).
    got = bradley_terry(synthetic(TRUE, 30_000, seed=8, tie_rate=0.0)).strengths()
    mean = sum(TRUE.values()) / len(TRUE)
    assert max(abs(got[n] - (TRUE[n] - mean)) for n in TRUE) < 0.08


def test_the_fit_satisfies_the_likelihood_equations() -> None:
    """At the MLE each model's wins equal its expected wins: W_i = Σ_j n_ij p_i / (p_i + p_j)."""
    prefs = synthetic(TRUE, 3_000, seed=3)
    got = bradley_terry(prefs).strengths()
    wins = win_matrix(prefs)
    for i in got:
        expected = sum((wins[i].get(j, 0) + wins[j].get(i, 0)) / (1 + exp(got[j] - got[i])) for j in got if j != i)
        assert sum(wins[i].values()) == pytest.approx(expected, abs=1e-6)


def test_strengths_are_centred_and_counted() -> None:
    prefs = [("a", "b", "a"), ("a", "b", "a"), ("b", "a", "a"), ("b", "c", "a"), ("c", "b", "a"), ("c", "a", "tie")]
    fit = bradley_terry(prefs)
    assert sum(fit.strengths().values()) == pytest.approx(0.0, abs=1e-9)
    assert {n: m.n_comparisons for n, m in fit.models.items()} == {"a": 4, "b": 5, "c": 3}
    assert {n: (m.wins, m.losses) for n, m in fit.models.items()} == {
        "a": (2.5, 1.5), "b": (2.0, 3.0), "c": (1.5, 1.5)}


def test_a_tie_is_half_a_win_to_each_side() -> None:
    ties = bradley_terry([("a", "b", "tie")] * 4)
    assert ties.strengths() == {"a": pytest.approx(0.0, abs=1e-9), "b": pytest.approx(0.0, abs=1e-9)}
    halves = bradley_terry([("a", "b", "a"), ("a", "b", "b")] * 2)
    assert ties.strengths() == pytest.approx(halves.strengths(), abs=1e-9)
    # 3 wins and 1 tie for a: 3.5 to 0.5, so p_a / p_b = 7 and a − b = log 7
    lopsided = bradley_terry([("a", "b", "a")] * 3 + [("b", "a", "tie")]).strengths()
    assert lopsided["a"] - lopsided["b"] == pytest.approx(log(7), abs=1e-8)


def test_never_winning_and_never_losing_are_reported_not_infinite() -> None:
    prefs = [("a", "b", "a"), ("b", "a", "a"), ("a", "c", "a"), ("c", "b", "b"), ("c", "a", "a"),
             ("loser", "a", "b"), ("loser", "c", "b"), ("champ", "a", "a"), ("b", "champ", "b")]
    fit = bradley_terry(prefs)
    assert fit.models["loser"].status == "never_wins" and fit.models["loser"].strength is None
    assert fit.models["champ"].status == "never_loses" and fit.models["champ"].strength is None
    assert set(fit.strengths()) == {"a", "b", "c"}
    assert all(isfinite(v) for v in fit.strengths().values())
    # The others' fit is the fit without the degenerate models: the likelihood's limit.
    rest = [p for p in prefs if "loser" not in p and "champ" not in p]
    assert fit.strengths() == pytest.approx(bradley_terry(rest).strengths(), abs=1e-8)


def test_a_model_whose_only_losses_were_to_a_champion_ranks_between_it_and_those_it_beat() -> None:
    prefs = [("champ", "x", "a"), ("x", "y", "a"), ("y", "z", "a"), ("z", "y", "a")]
    fit = bradley_terry(prefs)
    assert {n: m.status for n, m in fit.models.items()} == {
        "champ": "never_loses", "x": "separated", "y": "fitted", "z": "fitted"}
    assert fit.components == (("champ",), ("x",), ("y", "z"))
    assert ranks(fit, bootstrap_intervals(prefs, resamples=50)) == {"champ": 1, "x": 2, "y": 3, "z": 3}


def test_groups_that_never_meet_on_equal_terms_are_fitted_apart_and_ordered() -> None:
    """a and b beat c and d and never lost to them: two components, each fitted on its own scale
    (its preferences alone), the top one ranked above the other."""
    prefs = [("a", "b", "a"), ("b", "a", "a"), ("c", "d", "a"), ("d", "c", "a"), ("a", "c", "a"), ("b", "d", "a")]
    fit = bradley_terry(prefs)
    assert {m.status for m in fit.models.values()} == {"fitted"}
    assert fit.components == (("a", "b"), ("c", "d")) and fit.above == (frozenset(), frozenset({0}))
    assert fit.strengths() == pytest.approx({n: 0.0 for n in "abcd"}, abs=1e-9)
    assert ranks(fit, {}) == {"a": 1, "b": 1, "c": 3, "d": 3}


def test_the_issues_separate_bottom_pair_ranks_a_above_d() -> None:
    """A–B (each beat the other), A beat D, D–E: not one scale, but A (and B) above D (and E)."""
    prefs = [("A", "B", "a"), ("A", "B", "b"), ("A", "D", "a"), ("D", "E", "a"), ("D", "E", "b")] * 3
    fit = bradley_terry(prefs)
    found = ranks(fit, bootstrap_intervals(prefs, resamples=200))
    assert found["A"] < found["D"] and found["B"] < found["E"]
    assert found == {"A": 1, "B": 1, "D": 3, "E": 3}
    assert all(m.strength is not None for m in fit.models.values())


def test_components_that_never_meet_are_not_ordered() -> None:
    prefs = [("a", "b", "a"), ("b", "a", "a"), ("c", "d", "a"), ("d", "c", "a")]
    fit = bradley_terry(prefs)
    assert fit.above == (frozenset(), frozenset())
    assert ranks(fit, {}) == {n: 1 for n in "abcd"}


def test_bad_preferences_are_refused() -> None:
    with pytest.raises(ValueError):
        bradley_terry([("a", "a", "a")])
    with pytest.raises(ValueError):
        bradley_terry([("a", "b", "left")])


preferences = st.lists(
    st.tuples(st.sampled_from("abcde"), st.sampled_from("abcde"), st.sampled_from(("a", "b", "tie")))
    .filter(lambda p: p[0] != p[1]), min_size=1, max_size=40)


@FAST
@given(preferences)
def test_any_preferences_give_finite_centred_strengths_or_a_reason(prefs: list[tuple[str, str, str]]) -> None:
    fit = bradley_terry(prefs)
    assert fit.converged
    strengths = fit.strengths()
    assert all(isfinite(v) for v in strengths.values())
    if strengths:
        assert sum(strengths.values()) == pytest.approx(0.0, abs=1e-7)
    for m in fit.models.values():
        assert (m.strength is None) == (m.status != "fitted")
        if m.status == "never_wins":
            assert m.strength is None
    literal_never_wins = {n for n, m in fit.models.items() if m.wins == 0}
    assert all(fit.models[n].status == "never_wins" for n in literal_never_wins)


@FAST
@given(preferences, st.randoms(use_true_random=False))
def test_the_fit_ignores_order_and_which_side_is_a(prefs: list[tuple[str, str, str]], rnd) -> None:
    flipped = [(b, a, {"a": "b", "b": "a", "tie": "tie"}[o]) for a, b, o in prefs]
    rnd.shuffle(flipped)
    one, two = bradley_terry(prefs), bradley_terry(flipped)
    assert {n: m.status for n, m in one.models.items()} == {n: m.status for n, m in two.models.items()}
    assert one.strengths() == pytest.approx(two.strengths(), abs=1e-7)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_bootstrap_is_seeded_and_contains_the_fit() -> None:
    prefs = synthetic(TRUE, 2_000, seed=11)
    first = bootstrap_intervals(prefs, resamples=200, seed=5)
    assert first == bootstrap_intervals(prefs, resamples=200, seed=5)
    assert first != bootstrap_intervals(prefs, resamples=200, seed=6)
    fit = bradley_terry(prefs).strengths()
    for name, (lo, hi) in first.items():
        assert lo < fit[name] < hi
        assert hi - lo < 0.5
    # fewer comparisons, wider intervals
    small = bootstrap_intervals(prefs[:200], resamples=200, seed=5)
    assert all(small[n][1] - small[n][0] > first[n][1] - first[n][0] for n in first)


def test_the_bootstrap_puts_every_resample_in_one_frame() -> None:
    """The issue's example: A vs B 10–10, A beat C 9–1, B beat C 10–0. In a third of the resamples C
    never beats A and cannot be placed; re-centring those on A and B alone gave A [−0.347, 1.316].
    In the full fit's frame (A, B and C centred together) A reads about [0.156, 1.367]."""
    prefs = ([("A", "B", "a")] * 10 + [("A", "B", "b")] * 10 + [("A", "C", "a")] * 9 + [("A", "C", "b")]
             + [("B", "C", "a")] * 10)
    found = bootstrap_intervals(prefs)
    assert found["A"] == pytest.approx((0.156, 1.367), abs=0.01)
    fit = bradley_terry(prefs).strengths()
    for name, (lo, hi) in found.items():
        assert lo < fit[name] < hi


def test_a_frame_too_few_resamples_keep_has_no_interval() -> None:
    """A cycle held together by two single results: most resamples lose one of them and, with it,
    the scale. No interval then, never a made-up one."""
    prefs = [("a", "b", "a")] * 20 + [("b", "c", "a")] * 20 + [("c", "b", "a")] + [("b", "a", "a")]
    assert bradley_terry(prefs).models["a"].status == "fitted"
    assert bootstrap_intervals(prefs, resamples=300, seed=1) == {"a": None, "b": None, "c": None}


@FAST
@given(preferences)
def test_who_lost_every_comparison_ranks_below_everyone_it_lost_to(prefs: list[tuple[str, str, str]]) -> None:
    fit = bradley_terry(prefs)
    found = ranks(fit, bootstrap_intervals(prefs, resamples=30))
    wins = win_matrix(prefs)
    for i, beaten in wins.items():
        for j, w in beaten.items():
            if w > 0 and wins[j].get(i, 0.0) == 0 and fit.models[i].component != fit.models[j].component:
                assert found[i] < found[j]
    for name, m in fit.models.items():
        if m.wins == 0:
            assert all(found[other] < found[name] for other in wins if wins[other].get(name, 0) > 0)


def _choix_fit(prefs: list[tuple[str, str, str]], names: list[str]) -> dict[str, float]:
    """choix's maximum-likelihood fit (no regularisation), centred: a win counted twice and a tie
    as one win each way, which leaves the MLE where half a win each way puts it."""
    import choix

    index = {n: k for k, n in enumerate(names)}
    data = []
    for a, b, o in prefs:
        if o == "tie":
            data += [(index[a], index[b]), (index[b], index[a])]
        else:
            w, l_ = (a, b) if o == "a" else (b, a)
            data += [(index[w], index[l_])] * 2
    params = choix.opt_pairwise(len(names), data, alpha=0.0, method="BFGS", tol=1e-12)
    centre = sum(params) / len(params)
    return {n: float(params[index[n]]) - centre for n in names}


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_strengths_equal_choix_on_one_component() -> None:
    prefs = synthetic(TRUE, 3_000, seed=3)
    got = bradley_terry(prefs).strengths()
    assert got == pytest.approx(_choix_fit(prefs, sorted(TRUE)), abs=1e-4)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_each_component_is_choix_fitted_on_its_own_preferences() -> None:
    top = synthetic({"a": 0.5, "b": 0.0, "c": -0.2}, 300, seed=1)
    bottom = synthetic({"d": 0.3, "e": -0.3}, 200, seed=2)
    prefs = top + bottom + [("a", "d", "a"), ("e", "c", "b")]
    fit = bradley_terry(prefs)
    assert fit.components == (("a", "b", "c"), ("d", "e"))
    got = fit.strengths()
    for part, names in ((top, ["a", "b", "c"]), (bottom, ["d", "e"])):
        assert {n: got[n] for n in names} == pytest.approx(_choix_fit(part, names), abs=1e-4)
