"""How a sweep of runs is computed (not what it computes): the choices that set its speed.

Gradient descent on the exact fast path (:mod:`dynamics.fast_lu`, where
:func:`fast_path_applies` says so) or by autodiff; a chunk's points vmapped together or one
after another; the reduced ODE solved once for a chunk's points; the ODEs of every learning
rate solved once in flow time; each stage's XLA options; the points per compiled call. Pure
decisions from plain configuration (the model's and training's configs, the sweep's grid, the
ODE kinds, the devices): :func:`plan` takes them all and returns a :class:`Plan`, which
``attndyn.pipeline.run`` follows (it builds the functions and runs the stages, and decides
nothing).
"""
import dataclasses
import os
from typing import Any, NamedTuple, Optional

import jax

from attndyn.dynamics.fast_lu import COMPILER_OPTIONS as FAST_COMPILER_OPTIONS
from attndyn.dynamics.fast_lu import FastPathCheck, fast_path_applies
from attndyn.dynamics.ode import LINEAR_COMPILER_OPTIONS as FLOW_LINEAR_COMPILER_OPTIONS
from attndyn.dynamics.reduced_ode import COMPILER_OPTIONS as REDUCED_COMPILER_OPTIONS
from attndyn.dynamics.reduced_ode import LINEAR_COMPILER_OPTIONS as REDUCED_LINEAR_COMPILER_OPTIONS
from attndyn.models.classifiers import LINEAR_CLASSIFIERS

__all__ = ["REDUCED_KINDS", "SHARED_SOLVE_MAX_POINTS", "StagePlan", "Plan", "fast_path_for_sweep",
           "gd_stage", "ode_stage", "lrs_together", "host_bytes", "device_budget",
           "points_per_call", "plan"]

# The ODEs solved by the reduced-ODE code (dynamics.reduced_ode): one system per chunk for
# FC/TC, and its XLA options.
REDUCED_KINDS = ("reduced", "extended")
# The share of a device's memory (or of the host's RAM, on CPU) a chunk may use.
_BUDGET_FRACTION = 0.5
# From this many points per call the reduced ODE of FC/TC is solved point by point (vmapped,
# each point its own step size) rather than as one system: the shared step is the smallest any
# point needs at each time, so its steps grow with the points (`python -m
# benchmarks.ode_width`, docs/measurements/ode-width.md: on a 2-core CPU, cold, the shared
# solve was the faster at 160 points and the slower at 240).
SHARED_SOLVE_MAX_POINTS = 200


class StagePlan(NamedTuple):
  """How one stage of a sweep is computed.

  Attributes:
    path: gradient descent: ``"fast"`` (:mod:`dynamics.fast_lu`), ``"generic"`` (autodiff,
      :func:`dynamics.make_train`) or ``"none"`` (not run); an ODE: ``"sweep"`` (one solve
      for all of a chunk's points, :func:`dynamics.reduced_sen_ode_sweep`) or ``"point"``
      (a solve per point).
    reason: why, one line.
    serial: the chunk's points are computed one after another (``lax.map``), each with its
      own number of steps, rather than vmapped.
    compiler_options: XLA options of the stage's compiled call (``None``: XLA's defaults).
  """
  path: str
  reason: str
  serial: bool = False
  compiler_options: Optional[dict] = None


class Plan(NamedTuple):
  """How a whole sweep is computed (:func:`plan`).

  Attributes:
    gd: the gradient-descent stage.
    odes: ODE kind -> its :class:`StagePlan`, in the order they run.
    lrs_together: the ODEs are solved once for every learning rate of the grid, in flow time
      (:func:`lrs_together`).
    chunk_size: sweep points per compiled call (``None``: the whole sweep at once).
  """
  gd: StagePlan
  odes: dict
  lrs_together: bool
  chunk_size: Optional[int]


def fast_path_for_sweep(model_cfg, train_cfg, grid=(), n_datasets: int = 1, *,
                        loss_fn: Any = "lu") -> FastPathCheck:
  """Whether the exact fast path runs a sweep's gradient descent: :func:`fast_path_applies`
  at every value of the sweep's grid too (a trained query needs ``key_std = 0`` at each
  point), on one dataset shared by every seed.

  Args:
    model_cfg: the model configuration.
    train_cfg: the training configuration.
    grid: ``(name, values)`` pairs, names ``"model.<field>"`` or ``"train.<field>"``.
    n_datasets: datasets of the sweep (its data seeds).
    loss_fn: the loss trained (:func:`fast_path_applies`; ``"lu"``: the Lu model's own).
  """
  if n_datasets != 1:
    return FastPathCheck(False, "several data seeds: the seeds do not share one dataset")
  for name, values in grid:
    section, key = name.split(".")
    for value in values:
      point = {"model": model_cfg, "train": train_cfg}
      point[section] = dataclasses.replace(point[section], **{key: value})
      verdict = fast_path_applies(point["model"], point["train"], loss_fn=loss_fn)
      if not verdict:
        return FastPathCheck(False, f"at sweep.grid[{name!r}] = {value!r}: {verdict.reason}")
  return fast_path_applies(model_cfg, train_cfg, loss_fn=loss_fn)


def _on_cpu(devices) -> bool:
  return (jax.devices() if devices is None else list(devices))[0].platform == "cpu"


def gd_stage(model_cfg, train_cfg, *, gd_path: str = "auto", grid=(), n_datasets: int = 1,
             loss_fn: Any = "lu", devices=None) -> StagePlan:
  """The gradient-descent stage: the fast path wherever :func:`fast_path_for_sweep` says so
  (``gd_path`` ``"auto"`` or ``"fast"``), autodiff otherwise or with ``gd_path = "generic"``.

  Autodiff on CPU devices computes a chunk's points one after another: XLA:CPU runs a vmapped
  autodiff step of per-point parameter tables (batched gathers and scatters) slower than the
  points in turn (``python -m benchmarks.run``: ``attndyn_generic`` against
  ``attndyn_generic_serial``). On accelerators it vmaps them.
  """
  if gd_path == "generic":
    verdict = FastPathCheck(False, "gd_path = generic")
  else:
    verdict = fast_path_for_sweep(model_cfg, train_cfg, grid, n_datasets, loss_fn=loss_fn)
  if verdict:
    return StagePlan("fast", verdict.reason, compiler_options=FAST_COMPILER_OPTIONS)
  return StagePlan("generic", verdict.reason, serial=_on_cpu(devices))


def ode_stage(kind: str, classifier: str, shared_data: bool,
              points: Optional[int] = None) -> StagePlan:
  """An ODE stage (``kind``: ``"reduced"``, ``"extended"``, ``"gradient_flow"``; ``points``:
  the points of one compiled call, ``None`` if not known).

  Points sharing one dataset solve the reduced ODE together (one ``diffeqsolve`` per chunk),
  except with TL, whose ReLU kinks cut each seed's steps at its own times: shared steps would
  take them all, more steps than per-seed solves take together. FC/TC's smooth fields have the
  same cost in a milder form, which grows with the points: from
  :data:`SHARED_SOLVE_MAX_POINTS` points per call they are vmapped, each point with its own
  step size (a larger program to compile, fewer steps to run). TL's ODEs run one point after
  another, so each takes its own number of steps: vmapped, every point steps until the slowest
  is done (the seeds' step counts differ several-fold), and a vmapped vector field costs no
  less than the points' own (the reduced ODE of the atlas's quick TL base bucket:
  ``python -m benchmarks.atlas --compare``). The reduced ODE's XLA options depend on whether
  the classifier is linear (:data:`dynamics.reduced_ode.LINEAR_COMPILER_OPTIONS`); so do the
  gradient flow's (:data:`dynamics.ode.LINEAR_COMPILER_OPTIONS` for FC/TC, XLA's defaults
  for TL).
  """
  serial = classifier == "tl"
  if kind not in REDUCED_KINDS:
    flow_options = FLOW_LINEAR_COMPILER_OPTIONS if classifier in LINEAR_CLASSIFIERS else None
    return StagePlan("point", "the gradient flow: a solve per point", serial, flow_options)
  options = (REDUCED_LINEAR_COMPILER_OPTIONS if classifier in LINEAR_CLASSIFIERS
             else REDUCED_COMPILER_OPTIONS)
  if serial:
    return StagePlan("point", "TL: a solve per point, each with its own steps", serial, options)
  if not shared_data:
    return StagePlan("point", "several data seeds: a solve per point", serial, options)
  if points is not None and points >= SHARED_SOLVE_MAX_POINTS:
    return StagePlan("point", f"{points} points per call: a solve per point, vmapped (one "
                     f"shared step from {SHARED_SOLVE_MAX_POINTS} points takes more steps)",
                     serial, options)
  return StagePlan("sweep", "one dataset: one solve for a chunk's points", serial, options)


def lrs_together(train_cfg, grid=()) -> bool:
  """Whether the ODEs are solved once for every learning rate of the grid.

  Their velocity is ``lr`` times a function of the state (the gradient flow, eqs 5-6;
  the reduced ODE, eqs 7-8), so in flow time ``τ = lr·t`` the points that differ only
  in ``lr`` follow one trajectory (:mod:`dynamics.flow_time`). With ``train.flow_time``
  set and every learning rate's run ending at the same flow time (``lr`` × its run
  steps, as the atlas chooses them), one solve to that time, saved at every learning
  rate's recorded flow times, is each run's solve, and its final parameters are each
  run's: ``n_lr`` solves become one.
  """
  lrs = dict(grid).get("train.lr")
  if train_cfg.flow_time is None or lrs is None or len(lrs) < 2:
    return False
  ends = [lr * train_cfg.run_steps(lr) for lr in lrs]
  return max(ends) - min(ends) <= 1e-9 * max(ends)


def host_bytes() -> int:
  """The host's physical memory (8 GiB when the OS does not say)."""
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return 8 << 30


def device_budget(devices=None) -> int:
  """Bytes one device may use: half its memory, or its share of half the host's RAM (CPU).

  Only this process's devices are inspected (the others may sit on other hosts).
  """
  devices = jax.devices() if devices is None else list(devices)
  local = [d for d in devices if d.process_index == jax.process_index()] or devices[:1]
  limits = []
  for d in local:
    try:
      stats = d.memory_stats()
    except Exception:  # not supported by this backend
      stats = None
    if stats and stats.get("bytes_limit"):
      limits.append(stats["bytes_limit"])
  if len(limits) == len(local):
    return int(_BUDGET_FRACTION * min(limits))
  return int(_BUDGET_FRACTION * host_bytes() / len(local))


def points_per_call(n_points: int, bytes_per_point: int, devices=None,
               configured: Optional[int] = None) -> Optional[int]:
  """Sweep points per compiled call: ``configured``, else as many as :func:`device_budget`
  holds, or ``None`` (all at once) when the whole sweep fits; each device holds
  ``chunk / n_devices`` points of a chunk.

  The estimate depends only on the sizes and the machine (device memory limits or host RAM,
  never the memory free right now); a checkpointed run records it, and a resumed run reuses
  the recorded value.
  """
  if configured:
    return configured
  n_dev = len(jax.devices() if devices is None else devices)
  per_device = device_budget(devices) // max(bytes_per_point, 1)
  if per_device * n_dev >= n_points:
    return None
  return max(n_dev, int(per_device) * n_dev)


def plan(model_cfg, train_cfg, *, ode_kinds=(), grid=(), n_datasets: int = 1,
         gd: bool = True, gd_path: str = "auto", n_points: int = 1, bytes_per_point: int = 0,
         chunk_size: Optional[int] = None, loss_fn: Any = "lu", devices=None) -> Plan:
  """How a sweep is computed: every stage's :class:`StagePlan`, and the chunking.

  Args:
    model_cfg: the model configuration (:class:`models.LuModelConfig`).
    train_cfg: the training configuration (:class:`dynamics.TrainConfig`).
    ode_kinds: the ODEs solved beside gradient descent, in order.
    grid: the sweep's ``(name, values)`` pairs (``"model.<field>"``, ``"train.<field>"``).
    n_datasets: the sweep's datasets (data seeds); one is shared by every point.
    gd: whether gradient descent runs at all.
    gd_path: ``"auto"``, ``"fast"`` (already known to apply) or ``"generic"``.
    n_points: the sweep's points.
    bytes_per_point: a point's peak memory (for the chunk size).
    chunk_size: points per compiled call asked for (``None``: :func:`points_per_call`'s
      estimate from ``bytes_per_point``).
    loss_fn: the loss gradient descent trains (``"lu"``: the Lu model's own cross-entropy,
      what ``attndyn run`` trains; any other goes by autodiff, :func:`fast_path_applies`).
    devices: the devices the sweep is sharded over (default: all visible).
  """
  if gd:
    gd_plan = gd_stage(model_cfg, train_cfg, gd_path=gd_path, grid=grid, n_datasets=n_datasets,
                       loss_fn=loss_fn, devices=devices)
  else:
    gd_plan = StagePlan("none", "gd = False")
  chunk = points_per_call(n_points, bytes_per_point, devices, chunk_size)
  together = lrs_together(train_cfg, grid)
  # the ODE stage's points per call: the chunk, of the points without their lr when the
  # learning rates are solved together (pipeline._solved_over_lrs)
  ode_points = n_points // len(dict(grid)["train.lr"]) if together else n_points
  ode_points = ode_points if chunk is None else min(chunk, ode_points)
  odes = {kind: ode_stage(kind, model_cfg.classifier, n_datasets == 1, ode_points)
          for kind in ode_kinds}
  return Plan(gd_plan, odes, together, chunk)
