"""Statistics of SGD noise across seeds: moments, variance scaling with lr/B, take-off times.

Every run of a sweep starts from the same parameters, so the spread over its
seeds is the minibatch noise alone. In gradient-flow time ``τ = lr·t`` the
stochastic modified equation (:mod:`dynamics.sde`) reads
``dθ = -∇L dτ + sqrt(lr Σ/B) dW_τ``: to first order the across-seed variance
at a fixed ``τ`` is proportional to ``lr/B``, which :func:`loglog_slope` tests
by fitting ``log Var = a + b log(lr/B)`` (``b ≈ 1``) with a bootstrap over
seeds for the interval. Arrays carry seeds on axis 0.

References:
  Li, Tai & E, "Stochastic Modified Equations and Adaptive Stochastic Gradient
  Algorithms", ICML 2017. https://arxiv.org/abs/1511.06251
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021
  (the observables: scores ``s_t``, norms ``‖v_t‖``, Theorem 1's ``Q_t``).
"""
import math
from typing import NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

from attndyn.analysis.sen_checks import windowed_max_error
from attndyn.analysis.theorem1 import invariant_drift
from attndyn.dynamics.sde import finite_population_factor
from attndyn.dynamics.train import steps_per_epoch
from attndyn.tasks.errors import check

__all__ = ["SeedMoments", "seed_moments", "index_at", "takeoff_times", "word_variance", "Fit",
           "loglog_slope", "variance_ratio", "max_mean_deviation", "excess_invariant_drift",
           "loglog_fit", "curve_moments", "epoch_boundary_ratio", "tau_grid", "on_grid",
           "sen_errors", "mean_invariant_drift", "variance_ratio_at", "last_epoch_end"]


class SeedMoments(NamedTuple):
  """Mean and unbiased variance over seeds (axis 0), and the seed count."""
  mean: np.ndarray
  var: np.ndarray
  n: int


def seed_moments(x) -> SeedMoments:
  """``x [S, ...]`` → mean and variance (``ddof=1``) over the S seeds."""
  x = np.asarray(x, np.float64)
  check(x.ndim >= 1 and x.shape[0] >= 2, "x.shape", x.shape, "at least 2 seeds on axis 0")
  return SeedMoments(x.mean(0), x.var(0, ddof=1), int(x.shape[0]))


def index_at(t, t_star: float) -> int:
  """Index of the recorded time nearest ``t_star``."""
  return int(np.argmin(np.abs(np.asarray(t, np.float64) - t_star)))


def takeoff_times(t, score, threshold: float) -> np.ndarray:
  """First time each run's score reaches ``threshold`` (linear interpolation between records).

  Args:
    t: ``[K]`` recorded times.
    score: ``[..., K]`` scores along training.
    threshold: the level of ``s_t`` that marks the take-off.

  Returns:
    ``[...]`` crossing times; NaN where the score never reaches the threshold
    (or starts above it: 0 then).
  """
  t = np.asarray(t, np.float64)
  s = np.asarray(score, np.float64)
  above = s >= threshold
  first = np.argmax(above, axis=-1)
  never = ~above.any(-1)
  k = np.maximum(first, 1)
  s0 = np.take_along_axis(s, (k - 1)[..., None], -1)[..., 0]
  s1 = np.take_along_axis(s, k[..., None], -1)[..., 0]
  with np.errstate(divide="ignore", invalid="ignore"):
    frac = np.where(s1 > s0, (threshold - s0) / (s1 - s0), 0.0)
  out = t[k - 1] + np.clip(frac, 0.0, 1.0) * (t[k] - t[k - 1])
  out = np.where(first == 0, t[0], out)
  return np.where(never, np.nan, out)


def word_variance(values) -> float:
  """Across-seed variance of ``values [S, W]`` (W words), averaged over words."""
  values = np.asarray(values, np.float64)
  return float(np.mean(values.var(0, ddof=1)))


class Fit(NamedTuple):
  """A straight-line fit ``y = intercept + slope x`` with a bootstrap 95% interval on the slope."""
  slope: float
  intercept: float
  lo: float
  hi: float
  boot: np.ndarray


def _line(x, y):
  slope, intercept = np.polyfit(x, y, 1)
  return float(slope), float(intercept)


def loglog_slope(ratios: Sequence[float], samples: Sequence, *, n_boot: int = 1000,
                 seed: int = 0) -> Fit:
  """Fit ``log Var = a + b log(lr/B)`` over configurations; bootstrap seeds for the interval.

  Args:
    ratios: ``lr/B`` of each configuration.
    samples: per configuration, ``[S, W]`` per-seed values at the fixed time
      (``Var`` is :func:`word_variance`).
    n_boot: bootstrap resamples (seeds resampled with replacement within
      every configuration, the fit repeated).
    seed: NumPy seed of the bootstrap (deterministic).

  Returns:
    :class:`Fit` of the log-log line; ``lo, hi`` the 2.5% / 97.5% bootstrap
    quantiles of the slope.
  """
  x = np.log(np.asarray(ratios, np.float64))
  check(x.size >= 2 and len(samples) == x.size, "ratios", list(ratios),
        "at least two configurations, one sample array each")
  y = np.log([word_variance(s) for s in samples])
  slope, intercept = _line(x, y)
  rng = np.random.default_rng(seed)
  boot = np.empty(n_boot)
  for b in range(n_boot):
    yb = []
    for s in samples:
      s = np.asarray(s)
      yb.append(np.log(word_variance(s[rng.integers(0, s.shape[0], s.shape[0])])))
    boot[b] = _line(x, np.asarray(yb))[0]
  lo, hi = np.quantile(boot, [0.025, 0.975])
  return Fit(slope, intercept, float(lo), float(hi), boot)


def variance_ratio(a, b, *, n_boot: int = 1000, seed: int = 0):
  """``Var(a)/Var(b)`` (each averaged over words) with a bootstrap 95% interval.

  Args:
    a, b: ``[S_a, W]`` and ``[S_b, W]`` per-seed values (independent seeds).

  Returns:
    ``(ratio, lo, hi, boot)``.
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  def div(x, y):
    return x / y if y > 0 else float("nan")
  ratio = div(word_variance(a), word_variance(b))
  rng = np.random.default_rng(seed)
  boot = np.array([div(word_variance(a[rng.integers(0, len(a), len(a))]),
                       word_variance(b[rng.integers(0, len(b), len(b))])) for _ in range(n_boot)])
  lo, hi = np.quantile(boot, [0.025, 0.975])
  return float(ratio), float(lo), float(hi), boot


def max_mean_deviation(runs, reference) -> float:
  """``max_{τ, w} |mean_seeds runs − reference|``: ``runs [S, K, W]``, ``reference [K, W]``."""
  return float(np.nanmax(np.abs(np.asarray(runs, np.float64).mean(0)
                                - np.asarray(reference, np.float64))))


def excess_invariant_drift(q_runs, q_ref, score_ref) -> np.ndarray:
  """Per-seed drift of Theorem 1's ``Q_t`` away from the noiseless run's, relative to its score growth.

  .. math:: \\max_τ |Q_t^{seed}(τ) - Q_t^{ref}(τ)| \\,/\\, |s_t^{ref}(end) - s_t^{ref}(0)|

  averaged over topic words: the part of the drift of eq (9) that the
  minibatch noise adds on top of the discretisation and Assumption-1 parts
  that the reference (full-batch GD at the same lr) already has.

  Args:
    q_runs: ``[S, K, T]`` recorded ``Q_t`` of S seeds.
    q_ref: ``[K, T]`` the reference run's ``Q_t``.
    score_ref: ``[K, T]`` the reference run's scores.

  Returns:
    ``[S]``.
  """
  q_runs, q_ref = np.asarray(q_runs, np.float64), np.asarray(q_ref, np.float64)
  growth = np.abs(np.asarray(score_ref, np.float64)[-1] - np.asarray(score_ref, np.float64)[0])
  return (np.max(np.abs(q_runs - q_ref[None]), axis=1) / growth).mean(-1)


def loglog_fit(x, y):
  """``(slope, intercept)`` of ``log y = intercept + slope log x`` (least squares, no interval)."""
  return _line(np.log(np.asarray(x, np.float64)), np.log(np.asarray(y, np.float64)))


def curve_moments(obs: dict, names=("score", "emb_norm", "loss")) -> dict:
  """``{name: {"mean": [K], "var": [K]}}``: across-seed mean and variance along time.

  Args:
    obs: observables with seeds on axis 0 and time on axis 1 (``[S, K]`` or
      ``[S, K, W]``; per-word statistics are averaged over the W words).
  """
  out = {}
  for name in names:
    m = seed_moments(obs[name])
    axes = tuple(range(1, m.mean.ndim))
    out[name] = {"mean": m.mean.mean(axes) if axes else m.mean,
                 "var": m.var.mean(axes) if axes else m.var}
  return out


def epoch_boundary_ratio(n: int, batch_size: int, sampling: str) -> float:
  r"""Var_SME / Var_SGD of shuffled SGD predicted from its epoch-boundary noise alone (first order).

  At fixed θ, with ``g_i = ḡ + e_i`` (``Σ_i e_i = 0``), ``K = n // B`` and
  ``r = n mod B``, one shuffled epoch moves θ by ``−lr(E ḡ + w Σ_{i∈R} e_i)``: the
  within-epoch noises cancel except for a uniformly random set ``R`` of ``r``
  samples, those dropped (``"shuffle"``: ``E = K`` steps, ``w = −1/B``) or those
  of the final short batch (``"shuffle_keep_last"``: ``E = K + 1``,
  ``w = 1/r − 1/B``). Its covariance is ``lr² w² r(n − r)/(n − 1) Σ`` per epoch;
  the SME (:mod:`dynamics.sde`) puts ``E lr² c_s Σ/B`` into the same ``E``
  steps, ``c_s = (n − B)/(n − 1)``. Both scale with the same ``Σ(θ)`` along the
  path, so to first order in lr the variances at a fixed epoch end are in the
  ratio of these two rates:

  .. math:: R = \frac{E\, c_s / B}{w^2\, r (n - r)/(n - 1)}, \qquad
     R_{\text{drop-last}} = \frac{K B (n - B)}{r (n - r)}, \quad
     R_{\text{short batch}} = \frac{(K + 1) B r (n - B)}{(B - r)^2 (n - r)}.

  Derived in docs/sgd_sde.md; ``inf`` when ``B`` divides ``n`` (no boundary
  noise: what shuffled SGD keeps is of higher order in lr, from θ moving within
  an epoch).

  Args:
    n: training samples.
    batch_size: ``B``.
    sampling: ``"shuffle"`` (drop-last) or ``"shuffle_keep_last"``.
  """
  epoch = steps_per_epoch(n, batch_size, sampling)
  r = n % batch_size
  if r == 0:
    return math.inf
  w = 1 / batch_size if sampling == "shuffle" else 1 / r - 1 / batch_size
  sme = epoch * finite_population_factor(n, batch_size, sampling) / batch_size
  return sme / (w ** 2 * r * (n - r) / (n - 1))


def tau_grid(lrs: Sequence[float], tau_every: float, tau_end: float):
  """``(τ [K], record_every, steps)`` such that runs at every learning rate of ``lrs`` record
  exactly on the gradient-flow time grid ``τ = 0, tau_every, …, tau_end`` (``τ = lr · step``).

  All runs share one step count and one record interval (the lr is a traced sweep axis):
  ``record_every = tau_every / max(lrs)`` and ``steps = tau_end / min(lrs)``, each a whole
  number, and every lr's record interval in τ a whole multiple of ``record_every`` steps.

  Returns:
    the triple, or ``None`` when some lr's interval or step count is not a whole number.
  """
  lrs = [float(v) for v in lrs]
  tau_every, tau_end = float(tau_every), float(tau_end)
  every = tau_every / max(lrs)
  steps = tau_end / min(lrs)
  ok = abs(every - round(every)) < 1e-9 and every >= 1 and abs(steps - round(steps)) < 1e-9
  ok = ok and all(abs(tau_every / (lr * round(every)) - round(tau_every / (lr * round(every))))
                  < 1e-9 for lr in lrs)
  if not ok or round(steps) % round(every):
    return None
  tau = np.arange(0.0, tau_end + 0.5 * tau_every, tau_every)
  return tau, int(round(every)), int(round(steps))


def on_grid(obs: dict, t_steps, lr: float, tau) -> dict:
  """Observables ``{name: [S, K_steps, ...]}`` of runs at learning rate ``lr``, recorded at
  steps ``t_steps``, at the recorded steps nearest the gradient-flow times ``tau`` (``lr · step``)."""
  idx = [int(np.argmin(np.abs(lr * t_steps - x))) for x in tau]
  return {k: v[:, idx] for k, v in obs.items()}


def sen_errors(obs: dict, tau, m: int, start: float) -> np.ndarray:
  """``[S]``: per seed, the largest relative error of ``‖v_t‖`` against Corollary 1's
  Eq (10) over ``τ ≥ start`` and the topic words (:func:`analysis.sen_checks.windowed_max_error`)."""
  return windowed_max_error(tau, obs["score"], obs["emb_norm"], m,
                            start_fraction=start / tau[-1])


def mean_invariant_drift(obs: dict) -> np.ndarray:
  """``[S]``: per seed, Theorem 1's drift ``max_τ |Q_t(τ) − Q_t(0)| / |s_t growth|`` (eq 9,
  :func:`analysis.theorem1.invariant_drift`), averaged over the topic words."""
  return np.asarray(invariant_drift(jnp.asarray(obs["invariant"]),
                                    jnp.asarray(obs["score"]))).mean(-1)


def variance_ratio_at(runs, reference, k: int, *, word_mean: bool = False, n_boot: int = 1000):
  """``(ratio, lo, hi)`` of :func:`variance_ratio` between the scores ``[S, K, W]`` of two sets
  of seeds at record ``k``; with ``word_mean``, of the variance of the W words' mean score."""
  a, b = runs[:, k], reference[:, k]
  if word_mean:
    a, b = a.mean(-1, keepdims=True), b.mean(-1, keepdims=True)
  return variance_ratio(a, b, n_boot=n_boot)[:3]


def last_epoch_end(tau, k: int, lr: float, epoch: int):
  """The last record at or before ``k`` (and after the first) whose step ``τ / lr`` ends an
  epoch of ``epoch`` steps, or ``None``."""
  ends = [i for i in range(k, 0, -1) if int(round(tau[i] / lr)) % epoch == 0]
  return ends[0] if ends else None
