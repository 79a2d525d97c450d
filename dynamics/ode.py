"""Gradient flow: the continuous-time limit of full-batch gradient descent, solved by diffrax.

Time is in optimiser steps with the learning rate folded into the vector field,
``dθ/dt = -lr ∇L(θ)``, so GD step ``n`` and time ``t = n`` are the same point
(see :class:`dynamics.trajectory.Trajectory`). Only the caller's observables are
saved (``SaveAt(fn=...)``), never the state history.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 4 (footnote 2: GD as the Euler discretisation of the flow).
  https://arxiv.org/abs/2011.10036
"""
from typing import Any, Callable, Mapping, Optional

import diffrax
import jax
import jax.numpy as jnp

from dynamics.trajectory import FAILURE_REASONS, ODEStats, Trajectory
from tasks.batch import Batch
from tasks.errors import ConfigError, check

# Default tolerances of the adaptive step-size controller for every ODE solve: the gradient
# flow, the reduced ODEs (dynamics.reduced_ode, dynamics.reduced_ode_sweep) and the CLI's [ode].
RTOL = 1e-6
ATOL = 1e-9

# Adaptive explicit Runge–Kutta solvers with an embedded error estimate.
SOLVERS = {
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "bosh3": diffrax.Bosh3,
    "heun": diffrax.Heun,
}


def make_solver(solver) -> diffrax.AbstractSolver:
  """A diffrax solver from its name (``tsit5``, ``dopri5``, ...) or an instance."""
  if isinstance(solver, diffrax.AbstractSolver):
    return solver
  check(solver in SOLVERS, "solver", solver, f"one of {', '.join(SOLVERS)} or a diffrax solver")
  return SOLVERS[solver]()


def time_grid(ts) -> jax.Array:
  """The recorded times as a float array of the default precision; checks they increase."""
  ts = jnp.asarray(ts, dtype=jax.dtypes.canonicalize_dtype(jnp.float64))
  check(ts.ndim == 1 and ts.shape[0] >= 2, "ts", ts.shape, "a 1-D array of at least 2 times")
  return ts


def stopped_lr(lr, t, t_end):
  """``lr`` before ``t_end`` and 0 from there (``t_end=None``: ``lr``): a run that stops at
  step ``t_end`` (``train.flow_time``). Every velocity here is linear in lr, so a zero lr
  holds the state where it is."""
  if t_end is None:
    return lr
  return jnp.where(t < t_end, lr, jnp.zeros_like(lr))


def stopping_controller(controller, t_end):
  """``controller``, made to step to just before and after each ``t_end`` (diffrax's
  ``jump_ts``) where a run stops, rather than reject steps to find the jump of
  :func:`stopped_lr`; unchanged when ``t_end`` is ``None``."""
  if t_end is None:
    return controller
  return diffrax.ClipStepSizeController(controller, jump_ts=jnp.sort(jnp.ravel(t_end)))


def failure_time(ts: jax.Array, observables: Any, result) -> jax.Array:
  """``failed_at`` of an ODE solve: ``-1`` if fine, else when it went wrong.

  Args:
    ts: ``[K]`` saved times.
    observables: pytree, leaves ``[K, ...]``; diffrax leaves times it never
      reached filled with ``inf``.
    result: the solve's ``diffrax.RESULTS``.

  Returns:
    Scalar of ``ts.dtype``: the first saved time whose observables are not all
    finite; ``ts[-1]`` if they all are but the solver reported a failure; ``-1``
    if neither.
  """
  return first_failure(ts, observables, result != diffrax.RESULTS.successful)


def first_failure(ts: jax.Array, observables: Any, solver_failed) -> jax.Array:
  """:func:`failure_time` with the solver's failure given as a bool (e.g. from
  ``ODEStats.result != 0``, when the diffrax result itself is gone)."""
  bad = _non_finite_times(ts, observables)
  first_bad = ts[jnp.argmax(bad)]
  return jnp.where(bad.any(), first_bad,
                   jnp.where(solver_failed, ts[-1], -jnp.ones((), ts.dtype))).astype(ts.dtype)


def _non_finite_times(ts: jax.Array, observables: Any) -> jax.Array:
  """``[K]`` bool: the saved times whose observables are not all finite."""
  bad = jnp.zeros(ts.shape, bool)
  for x in jax.tree.leaves(observables):
    bad = bad | ~jnp.all(jnp.isfinite(x.reshape(x.shape[0], -1)), axis=1)
  return bad


def ode_stats(sol: diffrax.Solution, ts: jax.Array, observables: Any,
              final_state: Any = None) -> ODEStats:
  """The :class:`dynamics.trajectory.ODEStats` of a solve: diffrax's result code and step
  counts, and why it failed (:data:`dynamics.trajectory.FAILURE_REASONS`).

  "non_finite" if the state where the solve stopped (``final_state``, saved at ``t1``) is
  not all finite; else diffrax's own code ("max_steps", "step_size_underflow",
  "solver_error"); else "non_finite" if a recorded observable is, else "none". The
  observables alone cannot tell a blow-up from running out of steps: diffrax fills the
  times it never reached with ``inf``.
  """
  code = lambda name: jnp.int32(FAILURE_REASONS.index(name))
  finite = lambda tree: jnp.all(jnp.asarray([jnp.all(jnp.isfinite(x))
                                             for x in jax.tree.leaves(tree)] or [True]))
  result = sol.result
  by_result = jnp.where(
      result == diffrax.RESULTS.successful,
      jnp.where(_non_finite_times(ts, observables).any(), code("non_finite"), code("none")),
      jnp.where(result == diffrax.RESULTS.max_steps_reached, code("max_steps"),
                jnp.where(result == diffrax.RESULTS.dt_min_reached, code("step_size_underflow"),
                          code("solver_error"))))
  reason = by_result if final_state is None else jnp.where(
      finite(final_state), by_result, code("non_finite"))
  as_int = lambda x: jnp.asarray(x, jnp.int32)
  return ODEStats(reason=as_int(reason), result=as_int(result._value),
                  num_steps=as_int(sol.stats["num_steps"]),
                  num_accepted_steps=as_int(sol.stats["num_accepted_steps"]),
                  num_rejected_steps=as_int(sol.stats["num_rejected_steps"]))


def split_trainable(params: Mapping, trainable: Mapping[str, bool]):
  """``(moving, fixed)``: the top-level groups that train, and the rest."""
  missing = [g for g in params if g not in trainable]
  if missing:
    raise ConfigError(f"trainable = {dict(trainable)!r} does not say whether {missing} train: "
                      f"give a flag for every parameter group of {list(params)}.")
  moving = {g: p for g, p in params.items() if trainable[g]}
  fixed = {g: p for g, p in params.items() if not trainable[g]}
  return moving, fixed


def _merge(moving: Mapping, fixed: Mapping, order) -> dict:
  return {g: (moving[g] if g in moving else fixed[g]) for g in order}


def gradient_flow(loss_fn: Callable, params0: Any, batch: Batch, record: Callable, *,
                  lr, ts, trainable: Mapping[str, bool], solver="tsit5",
                  rtol: float = RTOL, atol: float = ATOL, max_steps: int = 100_000,
                  dt0: Optional[float] = None, dtmin: Optional[float] = None,
                  force_dtmin: bool = True, t_end=None) -> Trajectory:
  """Solve the gradient flow of the full model and record observables.

  .. math:: \\frac{d\\theta}{dt} = -\\mathrm{lr}\\, \\nabla_\\theta L(\\theta),
     \\qquad \\frac{d\\theta_g}{dt} = 0 \\text{ for frozen groups } g

  the continuous limit of full-batch gradient descent ``θ ← θ - lr ∇L`` with
  time in steps (Lu et al. 2021, eqs 1-2 → 5-6 and footnote 2). Frozen groups
  are not part of the ODE state at all. Pure: jit it, vmap it over seeds
  (``params0`` batched) or learning rates (``lr`` traced).

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``, e.g.
      ``models.make_loss(models.lu.apply)``.
    params0: initial parameters, a dict of top-level groups.
    batch: the full training set.
    record: ``record(params, params0) -> pytree`` of float observables,
      evaluated on the full parameters at each time of ``ts``.
    lr: learning rate (float or traced scalar).
    ts: ``[K]`` increasing recorded times in steps; the solve runs from
      ``ts[0]`` to ``ts[-1]``.
    trainable: group -> whether it trains (``LuModelConfig.trainable()``).
    solver: a name from :data:`SOLVERS` or a ``diffrax.AbstractSolver``.
    rtol: relative tolerance of the PID step-size controller.
    atol: absolute tolerance of the PID step-size controller.
    max_steps: most solver steps before giving up (reported via ``failed_at``).
    dt0: initial step (``None``: chosen by diffrax).
    dtmin: smallest step; a step this small is accepted whatever its error
      estimate (diffrax ``force_dtmin``). Leave ``None`` for smooth models. A
      ReLU classifier (TL) makes the vector field discontinuous; where the flow
      slides along a kink (a Filippov sliding mode) the adaptive controller
      stalls until ``max_steps``, and a floor such as ``0.1`` (a tenth of an
      optimiser step) lets it chatter through the way GD does.
    force_dtmin: whether a step at ``dtmin`` is forced (the default, above); if
      false, the solve stops there instead, reported as "step_size_underflow".
    t_end: if set, the time (in steps) at which the run stops: the learning rate is 0
      from there (its state stays put, as GD's does with ``train.flow_time``).

  Returns:
    A :class:`Trajectory` with ``t = ts``, observables ``[K, ...]``,
    ``final_params`` (the state where the solve stopped), ``failed_at`` (first
    recorded time with non-finite observables, ``ts[-1]`` if only the solver
    reported failure, ``-1`` if fine), ``params=None`` and ``ode``
    (:class:`dynamics.trajectory.ODEStats`: diffrax's result code, step counts and
    the failure reason).

  Raises:
    ConfigError: a parameter group missing from ``trainable``, a bad solver
      name, or a bad ``ts``.

  References:
    https://arxiv.org/abs/2011.10036
  """
  ts = time_grid(ts)
  moving0, fixed = split_trainable(params0, trainable)
  order = tuple(params0)

  def vector_field(t, y, args):
    lr_, fixed_, batch_, _ = args
    lr_ = stopped_lr(lr_, t, t_end)
    grads = jax.grad(lambda m: loss_fn(_merge(m, fixed_, order), batch_)[0])(y)
    return jax.tree.map(lambda g: (-lr_ * g).astype(g.dtype), grads)

  def observe(t, y, args):
    del t
    _, fixed_, _, params0_ = args
    return record(_merge(y, fixed_, order), params0_)

  saveat = diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=observe), diffrax.SubSaveAt(t1=True)])
  sol = diffrax.diffeqsolve(
      diffrax.ODETerm(vector_field), make_solver(solver), ts[0], ts[-1], dt0, moving0,
      args=(lr, fixed, batch, params0), saveat=saveat,
      stepsize_controller=stopping_controller(
          diffrax.PIDController(rtol=rtol, atol=atol, dtmin=dtmin, force_dtmin=force_dtmin),
          t_end),
      max_steps=max_steps, throw=False)
  observables, final = sol.ys
  final_params = _merge(jax.tree.map(lambda x: x[-1], final), fixed, order)
  return Trajectory(t=ts, observables=observables, final_params=final_params,
                    failed_at=failure_time(ts, observables, sol.result), params=None,
                    ode=ode_stats(sol, ts, observables, final))
