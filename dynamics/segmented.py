"""Early stopping in segments: stop the whole sweep once every run has stopped.

:func:`dynamics.make_train_early_stopping` is one ``lax.scan`` of a fixed
number of steps: runs that stopped stay frozen but the program keeps going
until the last step. Here the caller's compiled, vmapped segment function (a
fixed number of steps of that early-stopping loop, started from given
parameters) is called again and again from the host, carrying every run's best
dev loss, best parameters and stopping step across segments, until every run
has stopped (or a step budget is spent). The best parameters and best step are
exactly those of one long run. Each segment's own patience counter starts
afresh, so on its own a segment stops a run up to one patience window late,
and never when the patience is longer than a segment; given ``patience_steps``
the host also counts from each run's best step across segments, and the stop
is exactly that of one long run.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 5.2 (early stopping of patience 100). https://arxiv.org/abs/2011.10036
"""
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.sweep import wait_ready

__all__ = ["SegmentState", "SegmentedRun", "run_segments"]


class SegmentState(NamedTuple):
  """Where :func:`run_segments` stands after a segment: enough to continue it exactly.

  Attributes:
    segments: segments finished.
    params: ``[P, ...]`` each run's current parameters (a stopped run's are frozen).
    best_params, best_value, best_step, stopped_at: as :class:`SegmentedRun`, so far.
    observables: host arrays ``[P, T_so_far, ...]`` recorded so far.
  """
  segments: int
  params: Any
  best_params: Any
  best_value: np.ndarray
  best_step: np.ndarray
  stopped_at: np.ndarray
  observables: Any


class SegmentedRun(NamedTuple):
  """Runs (leading axis ``P``) trained in segments with early stopping on a monitored loss.

  Attributes:
    steps: ``[T]`` recorded steps (0, record_every, ..., the last segment's end).
    observables: pytree of host arrays ``[P, T, ...]``; after a run stopped, its
      records repeat its value at the stop.
    best_params: parameters at each run's lowest monitored value.
    best_step: ``[P]`` the step of that value.
    best_value: ``[P]`` the value.
    stopped_at: ``[P]`` the step at which patience ran out, ``-1`` if it never did.
  """
  steps: np.ndarray
  observables: Any
  best_params: Any
  best_step: np.ndarray
  best_value: np.ndarray
  stopped_at: np.ndarray


def run_segments(segment_fn: Callable, params0: Any, *, segment: int, max_segments: int,
                 record_every: int, on_segment: Optional[Callable[[int, np.ndarray], None]] = None,
                 patience_steps: Optional[int] = None, start: Optional[SegmentState] = None,
                 on_state: Optional[Callable[[SegmentState], None]] = None) -> SegmentedRun:
  """Call ``segment_fn`` until every run stopped or ``max_segments`` segments ran.

  Args:
    segment_fn: ``params [P, ...] -> EarlyStopped`` (batched over ``P``), e.g.
      ``jax.jit(jax.vmap(lambda p: make_train_early_stopping(...)(p, key)))``
      with ``segment`` steps recorded every ``record_every``; its ``best_value``
      must be lower-is-better (``monitor="dev_loss"``).
    params0: ``[P, ...]`` initial parameters.
    segment: steps per segment.
    max_segments: the most segments to run.
    record_every: the record interval of ``segment_fn``.
    on_segment: called as ``on_segment(k, stopped_at)`` after segment ``k``.
    patience_steps: the early stopping's patience in steps (``patience ×
      eval_every``): a run whose best step lies that far before a segment's end
      stopped at ``best_step + patience_steps``, as in one long run (its records
      after that step, up to the segment's end, are of continued training).
    start: a :class:`SegmentState` from ``on_state`` of an earlier, interrupted call
      with the same arguments: the call continues from it and returns what one
      uninterrupted call returns (``segment_fn`` is deterministic).
    on_state: called with the :class:`SegmentState` after every segment (a caller's
      checkpoint; this module writes no files).

  Returns:
    A :class:`SegmentedRun`.
  """
  params, best_params = params0, params0
  n = jax.tree.leaves(params0)[0].shape[0]
  best_value = np.full(n, np.inf)
  best_step = np.zeros(n, np.int64)
  stopped = np.full(n, -1, np.int64)
  chunks, last, first = [], None, 0
  if start is not None:
    first = start.segments
    params = jax.tree.map(jnp.asarray, start.params)
    best_params = jax.tree.map(jnp.asarray, start.best_params)
    best_value, best_step, stopped = (np.asarray(x).copy() for x in
                                      (start.best_value, start.best_step, start.stopped_at))
    chunks = [jax.tree.map(np.asarray, start.observables)]
    last = jax.tree.map(lambda x: x[:, -1], chunks[0])
  for k in range(first, max_segments):
    if np.all(stopped >= 0):   # a resumed call whose last segment had stopped every run
      break
    # dispatched asynchronously: wait where a signal stops the call at once, then fetch
    res = wait_ready(segment_fn(params))
    obs = jax.tree.map(np.asarray, res.trajectory.observables)
    active = stopped < 0
    if last is not None:   # a run that stopped earlier keeps its last record
      obs = jax.tree.map(lambda x, l: np.where(active.reshape((-1,) + (1,) * (x.ndim - 1)), x,
                                               l[:, None]), obs, last)
      obs = jax.tree.map(lambda x: x[:, 1:], obs)   # its first record repeats the previous last
    chunks.append(obs)
    last = jax.tree.map(lambda x: x[:, -1], obs)
    value = np.asarray(res.best_value, np.float64)
    improved = active & (value < best_value)
    best_value = np.where(improved, value, best_value)
    best_step = np.where(improved, k * segment + np.asarray(res.best_step), best_step)
    flag = jnp.asarray(improved)
    best_params = jax.tree.map(lambda a, b: jnp.where(flag.reshape((-1,) + (1,) * (a.ndim - 1)), a, b),
                               res.best_params, best_params)
    now = active & (np.asarray(res.stopped_at) >= 0)
    stopped = np.where(now, k * segment + np.asarray(res.stopped_at), stopped)
    if patience_steps is not None:
      late = active & ((k + 1) * segment - best_step >= patience_steps)
      stopped = np.where(late, np.minimum(np.where(now, stopped, np.iinfo(np.int64).max),
                                          best_step + patience_steps), stopped)
    keep = jnp.asarray(stopped < 0)
    params = jax.tree.map(lambda a, b: jnp.where(keep.reshape((-1,) + (1,) * (a.ndim - 1)), a, b),
                          res.trajectory.final_params, params)
    if on_segment is not None:
      on_segment(k, stopped)
    if on_state is not None:
      so_far = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)
      on_state(SegmentState(k + 1, jax.tree.map(np.asarray, params),
                            jax.tree.map(np.asarray, best_params), best_value, best_step,
                            stopped, so_far))
      chunks = [so_far]
    if np.all(stopped >= 0):
      break
  observables = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)
  t = jax.tree.leaves(observables)[0].shape[1]
  return SegmentedRun(steps=np.arange(t) * record_every, observables=observables,
                      best_params=best_params, best_step=best_step, best_value=best_value,
                      stopped_at=stopped)
