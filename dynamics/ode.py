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

from attndyn.dynamics.optimizers import group_flags, trainable_mask
from attndyn.dynamics.trajectory import FAILURE_REASONS, ODEStats, Trajectory, checked_record
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError, check

__all__ = ["RTOL", "ATOL", "LINEAR_COMPILER_OPTIONS", "SOLVERS", "make_solver", "time_grid",
           "saved_times", "controller_for", "check_adjoint", "stopped_lr", "stopping_controller",
           "failure_time", "first_failure", "ode_stats", "split_trainable", "gradient_flow"]

# Default tolerances of the adaptive step-size controller for every ODE solve: the gradient
# flow, the reduced ODEs (dynamics.reduced_ode, dynamics.reduced_ode_sweep) and the CLI's [ode].
RTOL = 1e-6
ATOL = 1e-9

# XLA options for compiling the gradient flow with a linear classifier (FC/TC): LLVM at -O1 and
# XLA:CPU's loop emitters instead of its MLIR fusion emitters (dynamics.xla_options drops an
# option XLA lacks), as for the reduced ODE's linear velocity: most of the program is
# diffrax's step, controller and save logic, small kernels whose MLIR pipeline is most of the
# compile, and the run is no slower (`python -m benchmarks.xla_options --only flow` times both
# ways). Not for TL, whose long solves run slower than the compile they save.
LINEAR_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1,
                           "xla_cpu_use_fusion_emitters": False}

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


_SAVE_Y = diffrax.SaveAt(t1=True).subs.fn     # diffrax's default: save the state


def saved_times(ts, saveat) -> tuple:
  """``(times, t0, t1)``: the times observables are recorded at and the solve's span, from
  ``ts`` (an array of recorded times, or only the span when ``saveat`` is given) and
  ``saveat`` (a ``diffrax.SaveAt`` with one set of times: ``ts=``, ``t0=True``, ``t1=True``).

  Raises:
    ConfigError: neither given, a ``SaveAt`` with ``dense``, ``steps`` or its own ``fn``
      (``record`` is what is saved), several ``subs``, or no span.
  """
  if saveat is None:
    check(ts is not None, "ts", ts, "an array of recorded times, or saveat=diffrax.SaveAt(ts=...)")
    times = time_grid(ts)
    return times, times[0], times[-1]
  check(isinstance(saveat, diffrax.SaveAt), "saveat", type(saveat).__name__,
        "a diffrax.SaveAt")
  sub = saveat.subs
  check(isinstance(sub, diffrax.SubSaveAt) and not saveat.dense and not sub.steps
        and sub.fn is _SAVE_Y, "saveat", saveat,
        "a diffrax.SaveAt of times only (ts=, t0=, t1=): no subs, dense, steps or fn "
        "(record is what is saved)")
  span = None if ts is None else time_grid(ts)
  dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
  given = None if sub.ts is None else jnp.asarray(sub.ts, dtype)
  t0 = span[0] if span is not None else (given[0] if given is not None else None)
  t1 = span[-1] if span is not None else (given[-1] if given is not None else None)
  check(t0 is not None, "saveat", saveat, "with ts=, or t0/t1 together with ts=[t0, t1]")
  parts = ([jnp.reshape(t0, (1,))] if sub.t0 else []) + ([given] if given is not None else []) \
      + ([jnp.reshape(t1, (1,))] if sub.t1 else [])
  check(bool(parts), "saveat", saveat, "at least one time to save (ts=, t0=True or t1=True)")
  return jnp.concatenate(parts).astype(dtype), t0, t1


def controller_for(stepsize_controller, *, rtol, atol, dtmin, force_dtmin=True, dt0=None,
                   norm=None, t_end=None) -> diffrax.AbstractStepSizeController:
  """The solve's step-size controller: ``stepsize_controller`` (any diffrax one) if given,
  else a ``PIDController(rtol, atol, dtmin)`` (``rtol``/``atol`` ``None``: :data:`RTOL`,
  :data:`ATOL`); made to stop at ``t_end`` (:func:`stopping_controller`).

  Raises:
    ConfigError: a controller together with rtol/atol/dtmin (which it would ignore), a
      controller that is not diffrax's, or ``ConstantStepSize`` without ``dt0``.
  """
  if stepsize_controller is None:
    controller = diffrax.PIDController(rtol=RTOL if rtol is None else rtol,
                                       atol=ATOL if atol is None else atol, dtmin=dtmin,
                                       force_dtmin=force_dtmin,
                                       **({} if norm is None else {"norm": norm}))
  else:
    check(isinstance(stepsize_controller, diffrax.AbstractStepSizeController),
          "stepsize_controller", type(stepsize_controller).__name__,
          "a diffrax step-size controller (diffrax.PIDController(...), diffrax.ConstantStepSize())")
    given = [n for n, v in (("rtol", rtol), ("atol", atol), ("dtmin", dtmin)) if v is not None]
    check(not given, "stepsize_controller", type(stepsize_controller).__name__,
          f"without {', '.join(given)} (set them in the controller itself)")
    check(not isinstance(stepsize_controller, diffrax.ConstantStepSize) or dt0 is not None,
          "dt0", dt0, "a step size with diffrax.ConstantStepSize()")
    controller = stepsize_controller
  return stopping_controller(controller, t_end)


def check_adjoint(adjoint) -> diffrax.AbstractAdjoint:
  """``adjoint`` (how a solve is differentiated), or diffrax's default."""
  if adjoint is None:
    return diffrax.RecursiveCheckpointAdjoint()
  check(isinstance(adjoint, diffrax.AbstractAdjoint), "adjoint", type(adjoint).__name__,
        "a diffrax adjoint (diffrax.RecursiveCheckpointAdjoint(), diffrax.BacksolveAdjoint(), ...)")
  return adjoint


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


def split_trainable(params: Mapping, trainable: Any):
  """``(moving, fixed)``: the top-level groups that train, and the rest (``trainable`` a dict
  group -> bool, or any form of :mod:`dynamics.optimizers` that trains whole groups)."""
  flags = group_flags(trainable, params)
  if flags is None:
    raise ConfigError(f"trainable freezes part of a parameter group; this solver moves whole "
                      f"groups of {list(params)}: give a dict group -> bool.")
  trainable_mask(flags, params)          # a flag for every group: one line if not
  moving = {g: p for g, p in params.items() if flags[g]}
  fixed = {g: p for g, p in params.items() if not flags[g]}
  return moving, fixed


def _split(params: Any, trainable: Any):
  """``(moving, fixed, order, entries)`` of the gradient flow's state: the top-level groups
  with any trainable entry move; ``entries`` (``None`` when whole leaves train or not) is
  the mask of the moving groups whose entries are frozen one by one."""
  check(isinstance(params, Mapping), "params0", type(params).__name__,
        "a dict of parameter groups")
  mask = trainable_mask(trainable, params)
  moves = lambda m: any(f is not False for f in jax.tree.leaves(m))
  moving = {g: p for g, p in params.items() if moves(mask[g])}
  fixed = {g: p for g, p in params.items() if not moves(mask[g])}
  per_leaf = all(isinstance(f, bool) for f in jax.tree.leaves(mask))
  if per_leaf and all(all(jax.tree.leaves(mask[g])) for g in moving):
    return moving, fixed, tuple(params), None
  return moving, fixed, tuple(params), {g: mask[g] for g in moving}


def _zero_frozen_entries(velocity, entries):
  return jax.tree.map(lambda v, f: jnp.where(f, v, jnp.zeros_like(v)), velocity, entries)


def _merge(moving: Mapping, fixed: Mapping, order) -> dict:
  return {g: (moving[g] if g in moving else fixed[g]) for g in order}


def gradient_flow(loss_fn: Callable, params0: Any, batch: Batch, record: Callable, *,
                  lr, ts=None, trainable: Any, solver="tsit5",
                  rtol: Optional[float] = None, atol: Optional[float] = None,
                  max_steps: int = 100_000, dt0: Optional[float] = None,
                  dtmin: Optional[float] = None, force_dtmin: bool = True, t_end=None,
                  saveat: Optional[diffrax.SaveAt] = None,
                  stepsize_controller: Optional[diffrax.AbstractStepSizeController] = None,
                  adjoint: Optional[diffrax.AbstractAdjoint] = None) -> Trajectory:
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
      ``ts[0]`` to ``ts[-1]``. With ``saveat``, only the span (or omitted when
      ``saveat`` has ``ts``).
    trainable: which parameters train: a dict group -> bool
      (``LuModelConfig.trainable()``), a list of the groups that train, or a pytree of
      bools like the parameters (:mod:`dynamics.optimizers`); frozen leaves are not part
      of the ODE state, frozen entries of a leaf (a bool array) have zero velocity.
    solver: a name from :data:`SOLVERS` or a ``diffrax.AbstractSolver``.
    rtol: relative tolerance of the PID step-size controller (default :data:`RTOL`).
    atol: absolute tolerance of the PID step-size controller (default :data:`ATOL`).
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
    saveat: a ``diffrax.SaveAt`` of when to record (``ts=``, ``t0=True``, ``t1=True``),
      instead of ``ts``; ``record`` is what is saved.
    stepsize_controller: any diffrax step-size controller, instead of the PID controller
      of ``rtol``/``atol``/``dtmin`` (then leave those unset).
    adjoint: how the solve is differentiated (a ``diffrax.AbstractAdjoint``; default
      ``diffrax.RecursiveCheckpointAdjoint()``).

  Returns:
    A :class:`Trajectory` with ``t`` the recorded times, observables ``[K, ...]``,
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
  ts, t0, t1 = saved_times(ts, saveat)
  controller = controller_for(stepsize_controller, rtol=rtol, atol=atol, dtmin=dtmin,
                              force_dtmin=force_dtmin, dt0=dt0, t_end=t_end)
  record = checked_record(record)
  moving0, fixed, order, entries = _split(params0, trainable)

  def vector_field(t, y, args):
    lr_, fixed_, batch_, _ = args
    lr_ = stopped_lr(lr_, t, t_end)
    grads = jax.grad(lambda m: loss_fn(_merge(m, fixed_, order), batch_)[0])(y)
    velocity = jax.tree.map(lambda g: (-lr_ * g).astype(g.dtype), grads)
    return velocity if entries is None else _zero_frozen_entries(velocity, entries)

  def observe(t, y, args):
    del t
    _, fixed_, _, params0_ = args
    return record(_merge(y, fixed_, order), params0_)

  saves = diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=observe), diffrax.SubSaveAt(t1=True)])
  sol = diffrax.diffeqsolve(
      diffrax.ODETerm(vector_field), make_solver(solver), t0, t1, dt0, moving0,
      args=(lr, fixed, batch, params0), saveat=saves, stepsize_controller=controller,
      adjoint=check_adjoint(adjoint), max_steps=max_steps, throw=False)
  observables, final = sol.ys
  final_params = _merge(jax.tree.map(lambda x: x[-1], final), fixed, order)
  return Trajectory(t=ts, observables=observables, final_params=final_params,
                    failed_at=failure_time(ts, observables, sol.result), params=None,
                    ode=ode_stats(sol, ts, observables, final))
