"""How far gradient descent is from an ODE (reduced dynamics of Lemma 2, or gradient flow).

Both runs are :class:`dynamics.Trajectory` objects recorded at the same times
(in steps, lr folded into the vector field, so GD step ``n`` is ODE time
``t = n``). An observable leaf is ``[*R, T, *W]``: run axes ``R`` (those of
``t``, which is ``[*R, T]``), time, then per-word axes ``W`` (e.g. the topic
words of ``score``; none for ``loss``). These are host-side metrics on NumPy
arrays; a NaN anywhere in a run (an ODE that failed) makes that run's metric NaN.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 4 and footnote 2 (GD as the discretisation of eqs 5-6).
  https://arxiv.org/abs/2011.10036
"""
import numpy as np

from attndyn.dynamics.trajectory import Trajectory
from attndyn.tasks.errors import ConfigError

__all__ = ["deviation_curve", "max_abs_deviation", "final_abs_deviation", "half_rise_step"]


def _aligned_difference(a: Trajectory, b: Trajectory, name: str) -> np.ndarray:
  """``|a − b|`` of observable ``name`` as ``[*R, T, W]`` (word axes flattened, at least 1)."""
  ta, tb = np.asarray(a.t), np.asarray(b.t)
  if ta.shape != tb.shape:
    raise ConfigError(
        f"the two trajectories are not recorded at the same times (t shapes {ta.shape} and "
        f"{tb.shape}); record both on one grid, e.g. ts = TrainConfig.record_steps().")
  if not np.allclose(ta, tb, rtol=1e-12, atol=1e-9):
    where = np.unravel_index(np.argmax(np.abs(ta - tb)), ta.shape)
    raise ConfigError(
        f"the two trajectories are not recorded at the same times (t[{', '.join(map(str, where))}]"
        f" = {ta[where]:g} and {tb[where]:g}); record both on one grid, e.g. "
        f"ts = TrainConfig.record_steps().")
  for traj, label in ((a, "first"), (b, "second")):
    if name not in traj.observables:
      raise ConfigError(f"observable {name!r} is not recorded by the {label} trajectory; "
                        f"it has {sorted(traj.observables)}.")
  xa, xb = np.asarray(a.observables[name]), np.asarray(b.observables[name])
  if xa.shape != xb.shape or xa.shape[:ta.ndim] != ta.shape:
    raise ConfigError(f"observable {name!r} has shapes {xa.shape} and {xb.shape}; both must be "
                      f"[*runs, time, *words] with [*runs, time] = {ta.shape} (the shape of t).")
  diff = np.abs(xa.astype(np.float64) - xb.astype(np.float64))
  return diff.reshape(ta.shape + (-1,))


def deviation_curve(a: Trajectory, b: Trajectory, name: str = "score") -> np.ndarray:
  """Largest deviation over words at each recorded time.

  .. math:: D(t) = \\max_{w} |x^{a}_w(t) - x^{b}_w(t)|

  Args:
    a: one run (or sweep of runs), e.g. gradient descent.
    b: another, recorded at the same times, e.g. an ODE solution.
    name: the observable compared (``score``, ``emb_norm``, ``loss``, ...).

  Returns:
    ``[*R, T]`` float64.

  Raises:
    ConfigError: different recorded times, a missing observable, or shapes
      that do not match.
  """
  return np.max(_aligned_difference(a, b, name), axis=-1)


def max_abs_deviation(a: Trajectory, b: Trajectory, name: str = "score") -> np.ndarray:
  """Largest deviation over recorded times and words, per run.

  .. math:: \\max_{t}\\max_{w} |x^{a}_w(t) - x^{b}_w(t)|

  Args:
    a: one run (or sweep of runs).
    b: another, recorded at the same times.
    name: the observable compared.

  Returns:
    ``[*R]`` float64 (a scalar array for a single run).

  Raises:
    ConfigError: as :func:`deviation_curve`.
  """
  return np.max(deviation_curve(a, b, name), axis=-1)


def final_abs_deviation(a: Trajectory, b: Trajectory, name: str = "score") -> np.ndarray:
  """Largest deviation over words at the last recorded time, per run.

  .. math:: \\max_{w} |x^{a}_w(t_{end}) - x^{b}_w(t_{end})|

  Args:
    a: one run (or sweep of runs).
    b: another, recorded at the same times.
    name: the observable compared.

  Returns:
    ``[*R]`` float64.

  Raises:
    ConfigError: as :func:`deviation_curve`.
  """
  return deviation_curve(a, b, name)[..., -1]


def crossing_time(t: np.ndarray, x: np.ndarray, fraction: float, axis: int = 0) -> np.ndarray:
  """When ``x`` first covers ``fraction`` of its change from the first to the last record.

  .. math:: t_f = \\min\\{t : (x(t) - x(t_0)) / (x(t_{end}) - x(t_0)) \\ge f\\}

  linearly interpolated between the two records around the crossing.

  Args:
    t: ``[K]`` recorded times.
    x: an observable with the ``K`` times on ``axis``.
    fraction: ``f`` in (0, 1).
    axis: the time axis of ``x``.

  Returns:
    ``x``'s shape without ``axis``, float64; NaN where ``x`` does not change or does not cross.
  """
  t = np.asarray(t, np.float64)
  x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
  if x.shape[-1] != t.shape[0]:
    raise ConfigError(f"x has {x.shape[-1]} records on axis {axis}, t has {t.shape[0]} times.")
  change = x[..., -1] - x[..., 0]
  with np.errstate(invalid="ignore", divide="ignore"):
    covered = (x - x[..., :1]) / change[..., None]
  reached = covered >= fraction
  k = np.argmax(reached, axis=-1)
  ok = reached.any(-1) & (k > 0) & np.isfinite(change) & (change != 0)
  k = np.maximum(k, 1)
  lo = np.take_along_axis(covered, (k - 1)[..., None], -1)[..., 0]
  hi = np.take_along_axis(covered, k[..., None], -1)[..., 0]
  with np.errstate(invalid="ignore", divide="ignore"):
    w = np.clip((fraction - lo) / (hi - lo), 0.0, 1.0)
  out = t[k - 1] + w * (t[k] - t[k - 1])
  return np.where(ok, out, np.nan)


def rise_lag(a: Trajectory, b: Trajectory, name: str = "score") -> np.ndarray:
  """How late ``b``'s rise is against ``a``'s, as a fraction of ``a``'s rise time, per run.

  .. math:: \\mathrm{lag} = \\big\\langle (t^{b}_{1/2} - t^{a}_{1/2}) / (t^{a}_{0.9} - t^{a}_{0.1})
     \\big\\rangle_{w}

  with :func:`crossing_time` per word, averaged over words: positive when ``b`` (an ODE)
  rises after ``a`` (GD). A deviation in value during a steep rise can be a lag in time;
  this tells the two apart (with :func:`shifted_max_deviation`).

  Args:
    a, b: trajectories recorded at the same times (runs first).
    name: the observable (``score``).

  Returns:
    ``[*R]`` float64.

  Raises:
    ConfigError: as :func:`deviation_curve`.
  """
  _aligned_difference(a, b, name)
  t = np.asarray(a.t, np.float64).reshape(-1, np.shape(a.t)[-1])[0]
  runs = np.shape(a.t)[:-1]
  xa, xb = np.asarray(a.observables[name]), np.asarray(b.observables[name])
  at = dict(t=t, axis=len(runs))
  half_a, half_b = crossing_time(x=xa, fraction=0.5, **at), crossing_time(x=xb, fraction=0.5, **at)
  rise = crossing_time(x=xa, fraction=0.9, **at) - crossing_time(x=xa, fraction=0.1, **at)
  lag = (half_b - half_a) / rise
  return np.mean(lag.reshape(runs + (-1,)), axis=-1)


def shifted_max_deviation(a: Trajectory, b: Trajectory, name: str = "score",
                          max_shift=None, n_shifts: int = 801):
  """:func:`max_abs_deviation` after the best time shift of ``b``, per run.

  .. math:: \\min_{δ} \\max_{t, w} |x^{a}_w(t) - x^{b}_w(t + δ)|

  over ``n_shifts`` shifts ``δ`` evenly in ``[−max_shift, max_shift]`` (default: a tenth of
  the recorded span), ``x^b`` linearly interpolated between records, over the times ``t``
  with ``t + δ`` recorded. One shift per run, common to its words.

  Args:
    a, b: trajectories recorded at the same times (runs first).
    name: the observable.
    max_shift: largest shift, in the units of ``t``.
    n_shifts: shifts tried.

  Returns:
    ``(deviation [*R], shift [*R])`` float64: the smallest largest deviation and its ``δ``.

  Raises:
    ConfigError: as :func:`deviation_curve`.
  """
  _aligned_difference(a, b, name)
  t = np.asarray(a.t, np.float64).reshape(-1, np.shape(a.t)[-1])[0]
  runs = np.shape(a.t)[:-1]
  xa = np.asarray(a.observables[name], np.float64).reshape(runs + (t.size, -1))
  xb = np.asarray(b.observables[name], np.float64).reshape(runs + (t.size, -1))
  xa, xb = xa.reshape((-1,) + xa.shape[-2:]), xb.reshape((-1,) + xb.shape[-2:])
  span = t[-1] - t[0]
  max_shift = 0.1 * span if max_shift is None else max_shift
  shifts = np.linspace(-max_shift, max_shift, n_shifts)
  best = np.full(xa.shape[0], np.inf)
  best_shift = np.zeros(xa.shape[0])
  for shift in shifts:
    inside = (t + shift >= t[0]) & (t + shift <= t[-1])
    tt = t[inside] + shift
    k = np.clip(np.searchsorted(t, tt, side="right") - 1, 0, t.size - 2)
    w = ((tt - t[k]) / (t[k + 1] - t[k]))[None, :, None]
    moved = xb[:, k] * (1.0 - w) + xb[:, k + 1] * w                   # [r, t, W]
    dev = np.max(np.abs(xa[:, inside] - moved), axis=(1, 2))
    better = dev < best
    best = np.where(better, dev, best)
    best_shift = np.where(better, shift, best_shift)
  nan = ~np.all(np.isfinite(xb), axis=(1, 2)) | ~np.all(np.isfinite(xa), axis=(1, 2))
  best = np.where(nan, np.nan, best)
  return best.reshape(runs), best_shift.reshape(runs)


def half_rise_step(traj: Trajectory, t, name: str = "score") -> np.ndarray:
  """``[R]``: per run, the time at which ``name`` first covers half its rise
  (:func:`crossing_time` on the record times ``t [T]``), averaged over the words."""
  return np.nanmean(crossing_time(x=np.asarray(traj.observables[name]), fraction=0.5,
                                  t=np.asarray(t, np.float64), axis=1), -1)
