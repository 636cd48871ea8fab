"""The few statistical tests the workbench's decisions rest on (pure Python, no SciPy).

- ``t_sf(t, dof)``: P(T > t) for Student's t with ``dof`` degrees of freedom (the regularized
  incomplete beta function by its continued fraction, as in Abramowitz & Stegun 26.5.8 / 26.7.1);
- ``welch_less(a, b)``: the one-sided Welch test that the mean of ``b`` is below the mean of ``a``:
  (t, dof, p);
- ``quantile(xs, q)``: the linear-interpolation quantile (numpy's default, type 7);
- ``tukey_low(xs)``: Tukey's lower fence, Q1 - 1.5 IQR: values below it are far below the rest.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, dof: float) -> float:
    """P(T > t), T Student's t with ``dof`` > 0 degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(dof / 2.0, 0.5, dof / (dof + t * t))
    return tail if t >= 0 else 1.0 - tail


def welch_less(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """One-sided Welch test of mean(b) < mean(a): (t, dof, p). Each side needs two values; equal
    and constant sides give p = 1 when b is not below a, 0 when it is."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("welch_less: each side needs at least two values")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se2 = va + vb
    if se2 == 0.0:
        return (math.inf, math.inf, 0.0) if mb < ma else (0.0, math.inf, 1.0)
    t = (ma - mb) / math.sqrt(se2)
    dof = se2 * se2 / ((va * va / (len(a) - 1) if va else 0.0) + (vb * vb / (len(b) - 1) if vb else 0.0))
    return t, dof, t_sf(t, dof)


def quantile(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, linear between order statistics."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile of nothing")
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def tukey_low(xs: Sequence[float]) -> float:
    """Tukey's lower fence: the first quartile less 1.5 interquartile ranges."""
    q1, q3 = quantile(xs, 0.25), quantile(xs, 0.75)
    return q1 - 1.5 * (q3 - q1)
