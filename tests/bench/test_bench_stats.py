"""Statistics: Student-t quantiles against published table values, intervals, Welch, the regression rule."""
from __future__ import annotations

import math
import random

import pytest
from sparkfleet_bench import stats as st

# Two-sided 95 % critical values (standard t tables) — the reference's lookup table.
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


@pytest.mark.parametrize("df,expected", sorted(TABLE.items()))
def test_t_critical_matches_table(df: int, expected: float) -> None:
    assert st.t_critical(df) == pytest.approx(expected, abs=6e-4)


def test_t_quantile_limits_and_symmetry() -> None:
    assert st.t_critical(1e7) == pytest.approx(1.95996, abs=1e-4)
    assert st.t_quantile(0.025, 5) == pytest.approx(-st.t_quantile(0.975, 5))
    # fractional df lies between its integer neighbours
    assert st.t_critical(3) > st.t_critical(3.5) > st.t_critical(4)
    assert st.t_cdf(0.0, 7) == pytest.approx(0.5)
    # df=1 is Cauchy: P(T<=1) = 3/4
    assert st.t_cdf(1.0, 1) == pytest.approx(0.75, abs=1e-10)
    with pytest.raises(ValueError):
        st.t_quantile(1.0, 3)


def test_summarize_interval() -> None:
    vals = [10.0, 12.0, 11.0, 13.0, 9.0]
    s = st.summarize(vals)
    sd = math.sqrt(sum((v - 11.0) ** 2 for v in vals) / 4)
    half = 2.776445 * sd / math.sqrt(5)
    assert s["mean"] == pytest.approx(11.0)
    assert s["sd"] == pytest.approx(sd)
    assert s["ci95"] == pytest.approx([11.0 - half, 11.0 + half], abs=1e-5)
    assert s["ci95_pct"] == pytest.approx(100 * half / 11.0, abs=1e-4)
    assert (s["n"], s["median"], s["values"]) == (5, 11.0, vals)
    one = st.summarize([4.0])
    assert one["ci95"] == [4.0, 4.0] and one["ci95_pct"] is None
    assert st.summarize([])["n"] == 0


def test_coverage_of_the_interval_is_near_95_percent() -> None:
    rng = random.Random(1)
    hits = 0
    for _ in range(2000):
        lo, hi = st.summarize([rng.gauss(50, 5) for _ in range(4)])["ci95"]
        hits += lo <= 50 <= hi
    assert 0.93 <= hits / 2000 <= 0.97


def test_convergence_rule() -> None:
    assert not st.converged([100.0, 100.1], 3, 6, 2.0)
    assert st.converged([100.0, 100.1, 100.05], 3, 6, 2.0)
    assert not st.converged([100.0, 80.0, 120.0], 3, 6, 2.0)
    assert st.converged([100.0, 80.0, 120.0, 90.0, 110.0, 95.0], 3, 6, 2.0)


def test_welch_against_hand_computation() -> None:
    a, b = [20.0, 22.0, 21.0, 23.0], [25.0, 27.0, 26.0, 30.0, 28.0]
    va, vb = st.sample_sd(a) ** 2 / 4, st.sample_sd(b) ** 2 / 5
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)
    cmp = st.welch(a, b)
    assert cmp["df"] == pytest.approx(df)
    half = st.t_critical(df) * math.sqrt(va + vb)
    assert cmp["diff_ci95"] == pytest.approx([21.5 - 27.2 - half, 21.5 - 27.2 + half])
    assert cmp["change_pct"] == pytest.approx(100 * (21.5 - 27.2) / 27.2)
    assert st.direction(cmp) == "lower"


def test_regression_rule_needs_significance_and_size() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    slow = [95.0, 96.0, 94.0, 95.5, 94.5]        # -5 %, significant
    slightly = [98.0, 99.0, 97.0, 98.5, 97.5]    # -2 %, significant but within tolerance
    noisy = [90.0, 110.0, 85.0, 105.0, 80.0]     # -5 % but not significant
    assert st.is_regression(st.welch(slow, base), True, 3.0)
    assert not st.is_regression(st.welch(slightly, base), True, 3.0)
    assert not st.is_regression(st.welch(noisy, base), True, 3.0)
    # step time: higher is worse
    assert st.is_regression(st.welch([105.0, 106.0, 104.0], [100.0, 101.0, 99.0]), False, 3.0)
    assert not st.is_regression(st.welch([95.0, 96.0, 94.0], [100.0, 101.0, 99.0]), False, 3.0)
    with pytest.raises(ValueError):
        st.welch([1.0], base)
