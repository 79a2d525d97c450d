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

from dynamics.trajectory import Trajectory
from tasks.errors import ConfigError

__all__ = ["deviation_curve", "max_abs_deviation", "final_abs_deviation"]


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
