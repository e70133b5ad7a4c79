"""Benchmark statistics: summaries with Student-t intervals, Welch comparisons, the regression rule.

Pure functions only. The Student-t quantile is computed here (regularised incomplete beta by continued
fraction, then bisection) so the controller needs no scipy, and Welch comparisons can use the fractional
Welch-Satterthwaite degrees of freedom instead of a floored lookup table.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Optional, Sequence

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the regularised incomplete beta (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    # The continued fraction converges fast only on one side of the mean; use the symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (possibly fractional) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Inverse of t_cdf: the t with P(T <= t) = p (bisection; monotone and exact to ~1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@functools.lru_cache(maxsize=256)
def t_critical(df: float, confidence: float = 0.95) -> float:
    """Two-sided critical value: the half-width multiplier of a `confidence` interval. Cached: a run asks
    for the same few integer df after every round, and each bisection costs ~50 incomplete-beta evaluations."""
    return t_quantile(0.5 + confidence / 2.0, df)


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; ValueError when empty."""
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def sample_sd(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof 1); 0 for a single value."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def summarize(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """mean, sd, ci95 [lo, hi] (t over n-1 dof), half-width %, n, min, max, median and raw values.

    With one value the interval is undefined and reported as [mean, mean] with `ci95_pct` None so a
    caller never mistakes a single sample for a precise one.
    """
    vals = [float(v) for v in values]
    n = len(vals)
    if n == 0:
        return {"mean": None, "sd": None, "ci95": [None, None], "ci95_pct": None, "n": 0, "values": []}
    m, sd = mean(vals), sample_sd(vals)
    half: Optional[float] = t_critical(n - 1, confidence) * sd / math.sqrt(n) if n > 1 else None
    ordered = sorted(vals)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    return {
        "mean": m,
        "sd": sd,
        "ci95": [m - half, m + half] if half is not None else [m, m],
        "ci95_pct": (100.0 * half / abs(m)) if half is not None and m else None,
        "n": n,
        "min": ordered[0],
        "max": ordered[-1],
        "median": median,
        "values": vals,
    }


PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks (numpy's default, Hyndman-Fan type 7)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    return _sorted_percentile(sorted(values), q)


def percentiles(values: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p95/p99 of a distribution of observations (requests, chunk gaps), and how many there were.

    These describe the spread of single observations, not the precision of the mean: the interval of the
    mean stays `ci95`. With fewer than 100 observations p99 is close to the maximum.
    """
    vals = [float(v) for v in values]
    if not vals:
        return {**{f"p{q}": None for q in PERCENTILES}, "observations": 0}
    ordered = sorted(vals)
    return {**{f"p{q}": _sorted_percentile(ordered, q) for q in PERCENTILES}, "observations": len(ordered)}


def _sorted_percentile(ordered: Sequence[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def half_width_pct(values: Sequence[float], confidence: float = 0.95) -> Optional[float]:
    """CI half-width as % of the mean, None when it cannot be computed (n < 2 or mean 0)."""
    return summarize(values, confidence)["ci95_pct"]


def converged(values: Sequence[float], min_samples: int, max_samples: int, precision_pct: float) -> bool:
    """The reference stopping rule: n >= max, or n >= min and half-width % <= precision."""
    n = len(values)
    if n >= max_samples:
        return True
    if n < min_samples:
        return False
    pct = half_width_pct(values)
    return pct is not None and pct <= precision_pct


def welch(current: Sequence[float], baseline: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Welch's interval for mean(current) - mean(baseline), also as % of the baseline mean.

    Degrees of freedom from Welch-Satterthwaite. When both samples have zero variance the interval
    collapses to the point difference (df reported as None).
    """
    if len(current) < 2 or len(baseline) < 2:
        raise ValueError("Welch's interval needs at least two values on each side")
    m1, m2 = mean(current), mean(baseline)
    v1, v2 = sample_sd(current) ** 2 / len(current), sample_sd(baseline) ** 2 / len(baseline)
    diff = m1 - m2
    se = math.sqrt(v1 + v2)
    if se == 0.0:
        lo = hi = diff
        df: Optional[float] = None
    else:
        df = (v1 + v2) ** 2 / ((v1 ** 2) / (len(current) - 1) + (v2 ** 2) / (len(baseline) - 1))
        half = t_critical(df, confidence) * se
        lo, hi = diff - half, diff + half
    scale = 100.0 / m2 if m2 else float("nan")
    return {
        "current_mean": m1,
        "baseline_mean": m2,
        "diff": diff,
        "diff_ci95": [lo, hi],
        "change_pct": diff * scale,
        "change_ci95_pct": [lo * scale, hi * scale],
        "df": df,
    }


def direction(comparison: dict[str, Any]) -> str:
    """faster/slower/same from the interval of the difference (in the metric's own sign)."""
    lo, hi = comparison["diff_ci95"]
    if lo > 0:
        return "higher"
    if hi < 0:
        return "lower"
    return "same"


def is_regression(comparison: dict[str, Any], higher_is_better: bool, tolerance_pct: float) -> bool:
    """Significantly worse AND the mean change beyond the tolerance (both conditions, as the reference)."""
    side = direction(comparison)
    change = comparison["change_pct"]
    if higher_is_better:
        return side == "lower" and change < -tolerance_pct
    return side == "higher" and change > tolerance_pct
