"""The one result type of every time evolution: discrete training and ODE solves alike."""
from typing import Any, NamedTuple

import jax


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
  """
  t: jax.Array
  observables: Any
  final_params: Any
  failed_at: jax.Array
  params: Any = None
