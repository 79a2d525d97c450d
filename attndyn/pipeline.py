"""One ``attndyn run``: gradient descent and the ODEs over a sweep, as compiled vmapped calls.

Orchestration only: the data come from :mod:`tasks`, the model from
:mod:`models`, training, ODEs and sweeping from :mod:`dynamics`, what is
recorded from :mod:`analysis`. Each sweep point is ``(data seed, grid values,
init seed)``; the GD run and every ODE of a point start from the same
parameters, ``models.lu.init(jax.random.PRNGKey(seed), ...)``, and are recorded
at the same times (steps ``0, record_every, ..., steps``).
"""
import dataclasses
import functools
import time
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import tasks
from attndyn.chunking import bytes_per_point
from attndyn.config import RunConfig
from attndyn.progress import ProgressBar
from attndyn.dynamics import flow_time, strategy, xla_options
from attndyn.tasks.errors import ConfigError

__all__ = ["RunResult", "precision_scope", "sweep_inputs", "plan", "gd_fn", "generic_gd_chunk",
           "fast_gd_fn", "reduced_fn", "reduced_sweep_fn", "flow_fn", "ODE_FNS", "run"]

# Minibatch order (sgd) comes from the init key folded with this constant.
_MINIBATCH_STREAM = 1


class RunResult(NamedTuple):
  """What a run computed, on the host.

  Attributes:
    config: the run's configuration.
    points: ``P`` dicts ``{"seed", "data_seed", <grid field>: value}``.
    gd: gradient descent, a :class:`dynamics.Trajectory` with a leading ``P`` axis
      (``None`` when run with ``gd=False``).
    odes: ODE kind (``"reduced"``, ``"gradient_flow"``) -> Trajectory, same times.
    m: non-topic words per sentence (Corollary 1's ``m``).
    seconds: stage -> wall-clock seconds (compilation included).
    errors: stage -> message, for ODE stages that raised (their results are absent).
    gd_path: which gradient-descent path ran (``fast`` or ``generic``) and why.
    exceptions: stage -> the exception it raised (with its traceback), so that the caller
      can tell the environment's failures (memory, disk) from bugs; not written anywhere.
  """
  config: RunConfig
  points: list
  gd: dynamics.Trajectory
  odes: dict
  m: int
  seconds: dict
  errors: dict
  gd_path: dict = {}
  exceptions: dict = {}


def precision_scope(precision: str):
  """Context in which JAX's default float is ``precision`` (``float64`` enables x64)."""
  enable = getattr(jax, "enable_x64", None)
  if enable is None:  # older JAX
    from jax.experimental import enable_x64 as enable
  return enable(precision == "float64")


def sweep_inputs(cfg: RunConfig) -> dict:
  """The sweep points as arrays with a leading axis ``P`` (what ``run_sweep`` maps over)."""
  points = cfg.sweep.points()
  inputs = {"seed": np.array([p["seed"] for p in points], np.uint32),
            "data_seed": np.array([p["data_seed"] for p in points], np.uint32)}
  for name, _ in cfg.sweep.grid:
    inputs[name] = np.array([p[name] for p in points], cfg.precision)
  return inputs


class _Point(NamedTuple):
  dataset: tasks.TopicDataset
  params0: Any
  lr: Any
  record: Any
  key: jax.Array


def _point_setup(cfg: RunConfig, dataset: Optional[tasks.TopicDataset]):
  """``setup(inputs) -> _Point``: data, initial parameters, lr and recorder of one point."""
  model_grid = {name.split(".")[1]: name for name, _ in cfg.sweep.grid if name.startswith("model.")}
  apply = models.lu.apply_for(cfg.model)   # the configured normaliser (softmax: the paper)

  def setup(inp) -> _Point:
    ds = dataset
    if ds is None:
      ds = tasks.make_topic_dataset(jax.random.PRNGKey(inp["data_seed"]), cfg.task)
    model_cfg = dataclasses.replace(cfg.model, **{k: inp[n] for k, n in model_grid.items()})
    key = jax.random.PRNGKey(inp["seed"])
    params0 = models.lu.init(key, model_cfg, jnp.dtype(cfg.precision))
    lr = inp.get("train.lr", cfg.train.lr)
    return _Point(ds, params0, lr, analysis.topic_observables(apply, ds), key)

  return setup


def plan(cfg: RunConfig, devices=None, gd: bool = True) -> strategy.Plan:
  """How ``cfg``'s sweep is computed: :func:`dynamics.strategy.plan` of its settings."""
  return strategy.plan(cfg.model, cfg.train, ode_kinds=cfg.ode.kinds, grid=cfg.sweep.grid,
                       n_datasets=len(cfg.sweep.data_seeds), gd=gd, gd_path=cfg.gd_path,
                       n_points=cfg.sweep.n_points, bytes_per_point=bytes_per_point(cfg),
                       chunk_size=cfg.sweep.chunk_size, devices=devices)


def gd_fn(cfg: RunConfig, setup):
  """Gradient descent (or the configured optimiser) of one sweep point (autodiff)."""
  loss = models.make_loss(models.lu.apply_for(cfg.model))
  trainable = cfg.model.trainable()

  def fn(inp, bound=None):
    p = setup(inp)
    train = dynamics.make_train(loss, p.dataset.train, p.record, cfg.train, trainable)
    return train(p.params0, jax.random.fold_in(p.key, _MINIBATCH_STREAM), lr=p.lr, bound=bound)

  return fn


def generic_gd_chunk(fn, cfg: RunConfig, setup, serial: bool):
  """A whole chunk of :func:`gd_fn`'s points (``run_sweep(batched=True)``).

  ``serial`` (:func:`dynamics.strategy.gd_stage`): the points one after another
  (``lax.map``), each stopping its compute with its own run (``train.flow_time``). Otherwise
  ``vmap``, stopping with the chunk's longest run: the bound is unbatched, so the skipped
  intervals cost nothing, where each run's own end, under ``vmap``, only freezes it.
  """
  flow = cfg.train.flow_time is not None

  def records(inp):
    return cfg.train.run_records(jnp.asarray(setup(inp).lr))

  def chunk(inputs):
    if serial:
      return _one_after_another(lambda inp: fn(inp, records(inp) if flow else None))(inputs)
    bound = jnp.max(jax.vmap(records)(inputs)) if flow else None
    return jax.vmap(lambda inp: fn(inp, bound))(inputs)

  return chunk


def _t_end(cfg: RunConfig, lr):
  """Where an ODE stops (in steps) to end with GD's run of learning rate ``lr``
  (``train.flow_time``), or ``None``: at ``train.steps``."""
  if cfg.train.flow_time is None:
    return None
  return (cfg.train.run_records(lr) * cfg.train.record_every).astype(jnp.asarray(lr).dtype)


def _one_after_another(fn):
  """A whole chunk's outputs from a one-point ``fn``, computing the points in turn (``lax.map``)."""
  return lambda inputs: jax.lax.map(fn, inputs)


def _start(setup):
  """``inputs -> (params0, lr)`` of one sweep point (for stages that map a whole chunk)."""
  def start(inp):
    point = setup(inp)
    return point.params0, jnp.asarray(point.lr)
  return start


def fast_gd_fn(cfg: RunConfig, setup, dataset: tasks.TopicDataset):
  """Gradient descent of a whole chunk of sweep points on the exact fast path.

  :mod:`dynamics.fast_lu` advances all seeds of the chunk together (seeds
  innermost), so this maps over the chunk itself (``run_sweep(batched=True)``).
  """
  record = analysis.topic_observables(models.lu.apply_for(cfg.model), dataset)
  train_batch = dynamics.make_fast_sweep_train(cfg.model, dataset.train, record, cfg.train)

  def fn(inputs):
    params0, lr = jax.vmap(_start(setup))(inputs)
    return train_batch(params0, lr)

  return fn


def _ode_options(cfg: RunConfig, lr, taus) -> dict:
  """The arguments every ODE solve of a point takes beside its model and data: the trained
  groups, the ``[ode]`` solver settings, and ``lr, ts, t_end, dtmin`` in steps for ``lr``
  (``taus=None``), or in flow time (``lr = 1``, saved at ``taus``, the floor on the step
  that of the smallest learning rate of the grid; :func:`dynamics.strategy.lrs_together`)."""
  ode = cfg.ode
  options = dict(trainable=cfg.model.trainable(), solver=ode.solver, rtol=ode.rtol,
                 atol=ode.atol, max_steps=ode.max_steps)
  if taus is None:
    return dict(options, lr=lr, ts=cfg.train.record_steps(), t_end=_t_end(cfg, lr),
                dtmin=ode.dtmin)
  dtmin = None if ode.dtmin is None else ode.dtmin * min(dict(cfg.sweep.grid)["train.lr"])
  return dict(options, lr=jnp.ones_like(lr), ts=taus, t_end=None, dtmin=dtmin)


def reduced_fn(cfg: RunConfig, setup, taus=None, extended: bool = False):
  """Lemma 2's reduced SEN ODE of one sweep point (``taus``: see :func:`_ode_options`;
  ``extended``: the extended reduced dynamics)."""

  def fn(inp):
    p = setup(inp)
    return dynamics.reduced_sen_ode(
        p.params0, p.dataset.train, p.dataset.train_topic_word,
        np.arange(cfg.task.n_topic_words), p.record, form=cfg.ode.form, extended=extended,
        **_ode_options(cfg, jnp.asarray(p.lr), taus))

  return fn


def reduced_sweep_fn(cfg: RunConfig, setup, dataset: tasks.TopicDataset, taus=None,
                     extended: bool = False):
  """Lemma 2's reduced SEN ODE of a whole chunk of sweep points sharing ``dataset``, as one
  solve (:func:`dynamics.reduced_sen_ode_sweep`; ``run_sweep(batched=True)``; ``taus``:
  see :func:`_ode_options`)."""
  record = analysis.topic_observables(models.lu.apply_for(cfg.model), dataset)

  def fn(inputs):
    params0, lr = jax.vmap(_start(setup))(inputs)
    return dynamics.reduced_sen_ode_sweep(
        params0, dataset.train, dataset.train_topic_word, np.arange(cfg.task.n_topic_words),
        record, form=cfg.ode.form, extended=extended, **_ode_options(cfg, lr, taus))

  return fn


def _solved_over_lrs(cfg: RunConfig, inputs: dict, make, stage):
  """An ODE stage under :func:`dynamics.strategy.lrs_together`: one solve in flow time per point
  without its learning rate (checkpointed as the stage's chunks), read as each point's run.

  ``make(taus)`` is the stage's function solving in flow time, saved at ``taus``;
  ``stage(fn, points, n_points, times)`` runs it over ``points`` (:func:`_stage`).
  """
  lrs = dict(cfg.sweep.grid)["train.lr"]
  base, group = flow_time.without_learning_rate(inputs, "train.lr")
  records = [int(cfg.train.run_records(lr)) for lr in lrs]
  taus = np.asarray(dynamics.flow_time_grid(lrs, records, cfg.train.record_every), cfg.precision)
  flow = stage(make(taus), base, len(base["train.lr"]), taus)
  lr = jnp.asarray(inputs["train.lr"])
  return flow_time.runs_at_learning_rates(flow, group, taus, lr, cfg.train.run_records(lr),
                                          cfg.train.record_every, cfg.train.n_records)


def flow_fn(cfg: RunConfig, setup, taus=None):
  """The full model's gradient flow of one sweep point (``taus``: see :func:`_ode_options`)."""
  loss = models.make_loss(models.lu.apply_for(cfg.model))

  def fn(inp):
    p = setup(inp)
    return dynamics.gradient_flow(loss, p.params0, p.dataset.train, p.record,
                                  **_ode_options(cfg, jnp.asarray(p.lr), taus))

  return fn


ODE_FNS = {"reduced": reduced_fn, "extended": functools.partial(reduced_fn, extended=True),
           "gradient_flow": flow_fn}


def _stage(label: str, fn, inputs, cfg: RunConfig, chunk_size, progress: bool, devices,
           checkpoints=None, batched: bool = False, compiler_options=None, n_points=None,
           times=None, on_progress=None):
  """One stage over the sweep; with ``checkpoints``, read back finished chunks and save new ones.

  ``batched``: ``fn`` maps a whole chunk itself (see ``dynamics.run_sweep``). ``n_points``
  and ``times``: the points in ``inputs`` and the times each records, when not the sweep's
  (the sweep's points and recorded steps). ``on_progress``: see :func:`run`.
  """
  n_points = cfg.sweep.n_points if n_points is None else n_points
  times = np.asarray(cfg.train.record_steps()) if times is None else times
  n_dev = len(jax.devices() if devices is None else devices)
  bounds = dynamics.chunk_bounds(n_points, chunk_size, n_dev)
  done, save = [], None
  if checkpoints is not None:
    one = jax.tree.map(lambda x: x[:1], inputs)
    done = checkpoints.completed(
        label, bounds, lambda: jax.eval_shape(fn if batched else jax.vmap(fn), one),
        times=times)
    save = checkpoints.saver(label, bounds)
  initial = bounds[len(done) - 1][1] if done else 0
  bar = ProgressBar(label, n_points, steps_per_point=cfg.train.steps, initial=initial,
                    enabled=progress and jax.process_index() == 0)
  if on_progress is not None:
    on_progress(label, initial, n_points, initial)

  def on_chunk(finished, total, out):
    if save is not None:
      save(finished, out)
    bar.update(finished, total)
    if on_progress is not None:
      on_progress(label, finished, total, initial)

  try:
    return dynamics.run_sweep(fn, inputs, chunk_size=chunk_size, devices=devices,
                              on_chunk=on_chunk, done=done, batched=batched,
                              compiler_options=compiler_options)
  finally:
    if save is not None:
      save.flush()
    bar.close()


def run(cfg: RunConfig, *, progress: bool = True, devices=None, checkpoints=None,
        gd: bool = True, on_progress=None) -> RunResult:
  """Run gradient descent and the configured ODEs over the sweep.

  Args:
    cfg: a validated configuration.
    progress: draw a progress bar per stage on stderr (process 0 only).
    devices: devices to shard the sweep over (default: all visible, across
      hosts after ``jax.distributed.initialize()``).
    checkpoints: an :class:`attndyn.checkpoint.Checkpoints`: every stage
      reads back the chunks it already holds, runs only the others and saves
      them; its chunk size is used. ``None``: no checkpoints.
    gd: run the gradient-descent stage. ``False`` solves only the ODEs (the
      result's ``gd`` is ``None``): the reproductions check Theorem 1's
      invariant on a float64 ODE solve that needs no GD beside it.
    on_progress: ``on_progress(stage, done, total, read_back)`` as each stage (``"gd"``,
      then each ODE kind) starts and after each of its chunks: ``done`` of its ``total``
      points are finished, the first ``read_back`` of them read from ``checkpoints``
      (the orchestration's own progress, e.g. ``attndyn atlas``'s bar over many runs).

  Returns:
    A :class:`RunResult`. An ODE stage that raises is reported in
    ``errors`` (and ``exceptions``) and the rest (GD, the other ODE) is still returned.

  Raises:
    KeyboardInterrupt: Ctrl-C in any stage stops the run, after the stage's finished chunks
      are written to ``checkpoints``.
  """
  with precision_scope(cfg.precision):
    dataset = None
    if len(cfg.sweep.data_seeds) == 1:
      dataset = jax.jit(tasks.make_topic_dataset, static_argnums=1,
                        compiler_options=xla_options.supported(tasks.TOPIC_COMPILER_OPTIONS))(
          jax.random.PRNGKey(cfg.sweep.data_seeds[0]), cfg.task)
    setup = _point_setup(cfg, dataset)
    inputs = sweep_inputs(cfg)
    how = plan(cfg, devices, gd)
    # A checkpointed run keeps the chunks it recorded, so that its finished ones are read back.
    chunk = checkpoints.chunk_size if checkpoints is not None else how.chunk_size
    seconds, errors, exceptions, odes = {}, {}, {}, {}
    start = time.perf_counter()
    trajectory = None
    if gd:
      fn = (fast_gd_fn(cfg, setup, dataset) if how.gd.path == "fast"
            else generic_gd_chunk(gd_fn(cfg, setup), cfg, setup, how.gd.serial))
      trajectory = _stage("gd", fn, inputs, cfg, chunk, progress, devices, checkpoints,
                          batched=True, on_progress=on_progress,
                          compiler_options=how.gd.compiler_options)
      seconds["gd"] = time.perf_counter() - start
    for kind, ode in how.odes.items():
      start = time.perf_counter()

      def make(taus=None, kind=kind, ode=ode):
        fn = (reduced_sweep_fn(cfg, setup, dataset, taus, extended=kind == "extended")
              if ode.path == "sweep" else ODE_FNS[kind](cfg, setup, taus))
        return _one_after_another(fn) if ode.serial else fn

      def stage(fn, points, n_points=None, times=None, kind=kind, ode=ode):
        return _stage(kind, fn, points, cfg, chunk, progress, devices, checkpoints,
                      batched=ode.path == "sweep" or ode.serial, n_points=n_points,
                      times=times, compiler_options=ode.compiler_options,
                      on_progress=on_progress)

      try:
        odes[kind] = (_solved_over_lrs(cfg, inputs, make, stage) if how.lrs_together
                      else stage(make(), inputs))
      except ConfigError:  # bad input, not a failed stage
        raise
      except Exception as err:  # keep what is computed; report the stage that failed
        errors[kind] = f"{type(err).__name__}: {err}"
        exceptions[kind] = err
      # KeyboardInterrupt (Ctrl-C) is no stage failure: it propagates, once _stage's finally
      # has saved the stage's finished chunks, so the run stops and --resume continues it.
      seconds[kind] = time.perf_counter() - start
  return RunResult(config=cfg, points=cfg.sweep.points(), gd=trajectory, odes=odes,
                   m=cfg.task.n_nontopic, seconds=seconds, errors=errors,
                   gd_path={"path": how.gd.path, "reason": how.gd.reason},
                   exceptions=exceptions)
