"""The one result type of every time evolution: discrete training and ODE solves alike."""
from typing import Any, NamedTuple, Optional

import jax
import numpy as np

__all__ = ["FAILURE_REASONS", "ODEStats", "failure_reason", "Trajectory", "checked_record"]

# Why an ODE solve stopped early, by code (``ODEStats.reason``). "max_steps": diffrax ran out
# of steps (a solution that blows up usually ends here too: the adaptive steps shrink towards
# the singularity); "non_finite": a recorded observable is NaN/Inf although the solver went
# on (a step forced at ``dtmin``, or the record itself overflowed); "step_size_underflow":
# diffrax's ``dt_min_reached`` (a step below ``dtmin`` that is not forced); "solver_error":
# any other diffrax failure.
FAILURE_REASONS = ("none", "max_steps", "non_finite", "step_size_underflow", "solver_error")


class ODEStats(NamedTuple):
  """What a diffrax solve reports about itself, per run (the Trajectory's leading axes).

  The counterpart of ``diffrax.Solution``'s ``result`` and ``stats``, kept as arrays so it
  survives ``vmap`` and ``run_sweep`` (solves use ``throw=False``).

  Attributes:
    reason: ``[...]`` int32 index into :data:`FAILURE_REASONS` (0: none).
    result: ``[...]`` int32 ``diffrax.RESULTS`` code of the solve (0: successful).
    num_steps: ``[...]`` solver steps taken (accepted + rejected).
    num_accepted_steps: ``[...]``.
    num_rejected_steps: ``[...]``.
  """
  reason: jax.Array
  result: jax.Array
  num_steps: jax.Array
  num_accepted_steps: jax.Array
  num_rejected_steps: jax.Array


def failure_reason(code) -> Optional[str]:
  """:data:`FAILURE_REASONS` name of one run's ``ODEStats.reason`` code; ``None`` for none."""
  name = FAILURE_REASONS[int(np.asarray(code))]
  return None if name == "none" else name


class Trajectory(NamedTuple):
  """Observables recorded along one run (or a sweep of runs: extra leading axes).

  Time is in optimiser steps for every kind of run: step ``n`` of gradient
  descent and time ``t = n`` of its continuous limit are the same point, because
  the learning rate is folded into the vector field (``dθ/dt = -lr ∇L``).

  Attributes:
    t: ``[..., T]`` recorded times (steps), float.
    observables: pytree, each leaf ``[..., T, ...]``, whatever the caller's
      ``record`` function returned at each recorded time.
    final_params: parameters at the end (leaves ``[..., ...]``); for the reduced
      ODE, the full parameter pytree with the topic words' rows updated.
    failed_at: ``[...]`` first time at which the run went non-finite (NaN/Inf
      loss or parameters; for ODEs also a solver failure), ``-1`` if it never
      did. A failed discrete run is frozen at its last finite parameters.
    params: the full parameters at every recorded time (leaves ``[..., T, ...]``)
      when asked for, else ``None``.
    ode: :class:`ODEStats` of an ODE solve (diffrax's result code, step counts and
      the failure reason, each ``[...]``); ``None`` for discrete training.
  """
  t: jax.Array
  observables: Any
  final_params: Any
  failed_at: jax.Array
  params: Any = None
  ode: Optional[ODEStats] = None


def checked_record(record):
  """``record`` that raises one line if it returns ``None`` (what a ``record`` without a
  ``return`` gives; an empty dict records nothing and is fine)."""
  def checked(params, params0):
    out = record(params, params0)
    if out is None:
      from attndyn.tasks.errors import ConfigError
      raise ConfigError(f"record {getattr(record, '__qualname__', '')!r} returned None: it must "
                        "return a pytree of arrays, e.g. {'loss': loss} (an empty dict "
                        "records nothing).")
    return out
  return checked
