"""Replication claims: a paper's number, ours (mean ± 95% CI over seeds), and pass/fail.

A *claim* is one checkable statement of a paper (a number or a qualitative
property). Ours is a set of per-seed values summarised as the mean with a
two-sided 95% Student-t confidence interval, ``mean ± t_{0.975, n-1} · sd / √n``.
A :class:`Tolerance` says how the claim is judged:

* ``abs``: ``|mean − paper| ≤ value``;
* ``at_least`` / ``at_most``: ``mean ≥ value`` / ``mean ≤ value``;
* ``all_true``: every per-seed value is true (stored as 1.0 / 0.0; the mean
  is the fraction of seeds where it holds);
* ``info``: reported, not judged.

Everything returned is plain Python (JSON-ready); NaN becomes ``None``.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from tasks.errors import check

# Two-sided 95% Student-t quantiles t_{0.975, df}, df = 1..30, then a few larger df.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_T975_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980))
TOLERANCE_KINDS = ("abs", "at_least", "at_most", "all_true", "info")
STATUSES = ("pass", "fail", "info", "quick")


def t_quantile_975(df: int) -> float:
  """``t_{0.975, df}``, the two-sided 95% Student-t quantile (tabulated; 1.96 for df > 120).

  Args:
    df: degrees of freedom, ≥ 1.
  """
  check(isinstance(df, (int, np.integer)) and df >= 1, "df", df, "an integer >= 1")
  if df <= len(_T975):
    return _T975[df - 1]
  for bound, value in _T975_LARGE:
    if df <= bound:
      return value
  return 1.960


@dataclasses.dataclass(frozen=True)
class Estimate:
  """Per-seed values and their summary.

  Attributes:
    values: the finite per-seed values (NaN/inf dropped).
    mean: their mean (``None`` when there are none).
    ci95: half-width of the 95% t interval (``None`` for fewer than 2 values).
    n: number of values.
  """
  values: tuple
  mean: Optional[float]
  ci95: Optional[float]
  n: int

  def to_dict(self) -> dict:
    return {"mean": self.mean, "ci95": self.ci95, "n": self.n, "values": list(self.values)}


def mean_ci(values: Sequence[float]) -> Estimate:
  """Mean and 95% Student-t half-width over seeds.

  .. math:: \\bar x \\pm t_{0.975,\\,n-1} \\frac{s}{\\sqrt n}, \\quad
     s^2 = \\frac{1}{n-1}\\sum_i (x_i - \\bar x)^2

  Args:
    values: one number per seed (bools count as 1/0); non-finite ones are dropped.

  Returns:
    An :class:`Estimate`.
  """
  x = np.asarray([float(v) for v in np.ravel(np.asarray(values, dtype=float))], float)
  x = x[np.isfinite(x)]
  n = int(x.size)
  if n == 0:
    return Estimate((), None, None, 0)
  mean = float(x.mean())
  ci = None
  if n >= 2:
    ci = float(t_quantile_975(n - 1) * x.std(ddof=1) / math.sqrt(n))
  return Estimate(tuple(float(v) for v in x), mean, ci, n)


@dataclasses.dataclass(frozen=True)
class Tolerance:
  """How a claim is judged.

  Attributes:
    kind: one of :data:`TOLERANCE_KINDS`.
    value: the bound (``abs``: the allowed distance from the paper's number;
      ``at_least``/``at_most``: the threshold); ``None`` for ``all_true``/``info``.
    text: the rule in words, for the report.
  """
  kind: str
  value: Optional[float] = None
  text: str = ""

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


def judge(estimate: Estimate, tolerance: Tolerance, paper: Optional[float] = None) -> str:
  """``"pass"``, ``"fail"`` or ``"info"`` for an estimate under a tolerance.

  No finite value at all is a fail (except for ``info``).

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
  if tolerance.kind == "abs":
    check(paper is not None, "paper", paper, "a number for an 'abs' tolerance")
    ok = abs(estimate.mean - paper) <= tolerance.value
  elif tolerance.kind == "at_least":
    ok = estimate.mean >= tolerance.value
  elif tolerance.kind == "at_most":
    ok = estimate.mean <= tolerance.value
  else:   # all_true
    ok = all(v == 1.0 for v in estimate.values)
  return "pass" if ok else "fail"


def claim(claim_id: str, text: str, *, paper, ours: Estimate, tolerance: Tolerance,
          figure: Optional[str] = None, unit: str = "", comparable: bool = True, quick: bool = False,
          paper_value: Optional[float] = None, note: str = "") -> dict:
  """One row of the replication table.

  Args:
    claim_id: stable id, ``experiment.what`` (e.g. ``sst2.tc.test_acc``).
    text: the claim in words.
    paper: what the paper says: a number, or a short text for qualitative claims.
    ours: our per-seed estimate.
    tolerance: how it is judged.
    figure: the figure or equation it belongs to (``"Fig 3"``, ``"Eq (10)"``).
    unit: ``"%"`` or ``""``, for display.
    comparable: False when the run's budget cannot reach the paper's regime
      (the quick mode's short SST runs): the status is then ``"quick"``, and
      ``would_be`` keeps the verdict the numbers would get.
    quick: the run is the quick mode (``comparable`` only matters then).
    paper_value: the number ``abs`` compares with, when ``paper`` is text.
    note: anything the reader needs (which U, how it is measured).

  Returns:
    A JSON-ready dict with keys ``id, text, figure, paper, ours, unit,
    tolerance, status, would_be, note``.
  """
  number = paper_value if paper_value is not None else (
      paper if isinstance(paper, (int, float)) and not isinstance(paper, bool) else None)
  verdict = judge(ours, tolerance, number)
  status = verdict
  if quick and not comparable and verdict != "info":
    status = "quick"
  return {"id": claim_id, "text": text, "figure": figure, "paper": paper, "ours": ours.to_dict(),
          "unit": unit, "tolerance": {"kind": tolerance.kind, "value": tolerance.value,
                                      "text": tolerance.describe()},
          "status": status, "would_be": verdict, "note": note}


def fraction_true(flags) -> float:
  """Fraction of true entries (1.0 for an empty input is avoided: NaN)."""
  flags = np.asarray(flags, bool)
  return float(flags.mean()) if flags.size else float("nan")


def strictly_monotone(values, *, increasing: bool) -> bool:
  """Whether a sequence strictly increases (or decreases) at every step."""
  d = np.diff(np.asarray(values, float))
  return bool(np.all(d > 0) if increasing else np.all(d < 0))
