"""Replication claims: a paper's number, ours (an estimate with its 95% interval), and a verdict.

A *claim* is one checkable statement of a paper (a number or a qualitative
property). Ours is a set of per-seed values summarised by an :class:`Estimate`
with a two-sided 95% interval:

* a mean (:func:`mean_ci`): Student-t, ``mean ± t_{0.975, n-1} · sd / √n`` with
  the exact quantile (``scipy.stats.t.ppf``);
* a proportion of 0/1 outcomes (:func:`proportion_ci`): the Wilson score interval;
* a paired comparison (:func:`paired_ci`): the Student-t interval of the
  per-seed differences ``a_i − b_i`` (the seeds are shared, so their common
  part cancels); of two 0/1 outcomes per seed (:func:`paired_proportion_ci`):
  Newcombe's score interval for the difference of paired proportions, built
  from the two Wilson intervals (a t interval of −1/0/+1 differences has zero
  width when every seed agrees).

A :class:`Tolerance` says how the claim is judged, and where the rule comes
from (``source``: the paper's words, figure or page, or ``ours:`` and a reason):

* ``abs``: ours within ``paper ± value``;
* ``at_least`` / ``at_most``: ours ``≥ value`` / ``≤ value``;
* ``all_true``: every per-seed value is true (stored as 1.0 / 0.0); one run
  where it fails is a counterexample, so this is pass/fail on the runs we have;
* ``info``: reported, not judged.

The verdict is three-way and uses the whole interval ``[lo, hi]``, not the mean:
``pass`` when every value in it meets the rule, ``fail`` when none does, and
``inconclusive`` when it straddles the bound. An inconclusive row carries
``n_needed``: the smallest number of seeds at which the interval, at the same
mean and spread, would no longer straddle (:func:`n_to_decide`).

Everything returned is plain Python (JSON-ready); NaN becomes ``None``.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
  Wilson, "Probable inference, the law of succession, and statistical inference",
  JASA 22 (1927). https://doi.org/10.1080/01621459.1927.10502953
"""
import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from attndyn.tasks.errors import check

__all__ = ["TOLERANCE_KINDS", "ESTIMATE_KINDS", "STATUSES", "LEVEL", "t_quantile_975", "z_975",
           "Estimate", "interval_estimate", "mean_ci", "paired_ci", "wilson_interval", "proportion_ci",
           "newcombe_paired_interval", "paired_proportion_ci", "newcombe_interval",
           "proportion_difference_ci", "Tolerance", "from_paper", "ours", "judge", "n_to_decide",
           "claim", "fraction_true", "strictly_monotone"]

TOLERANCE_KINDS = ("abs", "at_least", "at_most", "all_true", "info")
ESTIMATE_KINDS = ("mean", "proportion", "paired", "paired_proportion", "proportion_difference")
STATUSES = ("pass", "fail", "inconclusive", "info", "quick")
LEVEL = 0.95
_MAX_N = 10 ** 7   # n_to_decide gives up (None) beyond this many seeds


def t_quantile_975(df) -> float:
  """``t_{0.975, df}``, the two-sided 95% Student-t quantile, exact (``scipy.stats.t.ppf``).

  Args:
    df: degrees of freedom, > 0 (an integer for a sample; a real number is accepted).
  """
  check(isinstance(df, (int, float, np.integer, np.floating)) and not isinstance(df, bool)
        and df > 0, "df", df, "a number > 0")
  return float(stats.t.ppf(0.5 + LEVEL / 2, df))


_Z975 = float(stats.norm.ppf(0.5 + LEVEL / 2))


def z_975() -> float:
  """The two-sided 95% normal quantile (1.95996…), used by the Wilson interval."""
  return _Z975


@dataclasses.dataclass(frozen=True)
class Estimate:
  """Per-seed values and their summary.

  Attributes:
    values: the finite per-seed values (NaN/inf dropped; for ``paired`` the differences;
      empty for ``proportion_difference``, whose two groups are not paired).
    mean: their mean (``None`` when there are none); for ``proportion`` the fraction true.
    ci95: half-width of the 95% t interval (``None`` for fewer than 2 values, and for
      ``proportion``, whose Wilson interval is not symmetric: see ``lo``/``hi``).
    n: number of values (for ``proportion_difference``: of both groups).
    kind: one of :data:`ESTIMATE_KINDS`.
    lo, hi: the 95% interval (``None`` when there is none: fewer than 2 values of a mean).
      When left ``None`` with ``ci95`` given, the interval is ``mean ± ci95``.
    cells: for ``paired_proportion``, the counts ``(both, a only, b only, neither)``; for
      ``proportion_difference``, ``(k_a, n_a, k_b, n_b)``.
  """
  values: tuple
  mean: Optional[float]
  ci95: Optional[float]
  n: int
  kind: str = "mean"
  lo: Optional[float] = None
  hi: Optional[float] = None
  cells: Optional[tuple] = None

  def __post_init__(self):
    check(self.kind in ESTIMATE_KINDS, "estimate.kind", self.kind,
          f"one of {', '.join(ESTIMATE_KINDS)}")

  def interval(self) -> Optional[Tuple[float, float]]:
    """``(lo, hi)``, or ``None`` when there is no interval."""
    if self.lo is not None and self.hi is not None:
      return self.lo, self.hi
    if self.mean is not None and self.ci95 is not None:
      return self.mean - self.ci95, self.mean + self.ci95
    return None

  def to_dict(self) -> dict:
    iv = self.interval()
    return {"mean": self.mean, "ci95": self.ci95, "n": self.n, "values": list(self.values),
            "kind": self.kind, "lo": None if iv is None else iv[0],
            "hi": None if iv is None else iv[1],
            **({"cells": list(self.cells)} if self.cells is not None else {})}


def _finite(values) -> np.ndarray:
  x = np.asarray([float(v) for v in np.ravel(np.asarray(values, dtype=float))], float)
  return x[np.isfinite(x)]


def _t_estimate(x: np.ndarray, kind: str) -> Estimate:
  n = int(x.size)
  if n == 0:
    return Estimate((), None, None, 0, kind)
  mean = float(x.mean())
  ci = None
  if n >= 2:
    ci = float(t_quantile_975(n - 1) * x.std(ddof=1) / math.sqrt(n))
  return Estimate(tuple(float(v) for v in x), mean, ci, n, kind,
                  None if ci is None else mean - ci, None if ci is None else mean + ci)


def interval_estimate(value: float, lo: float, hi: float, n: int) -> Estimate:
  """One value with an interval computed elsewhere (a bootstrap's 2.5% / 97.5% quantiles),
  over ``n`` seeds: the interval is ``[lo, hi]`` itself (it need not be symmetric about
  ``value``), the ± shown is half its width."""
  return Estimate((value,), value, (hi - lo) / 2, n, "mean", lo, hi)


def mean_ci(values: Sequence[float]) -> Estimate:
  """Mean and 95% Student-t half-width over seeds.

  .. math:: \\bar x \\pm t_{0.975,\\,n-1} \\frac{s}{\\sqrt n}, \\quad
     s^2 = \\frac{1}{n-1}\\sum_i (x_i - \\bar x)^2

  Args:
    values: one number per seed (bools count as 1/0); non-finite ones are dropped.

  Returns:
    An :class:`Estimate` of kind ``mean``.
  """
  return _t_estimate(_finite(values), "mean")


def paired_ci(a: Sequence[float], b: Sequence[float]) -> Estimate:
  """The mean per-seed difference ``a_i − b_i`` with its 95% Student-t interval.

  Use it when ``a`` and ``b`` come from the same seeds (same data and initialisation,
  e.g. Attn-TC and Attn-KF per seed): the interval is that of the differences,
  ``\\bar d ± t_{0.975, n-1} s_d / √n``, which is narrower than comparing two
  independent means whenever the seeds' effect is shared.

  Args:
    a, b: one number per seed each, same length; a pair with a non-finite member is dropped.

  Returns:
    An :class:`Estimate` of kind ``paired`` whose values are the differences.
  """
  a = np.asarray(a, float).ravel()
  b = np.asarray(b, float).ravel()
  check(a.shape == b.shape, "paired values", f"{a.size} and {b.size} values",
        "two sequences of the same length (one value per seed each)")
  d = a - b
  return _t_estimate(d[np.isfinite(d)], "paired")


def wilson_interval(k: float, n: float) -> Tuple[float, float]:
  """The 95% Wilson score interval of ``k`` successes in ``n`` trials.

  .. math:: \\frac{\\hat p + \\frac{z^2}{2n} \\pm z\\sqrt{\\frac{\\hat p(1-\\hat p)}{n}
     + \\frac{z^2}{4n^2}}}{1 + \\frac{z^2}{n}}, \\quad \\hat p = k / n, \\ z = z_{0.975}

  Unlike ``p̂ ± z √(p̂(1−p̂)/n)`` it stays inside [0, 1] and is not empty at 0/n or n/n.
  """
  z = z_975()
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
  return max(0.0, centre - half), min(1.0, centre + half)


def proportion_ci(flags: Sequence) -> Estimate:
  """The fraction of true outcomes with its 95% Wilson interval.

  Args:
    flags: one 0/1 (or bool) outcome per trial; non-finite entries are dropped.

  Returns:
    An :class:`Estimate` of kind ``proportion`` (``mean`` = k/n, ``lo``/``hi`` Wilson).
  """
  x = _finite(flags)
  check(bool(np.all((x == 0) | (x == 1))), "proportion values", sorted(set(x.tolist()))[:5],
        "0/1 outcomes (bools)")
  n = int(x.size)
  if n == 0:
    return Estimate((), None, None, 0, "proportion")
  lo, hi = wilson_interval(float(x.sum()), n)
  return Estimate(tuple(float(v) for v in x), float(x.mean()), None, n, "proportion", lo, hi)


def newcombe_paired_interval(cells) -> Tuple[float, float]:
  """95% interval of ``p_a − p_b`` for paired 0/1 outcomes (Newcombe 1998, method 10).

  With ``cells = (e, f, g, h)`` = (both true, only a, only b, neither) over n pairs,
  ``p_a = (e + f) / n``, ``p_b = (e + g) / n``, Wilson intervals ``[l_a, u_a]``,
  ``[l_b, u_b]`` and Newcombe's correlation φ = C / √((e+f)(g+h)(e+g)(f+h)), where
  C = eh − fg − n/2 if that is positive, eh − fg if eh − fg < 0, else 0 (φ = 0 when a
  margin is empty):

  .. math:: L = \\hat d - \\sqrt{(p_a - l_a)^2 - 2φ(p_a - l_a)(u_b - p_b) + (u_b - p_b)^2},
     \\quad U = \\hat d + \\sqrt{(u_a - p_a)^2 - 2φ(u_a - p_a)(p_b - l_b) + (p_b - l_b)^2}

  References:
    Newcombe, "Improved confidence intervals for the difference between binomial
    proportions based on paired data", Stat. Med. 17 (1998).
    https://doi.org/10.1002/(SICI)1097-0258(19981130)17:22<2635::AID-SIM954>3.0.CO;2-C
  """
  e, f, g, h = (float(c) for c in cells)
  n = e + f + g + h
  pa, pb = (e + f) / n, (e + g) / n
  la, ua = wilson_interval(e + f, n)
  lb, ub = wilson_interval(e + g, n)
  den = (e + f) * (g + h) * (e + g) * (f + h)
  # Newcombe's φ: eh − fg, less n/2 when positive (0 in between), over the margins' product
  cross = e * h - f * g
  cross = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
  phi = cross / math.sqrt(den) if den > 0 else 0.0
  d = pa - pb
  lo = d - math.sqrt(max((pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2, 0.0))
  hi = d + math.sqrt(max((ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2, 0.0))
  return max(-1.0, lo), min(1.0, hi)


def paired_proportion_ci(a: Sequence, b: Sequence) -> Estimate:
  """The difference of two paired 0/1 outcomes per seed, with Newcombe's 95% interval.

  Args:
    a, b: one 0/1 (bool) outcome per seed each, same length (seed i of ``a`` and of
      ``b`` share data and initialisation), e.g. K heads and one head succeed.

  Returns:
    An :class:`Estimate` of kind ``paired_proportion``: values are the differences
    ``a_i − b_i`` (−1, 0, 1), mean the difference of the proportions, ``cells`` the
    2×2 counts.
  """
  a = np.asarray(a, float).ravel()
  b = np.asarray(b, float).ravel()
  check(a.shape == b.shape, "paired values", f"{a.size} and {b.size} values",
        "two sequences of the same length (one value per seed each)")
  keep = np.isfinite(a) & np.isfinite(b)
  a, b = a[keep], b[keep]
  check(bool(np.all(np.isin(a, (0, 1))) and np.all(np.isin(b, (0, 1)))), "paired proportion "
        "values", sorted(set(a.tolist()) | set(b.tolist()))[:5], "0/1 outcomes (bools)")
  n = int(a.size)
  if n == 0:
    return Estimate((), None, None, 0, "paired_proportion")
  cells = (int(np.sum((a == 1) & (b == 1))), int(np.sum((a == 1) & (b == 0))),
           int(np.sum((a == 0) & (b == 1))), int(np.sum((a == 0) & (b == 0))))
  lo, hi = newcombe_paired_interval(cells)
  return Estimate(tuple(float(v) for v in a - b), float(np.mean(a - b)), None, n,
                  "paired_proportion", lo, hi, cells)


def newcombe_interval(ka: float, na: float, kb: float, nb: float) -> Tuple[float, float]:
  """95% interval of ``p_a − p_b`` for two independent proportions ``ka/na``, ``kb/nb``
  (Newcombe 1998, method 10: the Wilson intervals ``[l, u]`` of each, combined).

  .. math:: L = \\hat d - \\sqrt{(p_a - l_a)^2 + (u_b - p_b)^2}, \\quad
     U = \\hat d + \\sqrt{(u_a - p_a)^2 + (p_b - l_b)^2}

  References:
    Newcombe, "Interval estimation for the difference between independent proportions:
    comparison of eleven methods", Stat. Med. 17 (1998).
    https://doi.org/10.1002/(SICI)1097-0258(19980430)17:8<873::AID-SIM779>3.0.CO;2-I
  """
  pa, pb = ka / na, kb / nb
  la, ua = wilson_interval(ka, na)
  lb, ub = wilson_interval(kb, nb)
  d = pa - pb
  return (max(-1.0, d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)),
          min(1.0, d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)))


def proportion_difference_ci(a: Sequence, b: Sequence) -> Estimate:
  """The difference of the fractions of true outcomes in two independent groups, with
  Newcombe's 95% interval (:func:`newcombe_interval`); ``cells`` are ``(k_a, n_a, k_b, n_b)``.
  For outcomes paired by seed use :func:`paired_proportion_ci`."""
  a, b = _finite(a), _finite(b)
  check(bool(np.all(np.isin(a, (0, 1))) and np.all(np.isin(b, (0, 1)))), "proportion values",
        sorted(set(a.tolist()) | set(b.tolist()))[:5], "0/1 outcomes (bools)")
  if a.size == 0 or b.size == 0:
    return Estimate((), None, None, 0, "proportion_difference")
  cells = (int(a.sum()), int(a.size), int(b.sum()), int(b.size))
  lo, hi = newcombe_interval(*cells)
  return Estimate((), float(a.mean() - b.mean()), None, int(a.size + b.size),
                  "proportion_difference", lo, hi, cells)


@dataclasses.dataclass(frozen=True)
class Tolerance:
  """How a claim is judged.

  Attributes:
    kind: one of :data:`TOLERANCE_KINDS`.
    value: the bound (``abs``: the allowed distance from the paper's number;
      ``at_least``/``at_most``: the threshold); ``None`` for ``all_true``/``info``.
    text: the rule in words, for the report.
    source: where the rule comes from, shown in the table: the paper's words with
      a page or figure (:func:`from_paper`), or ``ours: <reason>`` (:func:`ours`).
  """
  kind: str
  value: Optional[float] = None
  text: str = ""
  source: str = ""

  def __post_init__(self):
    check(self.kind in TOLERANCE_KINDS, "tolerance.kind", self.kind,
          f"one of {', '.join(TOLERANCE_KINDS)}")
    needs_value = self.kind in ("abs", "at_least", "at_most")
    check((self.value is not None) == needs_value, "tolerance.value", self.value,
          f"a number for {self.kind!r}" if needs_value else f"None for {self.kind!r}")

  def describe(self) -> str:
    if self.text:
      return self.text
    if self.kind == "abs":
      return f"|ours − paper| ≤ {self.value:g}"
    if self.kind in ("at_least", "at_most"):
      return f"{'≥' if self.kind == 'at_least' else '≤'} {self.value:g}"
    return "holds for every run" if self.kind == "all_true" else "reported only"


def from_paper(where: str, quote: str = "") -> str:
  """A tolerance source in the paper: ``paper, p. 6: “…”``."""
  return f"paper, {where}" + (f": “{quote}”" if quote else "")


def ours(reason: str) -> str:
  """A tolerance source of our own, with its one-line reason: ``ours: …``."""
  return f"ours: {reason}"


def _accepts(tolerance: Tolerance, paper: Optional[float]) -> Tuple[float, float]:
  """The accepted range ``[a, b]`` of a numeric tolerance."""
  if tolerance.kind == "abs":
    check(paper is not None, "paper", paper, "a number for an 'abs' tolerance")
    return paper - tolerance.value, paper + tolerance.value
  if tolerance.kind == "at_least":
    return tolerance.value, math.inf
  return -math.inf, tolerance.value   # at_most


def _decide(lo: float, hi: float, accept: Tuple[float, float]) -> str:
  a, b = accept
  if a <= lo and hi <= b:
    return "pass"
  if hi < a or lo > b:
    return "fail"
  return "inconclusive"


def judge(estimate: Estimate, tolerance: Tolerance, paper: Optional[float] = None) -> str:
  """``"pass"``, ``"fail"``, ``"inconclusive"`` or ``"info"`` for an estimate under a tolerance.

  ``pass``: the whole 95% interval lies in the accepted range; ``fail``: none of it
  does; ``inconclusive``: it straddles a bound, or there is no interval (one seed of
  a mean). No finite value at all is a fail (except for ``info``).

  Args:
    estimate: ours.
    tolerance: the rule.
    paper: the paper's number (needed by ``abs``).

  Raises:
    ConfigError: ``abs`` without a paper number.
  """
  if tolerance.kind == "info":
    return "info"
  if estimate.n == 0 or estimate.mean is None:
    return "fail"
  if tolerance.kind == "all_true":
    return "pass" if all(v == 1.0 for v in estimate.values) else "fail"
  accept = _accepts(tolerance, paper)
  iv = estimate.interval()
  if iv is None:
    return "inconclusive"
  return _decide(iv[0], iv[1], accept)


def _interval_at(estimate: Estimate, n: int) -> Optional[Tuple[float, float]]:
  """The interval ``estimate`` would have with ``n`` values at the same mean and spread."""
  m = estimate.mean
  if estimate.kind == "proportion":
    return wilson_interval(m * n, n)
  if estimate.kind == "paired_proportion":   # the same 2×2 shares at n pairs
    return newcombe_paired_interval([c * n / estimate.n for c in estimate.cells])
  if estimate.kind == "proportion_difference":   # both groups grown in proportion to n
    ka, na, kb, nb = estimate.cells
    f = n / estimate.n
    return newcombe_interval(ka * f, na * f, kb * f, nb * f)
  if estimate.ci95 is None or estimate.n < 2:
    return None
  # the current half-width h = t_{n0-1} s / √n0 gives s; at n: t_{n-1} s / √n
  s = estimate.ci95 * math.sqrt(estimate.n) / t_quantile_975(estimate.n - 1)
  h = t_quantile_975(n - 1) * s / math.sqrt(n)
  return m - h, m + h


def n_to_decide(estimate: Estimate, tolerance: Tolerance,
                paper: Optional[float] = None) -> Optional[int]:
  """The smallest n at which the interval would decide the claim, at the same mean and spread.

  A projection, not a promise: it keeps the current mean and sample standard
  deviation ``s = h √n₀ / t_{0.975, n₀−1}`` (``h`` the current half-width) and
  finds the smallest ``n > n₀`` whose half-width ``t_{0.975, n−1} s / √n`` no
  longer reaches across the bound (for a proportion: the Wilson interval of the
  same p̂ at n trials; for paired 0/1 outcomes Newcombe's interval of the same
  2×2 shares at n pairs). When the mean sits on the bound no n decides it.

  Returns:
    That n, or ``None`` when no interval exists (one seed of a mean), the mean is on
    the bound, or it would take more than ten million.
  """
  if tolerance.kind in ("info", "all_true") or estimate.mean is None:
    return None
  accept = _accepts(tolerance, paper)
  decided = lambda n: _decide(*_interval_at(estimate, n), accept) != "inconclusive"
  if _interval_at(estimate, max(estimate.n, 2)) is None or estimate.mean in accept:
    return None
  lo = max(estimate.n, 1)     # decided(lo) is taken as False: the row is inconclusive at n₀
  hi = lo + 1
  while not decided(hi):     # doubling, then bisection on the first n > n₀ that decides
    lo, hi = hi, hi * 2
    if hi > _MAX_N:
      return None
  while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if not decided(mid) else (lo, mid)
  return hi


def claim(claim_id: str, text: str, *, paper, ours: Estimate, tolerance: Tolerance,
          figure: Optional[str] = None, unit: str = "", comparable: bool = True, quick: bool = False,
          paper_value: Optional[float] = None, note: str = "", paper_ref: str = "") -> dict:
  """One row of the replication table.

  Args:
    claim_id: stable id, ``experiment.what`` (e.g. ``sst2.tc.test_acc``).
    text: the claim in words.
    paper: what the paper says: a number, or a short text for qualitative claims.
    ours: our per-seed estimate.
    tolerance: how it is judged (and, in ``tolerance.source``, why).
    figure: the figure or equation it belongs to (``"Fig 3"``, ``"Eq (10)"``).
    unit: ``"%"`` or ``""``, for display.
    comparable: False when the run's budget cannot reach the paper's regime
      (the quick mode's short SST runs): the status is then ``"quick"``, and
      ``would_be`` keeps the verdict the numbers would get. Decide it from the
      settings, never from the outcome being judged.
    quick: the run is the quick mode (``comparable`` only matters then).
    paper_value: the number ``abs`` compares with, when ``paper`` is text.
    note: anything the reader needs (which U, how it is measured).
    paper_ref: where the paper's number is printed (``"Table 1, p. 7"``).

  Returns:
    A JSON-ready dict with keys ``id, text, figure, paper, paper_ref, ours, unit,
    tolerance (kind, value, text, source), status, would_be, n_needed, note``.
  """
  number = paper_value if paper_value is not None else (
      paper if isinstance(paper, (int, float)) and not isinstance(paper, bool) else None)
  verdict = judge(ours, tolerance, number)
  n_needed = n_to_decide(ours, tolerance, number) if verdict == "inconclusive" else None
  status = verdict
  if quick and not comparable and verdict != "info":
    status = "quick"
  return {"id": claim_id, "text": text, "figure": figure, "paper": paper, "paper_ref": paper_ref,
          "ours": ours.to_dict(), "unit": unit,
          "tolerance": {"kind": tolerance.kind, "value": tolerance.value,
                        "text": tolerance.describe(), "source": tolerance.source},
          "status": status, "would_be": verdict, "n_needed": n_needed, "note": note}


def fraction_true(flags) -> float:
  """Fraction of true entries (1.0 for an empty input is avoided: NaN)."""
  flags = np.asarray(flags, bool)
  return float(flags.mean()) if flags.size else float("nan")


def strictly_monotone(values, *, increasing: bool) -> bool:
  """Whether a sequence strictly increases (or decreases) at every step."""
  d = np.diff(np.asarray(values, float))
  return bool(np.all(d > 0) if increasing else np.all(d < 0))
