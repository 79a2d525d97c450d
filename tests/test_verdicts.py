"""Replication verdicts from intervals: exact Student-t quantiles, Wilson intervals for
proportions, paired differences, and the three-way pass / fail / inconclusive rule with the n
that would decide an inconclusive row."""
import math

import numpy as np
import pytest
from scipy import stats

from attndyn.analysis import replication as rep
from attndyn.reproduce import report


def test_t_quantiles_are_exact_and_df_31_to_39_are_not_rounded_up_to_40():
  for df in (1, 2, 5, 30, 31, 35, 39, 40, 121, 1000):
    assert rep.t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-12)
  # the old table used df 40's 2.021 for df 31..39: too narrow an interval
  assert all(rep.t_quantile_975(df) > 2.021 for df in range(31, 40))
  est = rep.mean_ci([1.0, 2.0, 3.0, float("nan")])
  assert est.n == 3 and est.mean == 2.0 and est.kind == "mean"
  np.testing.assert_allclose(est.ci95, stats.t.ppf(0.975, 2) / math.sqrt(3), rtol=1e-12)
  assert est.interval() == pytest.approx((2.0 - est.ci95, 2.0 + est.ci95))
  one = rep.mean_ci([5.0])
  assert one.mean == 5.0 and one.ci95 is None and one.interval() is None
  assert rep.mean_ci([]).n == 0 and rep.mean_ci([]).mean is None


def test_wilson_interval_matches_the_closed_form_and_stays_in_0_1():
  z = stats.norm.ppf(0.975)
  k, n = 6, 20
  p = k / n
  centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
  half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
  est = rep.proportion_ci([1] * k + [0] * (n - k))
  assert est.kind == "proportion" and est.mean == 0.3 and est.n == 20
  assert (est.lo, est.hi) == pytest.approx((centre - half, centre + half), rel=1e-12)
  assert est.lo == pytest.approx(0.1455, abs=1e-4) and est.hi == pytest.approx(0.5190, abs=1e-4)
  allx = rep.proportion_ci([True] * 5)
  assert allx.hi == 1.0 and 0.5 < allx.lo < 1.0        # 5/5 does not prove 100 %
  with pytest.raises(Exception, match="0/1 outcomes"):
    rep.proportion_ci([0.5, 1.0])


def test_paired_uses_per_seed_differences():
  a = np.array([80.0, 82.0, 78.0, 85.0, 81.0])   # seeds differ a lot...
  b = a - np.array([1.0, 1.2, 0.9, 1.1, 1.0])    # ...but a beats b by about 1 on every seed
  paired = rep.paired_ci(a, b)
  assert paired.kind == "paired" and paired.n == 5
  np.testing.assert_allclose(paired.mean, 1.04)
  tol = rep.Tolerance("at_least", 0.0)
  assert rep.judge(paired, tol) == "pass"
  # the same numbers as two independent means straddle 0: the pairing is what decides it
  diff_unpaired = rep.mean_ci(a).ci95 + rep.mean_ci(b).ci95
  assert diff_unpaired > 1.04 and paired.ci95 < 0.2
  assert rep.judge(rep.paired_ci(b, a), tol) == "fail"
  with pytest.raises(Exception, match="same length"):
    rep.paired_ci([1.0, 2.0], [1.0])


def test_paired_proportions_use_newcombes_interval():
  # every seed agrees (0 differences): a t interval would have zero width; Newcombe's does not
  same = rep.paired_proportion_ci([0, 0, 0], [0, 0, 0])
  assert same.kind == "paired_proportion" and same.cells == (0, 0, 0, 3) and same.mean == 0.0
  assert same.lo < -0.3 and same.hi > 0.3 and same.lo == pytest.approx(-same.hi)
  tol = rep.Tolerance("at_least", 0.1)
  assert rep.judge(same, tol) == "inconclusive"
  k = rep.n_to_decide(same, tol)      # 0/k vs 0/k: the interval shrinks below 0.1 at n = k
  assert rep.newcombe_paired_interval((0, 0, 0, k))[1] < 0.1
  assert rep.newcombe_paired_interval((0, 0, 0, k - 1))[1] >= 0.1
  a = np.array([1] * 14 + [0] * 6)
  b = np.array([1] * 2 + [0] * 18)
  est, swapped = rep.paired_proportion_ci(a, b), rep.paired_proportion_ci(b, a)
  assert est.mean == pytest.approx(0.6) and est.lo < 0.6 < est.hi
  assert (swapped.lo, swapped.hi) == pytest.approx((-est.hi, -est.lo))
  assert rep.judge(est, tol) == "pass" and rep.judge(swapped, tol) == "fail"
  row = rep.claim("gain", "g", paper="> 0", ours=est, tolerance=tol)
  assert report.format_ours(row) == (f"Δ = 0.6 [{est.lo:.3g}, {est.hi:.3g}] (paired 0/1, "
                                     "Newcombe, n=20)")
  # coverage of the true difference over simulated paired 0/1 outcomes (20 seeds): ≈ 95%
  rng = np.random.default_rng(0)
  hits = 0
  for _ in range(500):
    x = rng.random(20) < 0.5
    y = np.where(rng.random(20) < 0.6, x, rng.random(20) < 0.3)   # correlated with x
    e = rep.paired_proportion_ci(x, y)
    hits += e.lo <= 0.5 - (0.6 * 0.5 + 0.4 * 0.3) <= e.hi
  assert 0.92 <= hits / 500 <= 0.99


def _mean(m, h, n=5):
  """An estimate with mean m and 95% half-width h over n seeds."""
  s = h * math.sqrt(n) / rep.t_quantile_975(n - 1)
  z = np.array([-1.0, 1.0] * (n // 2) + [0.0] * (n % 2))
  x = m + z * s / z.std(ddof=1)
  est = rep.mean_ci(x)
  assert est.mean == pytest.approx(m) and est.ci95 == pytest.approx(h)
  return est


@pytest.mark.parametrize("est, tol, paper, expected", [
    # Corollary 1's row from the issue: 0.0168 ± 0.0094 (n=5) under ≤ 0.02 reaches 0.026
    (_mean(0.0168, 0.0094), rep.Tolerance("at_most", 0.02), None, "inconclusive"),
    (_mean(0.0100, 0.0050), rep.Tolerance("at_most", 0.02), None, "pass"),
    (_mean(0.0300, 0.0050), rep.Tolerance("at_most", 0.02), None, "fail"),
    (_mean(78.0, 1.0), rep.Tolerance("at_least", 76.0), None, "pass"),
    (_mean(77.0, 2.0), rep.Tolerance("at_least", 76.0), None, "inconclusive"),
    (_mean(72.0, 2.0), rep.Tolerance("at_least", 76.0), None, "fail"),
    (_mean(80.5, 1.0), rep.Tolerance("abs", 3.0), 80.0, "pass"),
    (_mean(79.0, 3.0), rep.Tolerance("abs", 3.0), 80.0, "inconclusive"),
    (_mean(75.0, 1.0), rep.Tolerance("abs", 3.0), 80.0, "fail"),
    (_mean(86.0, 1.0), rep.Tolerance("abs", 3.0), 80.0, "fail"),
    # proportions (Wilson): "about half" as 0.5 ± 0.2
    (rep.proportion_ci([1] * 6 + [0] * 14), rep.Tolerance("abs", 0.2), 0.5, "inconclusive"),
    (rep.proportion_ci([1] * 100 + [0] * 100), rep.Tolerance("abs", 0.2), 0.5, "pass"),
    (rep.proportion_ci([1] * 2 + [0] * 98), rep.Tolerance("abs", 0.2), 0.5, "fail"),
    # paired: TC − KF per seed ≥ 0
    (rep.paired_ci([2.0, 3.0, 2.5, 2.2], [1.0, 1.1, 0.9, 1.0]), rep.Tolerance("at_least", 0.0),
     None, "pass"),
    (rep.paired_ci([1.0, 3.0, 0.5, 2.2], [1.0, 1.1, 0.9, 1.0]), rep.Tolerance("at_least", 0.0),
     None, "inconclusive"),
    (rep.paired_ci([0.0, 0.1, 0.2, 0.1], [1.0, 1.1, 0.9, 1.0]), rep.Tolerance("at_least", 0.0),
     None, "fail"),
    (rep.mean_ci([1.0, 1.0, 1.0]), rep.Tolerance("all_true"), None, "pass"),
    (rep.mean_ci([1.0, 0.0, 1.0]), rep.Tolerance("all_true"), None, "fail"),
    (rep.mean_ci([3.0]), rep.Tolerance("info"), None, "info"),
    (rep.mean_ci([3.0]), rep.Tolerance("at_least", 1.0), None, "inconclusive"),  # no interval
    (rep.mean_ci([float("nan")]), rep.Tolerance("at_least", 1.0), None, "fail"),  # no value
])
def test_three_way_verdict_from_the_interval(est, tol, paper, expected):
  assert rep.judge(est, tol, paper) == expected


def test_n_to_decide_is_the_first_n_whose_interval_clears_the_bound():
  tol = rep.Tolerance("at_most", 0.02)
  est = _mean(0.0168, 0.0094)
  n = rep.n_to_decide(est, tol)
  s = 0.0094 * math.sqrt(5) / stats.t.ppf(0.975, 4)
  half = lambda k: stats.t.ppf(0.975, k - 1) * s / math.sqrt(k)
  assert 0.0168 + half(n) <= 0.02 < 0.0168 + half(n - 1)
  # a proportion: 6/20 against 0.5 ± 0.2 sits on the bound 0.3, which no n decides; 5/20 is
  # decided (as a fail) once its Wilson interval drops below 0.3
  assert rep.n_to_decide(rep.proportion_ci([1] * 6 + [0] * 14), rep.Tolerance("abs", 0.2),
                         0.5) is None
  p = rep.proportion_ci([1] * 5 + [0] * 15)
  k = rep.n_to_decide(p, rep.Tolerance("abs", 0.2), 0.5)
  assert rep.wilson_interval(0.25 * k, k)[1] < 0.3 <= rep.wilson_interval(0.25 * (k - 1), k - 1)[1]
  assert rep.n_to_decide(rep.mean_ci([3.0]), rep.Tolerance("at_least", 1.0)) is None


def test_rows_show_the_source_the_interval_and_an_inconclusive_result():
  tol = rep.Tolerance("at_most", 0.02, source=rep.ours("one fiftieth of the norm"))
  row = rep.claim("x.corollary1", "dev", paper=0.0, ours=_mean(0.0168, 0.0094), tolerance=tol,
                  paper_ref="Corollary 1, p. 5")
  assert row["status"] == "inconclusive" and row["n_needed"] > 5
  assert row["tolerance"]["source"] == "ours: one fiftieth of the norm"
  assert report.format_result(row) == (f"inconclusive (n too small: n ≈ {row['n_needed']} would "
                                       "decide at this mean and spread)")
  assert report.format_paper(row) == "0 (Corollary 1, p. 5)"
  quick = rep.claim("x", "dev", paper=0.0, ours=_mean(0.0168, 0.0094), tolerance=tol, quick=True,
                    comparable=False)
  assert quick["status"] == "quick" and quick["would_be"] == "inconclusive"
  assert report.format_result(quick).startswith("quick: not comparable (would be inconclusive (n too")
  prop = rep.claim("p", "rate", paper="about half", paper_value=0.5,
                   ours=rep.proportion_ci([1] * 6 + [0] * 14),
                   tolerance=rep.Tolerance("abs", 0.2, source=rep.from_paper("p. 9", "about half")))
  assert report.format_ours(prop) == "6/20 = 0.3 [0.145, 0.519] (Wilson, n=20)"
  assert report.format_source(prop) == "paper, p. 9: “about half”"
  unsourced = rep.claim("u", "t", paper=1.0, ours=rep.mean_ci([1.0, 1.0]),
                        tolerance=rep.Tolerance("at_least", 0.5))
  assert report.format_source(unsourced) == "**not given**"
  c = report.counts([row, quick, prop, unsourced])
  assert c == {"pass": 1, "fail": 0, "inconclusive": 2, "quick": 1, "info": 0}
  assert report.summary(c).startswith("1 pass, 0 fail, 2 inconclusive (n too small), 1 quick")


def test_every_judged_tolerance_in_the_experiments_names_its_source():
  """A pass/fail rule without a source cannot be checked by a reviewer: every ``rep.Tolerance``
  of a judged kind written in attndyn/reproduce passes ``source=`` (the paper's words, or ours
  and why)."""
  import ast
  import pathlib
  root = pathlib.Path(report.__file__).parent
  missing, seen = [], 0
  for path in sorted(root.rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Tolerance":
        kind = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        if kind != "info":
          seen += 1
          if not any(k.arg == "source" for k in node.keywords):
            missing.append(f"{path.relative_to(root)}:{node.lineno}")
  assert seen > 20 and not missing, missing


def test_independent_proportions_use_newcombes_hybrid_interval():
  """Two groups with no pairing (e.g. different head combinations): Newcombe's method 10."""
  a, b = [1] * 12 + [0] * 8, [1] * 3 + [0] * 17
  est = rep.proportion_difference_ci(a, b)
  assert est.kind == "proportion_difference" and est.cells == (12, 20, 3, 20)
  assert est.mean == pytest.approx(0.45) and est.lo < 0.45 < est.hi
  # Newcombe (1998) Table II, example (a): 56/70 − 48/80 = 0.2, method 10 [0.0524, 0.3339]
  assert rep.newcombe_interval(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=1e-4)
  tol = rep.Tolerance("at_least", 0.1)
  assert rep.judge(est, tol) == "pass" and rep.judge(rep.proportion_difference_ci(b, a), tol) == "fail"
  row = rep.claim("gain", "g", paper="> 0", ours=est, tolerance=tol)
  assert report.format_ours(row) == (f"Δ = 12/20 − 3/20 = 0.45 [{est.lo:.3g}, {est.hi:.3g}] "
                                     "(independent, Newcombe)")
  small = rep.proportion_difference_ci([1, 0, 1], [0, 1, 0])
  assert rep.judge(small, tol) == "inconclusive" and rep.n_to_decide(small, tol) > 6
  # coverage over simulated independent groups (20 and 30 trials): ≈ 95%
  rng = np.random.default_rng(0)
  hits = sum(
      (e := rep.proportion_difference_ci(rng.random(20) < 0.6, rng.random(30) < 0.3)).lo
      <= 0.3 <= e.hi for _ in range(500))
  assert 0.92 <= hits / 500 <= 0.99
