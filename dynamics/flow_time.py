"""One ODE solve in flow time, read as the runs of several learning rates.

The continuous limits of gradient descent are ``dθ/dt = -lr ∇L(θ)`` with ``t`` in
steps (:mod:`dynamics.gradient_flow`, and eqs 5-8 of Lu et al. for the reduced
ODE), so in flow time ``τ = lr·t`` they are ``dθ/dτ = -∇L(θ)``, the same for every
learning rate. Runs of a sweep that differ only in ``lr`` therefore follow one
trajectory in ``τ``: solved once with ``lr = 1`` and saved at every learning
rate's recorded flow times (:func:`flow_time_grid`), it gives each run's records
(:func:`at_learning_rate`) for the price of one solve.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.ode import first_failure
from attndyn.dynamics.trajectory import Trajectory

__all__ = ["flow_time_grid", "at_learning_rate", "without_learning_rate", "runs_at_learning_rates"]


def flow_time_grid(lrs, records, record_every: int) -> np.ndarray:
  """``[U]`` increasing flow times ``lr·k·record_every`` (``k = 0..records``) of every ``lr``.

  Args:
    lrs: the learning rates.
    records: recorded intervals each takes after step 0 (``TrainConfig.run_records``).
    record_every: steps between records.

  Returns:
    Float64, with times closer than a relative 1e-9 (the same flow time reached by two
    learning rates, up to rounding) kept once.
  """
  taus = np.concatenate([float(lr) * np.arange(int(n) + 1) * record_every
                         for lr, n in zip(lrs, records)])
  taus = np.unique(taus)
  keep = np.concatenate([[True], np.diff(taus) > 1e-9 * np.maximum(taus[1:], 1.0)])
  return taus[keep]


def at_learning_rate(flow: Trajectory, taus: jax.Array, lr, records, record_every: int,
                     n_records: int) -> Trajectory:
  """The run of learning rate ``lr`` read off a solve in flow time.

  Args:
    flow: one solve with ``lr = 1`` (its ``t`` is ``τ``), saved at ``taus``.
    taus: ``[U]`` its saved flow times (:func:`flow_time_grid`).
    lr: this run's learning rate.
    records: recorded intervals this run takes (``TrainConfig.run_records(lr)``); after
      them it stays put, as gradient descent does with ``train.flow_time``.
    record_every: steps between records.
    n_records: records of the sweep (``TrainConfig.n_records``).

  Returns:
    A :class:`Trajectory` in steps (``t = 0, record_every, ...``), as the solve of this
    ``lr`` alone would give, to the solver's tolerance: observables at the saved flow
    time nearest ``lr·min(k, records)·record_every``; ``failed_at`` the first record
    that is not finite, else the last record if the solve failed, else ``-1``; the
    solve's ``final_params`` and ``ode`` stats (shared by every ``lr`` read off it).
  """
  taus = jnp.asarray(taus)
  k = jnp.arange(n_records)
  tau_k = lr * jnp.minimum(k, records) * record_every
  above = jnp.clip(jnp.searchsorted(taus, tau_k), 1, taus.shape[0] - 1)
  nearer_below = (tau_k - taus[above - 1]) <= (taus[above] - tau_k)
  idx = jnp.where(nearer_below, above - 1, above)
  observables = jax.tree.map(lambda x: jnp.asarray(x)[idx], flow.observables)
  steps = (k * record_every).astype(flow.t.dtype)
  return Trajectory(t=steps, observables=observables, final_params=flow.final_params,
                    failed_at=first_failure(steps, observables, flow.ode.result != 0),
                    params=None, ode=flow.ode)


def without_learning_rate(inputs: dict, name: str = "train.lr") -> tuple:
  """The sweep points ``inputs`` (coordinate -> ``[P]`` array) grouped by every coordinate but
  the learning rate ``name``: the points of a group follow one solve in flow time.

  Returns:
    ``(base, group)``: ``base`` the groups' first points, in sweep order (coordinate ->
    ``[G]`` array, ``name`` included: the first point's); ``group`` ``[P]``, each point's
    index in ``base``.
  """
  others = [n for n in inputs if n != name]
  rows = np.stack([np.asarray(inputs[n], np.float64) for n in others], axis=1)
  _, first, group = np.unique(rows, axis=0, return_index=True, return_inverse=True)
  order = np.argsort(first)                      # the groups, in sweep order
  rank = np.empty_like(order)
  rank[order] = np.arange(order.size)
  base = {n: np.asarray(x)[first[order]] for n, x in inputs.items()}
  return base, rank[np.ravel(group)]


def runs_at_learning_rates(flow: Trajectory, group, taus, lr, records, record_every: int,
                           n_records: int) -> Trajectory:
  """Each point's run (:func:`at_learning_rate`, leading axis ``P``) read off its group's
  solve: ``flow`` the groups' solves in flow time (leading axis ``G``), ``group``, ``lr`` and
  ``records`` ``[P]`` (:func:`without_learning_rate`), the rest as :func:`at_learning_rate`.
  Returned as NumPy arrays."""
  return jax.tree.map(np.asarray, _runs_at_learning_rates(flow, group, taus, lr, records,
                                                          record_every, n_records))


# One compiled program: op by op, the indexing and failure checks compiled a program each.
@functools.partial(jax.jit, static_argnums=(5, 6))
def _runs_at_learning_rates(flow, group, taus, lr, records, record_every, n_records):
  return jax.vmap(at_learning_rate, (0, None, 0, 0, None, None))(
      jax.tree.map(lambda x: x[group], flow), taus, lr, records, record_every, n_records)
