"""The experiments' way onto the one engine: ``attndyn run`` configs, checkpointed and resumable.

An experiment whose model or task is not an ``attndyn run`` config (the CNN,
SST, Snell's seq2seq, Yang's tagger, SGD's noise sweeps, ...) hands its pure
function of one sweep point to :func:`sweep` instead: the same
``dynamics.run_sweep`` with chunking, sharding, checkpoints under
``DIR/runs/NAME/checkpoints`` and ``--resume``, keyed by the experiment's
settings and a digest of the sweep's inputs.

An experiment that trains the Lu model on the topic task describes each of its
runs as an ``attndyn run`` config (the TOML-shaped dict of
:class:`attndyn.config.RunConfig`, usually a preset with a few changes) and
hands it to :func:`run`. That validates it with the same schema and one-line
errors as ``attndyn run``, and executes it with :func:`attndyn.pipeline.run`:
the exact fast path where it applies, the reduced ODE and the gradient flow
from the same initial parameters, chunking, sharding over devices, progress
bars, and checkpoints under ``DIR/runs/NAME/checkpoints``. With ``--resume``
(``ctx.resume``), a run whose checkpoints hold the same config continues from
its last finished chunk; any other run starts afresh, and the chunks of the config
it was started with stay stored under their own keys.

A finished run with gradient descent is also written as an ``attndyn run``
output directory (``summary.json``, ``trajectories.npz``, ``config.toml``,
``run_info.json`` and, unless asked not to, the run's figures), so ``attndyn report DIR/runs/NAME``
and :func:`analysis.load` read it like any other run.

An experiment may declare its runs ahead (a module-level ``runs(settings)`` returning
:class:`Planned` runs, the longest first). A reproduction on several workers then computes
each as a job of its own, side by side with the other jobs, before the experiment starts
(:mod:`attndyn.reproduce.runner`); its :func:`run` of the same config reads the run back
from the checkpoints those jobs wrote (``ctx.ready``), as ``--resume`` would.
"""
import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

import jax
import numpy as np

from attndyn import dynamics
from attndyn import atomic, checkpoint, chunking, config, jobs, lock, outputs, pipeline
from attndyn.tasks.errors import ConfigError

__all__ = ["RUNS_DIR", "Planned", "deep_update", "validate", "run", "sweep",
           "segment_checkpoint", "run_dir", "figure_path", "stage_error"]

RUNS_DIR = "runs"


class Planned(NamedTuple):
  """A run an experiment will ask :func:`run` for, declared ahead (its ``runs(settings)``).

  Attributes:
    name: the run's directory name under ``DIR/runs/``.
    raw: its ``attndyn run`` config, as the experiment hands it to :func:`run`.
    gd: whether it runs gradient descent (``False``: the ODEs alone).
  """
  name: str
  raw: dict
  gd: bool = True


def deep_update(base: dict, changes: dict) -> dict:
  """A copy of ``base`` with ``changes`` applied key by key, recursing into tables."""
  out = dict(base)
  for key, value in changes.items():
    if isinstance(value, dict) and isinstance(out.get(key), dict):
      out[key] = deep_update(out[key], value)
    else:
      out[key] = value
  return out


def validate(raw: dict, where: str) -> config.RunConfig:
  """``raw`` as a :class:`RunConfig`; a bad value is one line naming ``where`` and the field."""
  try:
    cfg = config.RunConfig.from_dict(raw)
    chunking.check_fits(cfg)
  except ConfigError as err:
    raise ConfigError(f"{where}: {err}") from None
  return cfg


def _store(ctx, out: Path, cfg: dict, chunk_size: Optional[int], every: int = 1):
  """``(checkpoints, resumed)``: the ones in ``out`` when resuming the same ``cfg`` (a plain
  dict: a run's ``RunConfig.to_dict()`` or a sweep's settings) or when a job of this command
  computed them (``ctx.ready``), else fresh ones."""
  writer = outputs.is_writer()
  reuse = ctx.resume or out.name in ctx.ready
  if reuse and (out / checkpoint.DIRNAME / checkpoint.MANIFEST).is_file():
    store = checkpoint.Checkpoints.resume(out, writer=writer)
    why = store.mismatch(cfg)
    if why is None:
      store.check(cfg, every)
      return store, True
    # Another config (or backend): a new manifest; the old chunks stay (their keys are not
    # this config's). The reproduction decides this itself, so the reason is logged without
    # `attndyn run`'s --resume advice.
    ctx.log(f"{out.name}: not resuming its checkpoints ({why}); computing this config's "
            f"chunks (those stored before are read back; the others stay in {store.root})")
  return checkpoint.Checkpoints.create(out, cfg, chunk_size, every=every, writer=writer,
                                       keep=ctx.resume), False


def run(ctx, name: str, raw: dict, *, gd: bool = True, figures: bool = True,
        on_progress=None) -> pipeline.RunResult:
  """Run one ``attndyn run`` config for an experiment, into ``DIR/runs/NAME``.

  Args:
    ctx: the reproduction's :class:`attndyn.reproduce.runner.Context` (output
      directory, ``resume``, logging).
    name: the run's directory name under ``DIR/runs/``.
    raw: the TOML-shaped config (validated here).
    gd: run gradient descent (``False``: the ODEs alone; nothing but checkpoints is written).
    figures: draw the run's figures (sen.png, dynamics.png, loss.png, invariant.png).
    on_progress: ``on_progress(stage, done, total, read_back)`` per stage and chunk
      (:func:`attndyn.pipeline.run`).

  Returns:
    The :class:`attndyn.pipeline.RunResult` (host arrays).

  Raises:
    ConfigError: an invalid config (naming ``name``), or damaged checkpoints on resume.
  """
  cfg = validate(raw, f"{ctx.experiment or 'run'} run {name!r}")
  out = Path(ctx.out) / RUNS_DIR / name
  atomic.make_dirs(out)
  # no `attndyn run --out DIR/runs/NAME --resume` or report writes there meanwhile
  with lock.hold(out):
    store, resumed = _store(ctx, out, cfg.to_dict(), pipeline.plan(cfg).chunk_size,
                            every=max(1, cfg.sweep.checkpoint_every))
    ctx.log(f"{name}: {cfg.sweep.n_points} runs, {cfg.train.steps} steps, ODEs: {cfg.ode.kind}"
            + (" (continuing from its checkpoints)" if resumed else ""))
    with pipeline.precision_scope(cfg.precision):
      result = pipeline.run(cfg, progress=ctx.verbose, checkpoints=store, gd=gd,
                            on_progress=on_progress)
      if gd and outputs.is_writer():
        if figures:
          outputs.write_all(out, result, command=ctx.command, checkpoints=store)
        else:
          run = outputs.run_id(result, store)
          outputs.write_config(out, cfg)
          outputs.write_npz(out, result, run=run)
          outputs.write_summary(out, outputs.summary(result, run=run, files={
              "config": outputs.CONFIG, "trajectories": outputs.TRAJECTORIES,
              "run_info": outputs.RUN_INFO}))
          atomic.write_json(out / outputs.RUN_INFO,
                            outputs.run_info(result, command=ctx.command, checkpoints=store))
  for stage, message in result.errors.items():
    ctx.log(f"{name}: the {stage} stage failed: {message}")
  return result


def _digest(inputs) -> str:
  """A short digest of the sweep's input arrays (shapes, dtypes and bytes)."""
  h = hashlib.sha256()
  for leaf in jax.tree.leaves(inputs):
    x = np.ascontiguousarray(np.asarray(leaf))
    h.update(f"{x.shape}{x.dtype}".encode())
    h.update(x.tobytes())
  return h.hexdigest()[:16]


def sweep(ctx, name: str, fn: Callable, inputs: Any, settings: dict, *,
          chunk_size: Optional[int] = None, batched: bool = False,
          compiler_options: Optional[dict] = None, what: str = "points") -> Any:
  """``dynamics.run_sweep(fn, inputs)``, checkpointed under ``DIR/runs/NAME/checkpoints``.

  For experiments whose model or task is not an ``attndyn run`` config. Each
  finished chunk of ``chunk_size`` points is written as it ends; with
  ``--resume`` (``ctx.resume``) the chunks already there are read back and not
  run again, when ``settings`` and the inputs are those the sweep started with
  (else it starts afresh, saying why). Resuming gives the outputs of an
  uninterrupted sweep (the same compiled program on the same chunks).

  Args:
    ctx: the reproduction's context (``out``, ``resume``, ``log``).
    name: the sweep's directory under ``DIR/runs/``.
    fn, inputs, batched, compiler_options: as :func:`dynamics.run_sweep`.
    settings: JSON-able; everything besides ``inputs`` that decides the outputs
      (the experiment's settings, usually).
    chunk_size: points per compiled call and per checkpoint (default all: a
      kill then loses the whole sweep).
    what: what a point is, for the log (``seeds``).

  Returns:
    ``fn``'s outputs stacked over the points, as NumPy arrays (a trainer's
    :class:`dynamics.Trajectory`, its ``None`` fields ``None``).
  """
  out = run_dir(ctx, name)
  atomic.make_dirs(out)
  cfg = {"experiment": ctx.experiment or "", "sweep": name,
         "settings": json.loads(json.dumps(settings, default=str)), "inputs": _digest(inputs)}
  total = jax.tree.leaves(inputs)[0].shape[0]
  with lock.hold(out):
    store, _ = _store(ctx, out, cfg, chunk_size)
    bounds = dynamics.chunk_bounds(total, store.chunk_size, len(jax.devices()))
    mapped = fn if batched else jax.vmap(fn)
    first = jax.tree.map(lambda x: x[:1], inputs)
    done = store.completed("sweep", bounds, lambda: jax.eval_shape(mapped, first))
    if done:
      ctx.log(f"{name}: {bounds[len(done) - 1][1]} of {total} {what} from its checkpoints")
    save = store.saver("sweep", bounds)

    def on_chunk(finished, n, chunk_out):
      save(finished, chunk_out)
      if len(bounds) > 1:
        ctx.log(f"{name}: {finished}/{n} {what}")

    try:
      result = dynamics.run_sweep(fn, inputs, chunk_size=store.chunk_size, on_chunk=on_chunk,
                                  done=done, batched=batched, compiler_options=compiler_options)
    finally:
      save.flush()
  return result


@contextlib.contextmanager
def segment_checkpoint(ctx, name: str, settings: dict, params0):
  """``(start, on_state)`` for :func:`dynamics.segmented.run_segments`, kept in ``DIR/runs/NAME``.

  For experiments trained in segments from the host (SST's early stopping): after
  every segment ``on_state`` keeps the :class:`dynamics.segmented.SegmentState` in
  the store ``DIR/runs/NAME/checkpoints`` (atomically), keyed by ``settings``; with
  ``--resume``, ``start`` is the state kept last under the same ``settings``, so the
  sweep continues after its last finished segment and ends as an uninterrupted one
  would. Holds the directory's lock while the caller trains.

  Args:
    ctx: the reproduction's context.
    name: the directory under ``DIR/runs/``.
    settings: JSON-able; everything that decides the segments' outputs.
    params0: the sweep's initial parameters (the structure the state's are read into).
  """
  out = run_dir(ctx, name)
  atomic.make_dirs(out)
  store = jobs.Store(out / checkpoint.DIRNAME)
  job = jobs.Job("segments", None, (), jobs.key_of(
      "segments", ctx.experiment or "", name, json.loads(json.dumps(settings, default=str)),
      code=False))
  treedef = jax.tree.structure(params0)
  with lock.hold(out):
    start = got = None
    if not ctx.resume:
      if outputs.is_writer():
        store.discard([])
    elif job.key in store:
      got = store.get(job)      # None (said by the store) when it does not verify
    elif store.keys():
      ctx.log(f"{name}: not resuming its segments (other settings); starting afresh")
    if got is not None:
      params = lambda group: jax.tree.unflatten(treedef, got[group])
      start = dynamics.SegmentState(got["segments"], params("params"), params("best_params"),
                                    got["best_value"], got["best_step"], got["stopped_at"],
                                    got["observables"])
      ctx.log(f"{name}: continuing after segment {start.segments} (from {store.root})")

    def on_state(state) -> None:
      if not outputs.is_writer():
        return
      if not isinstance(state.observables, dict):
        raise TypeError("segment_checkpoint keeps a flat dict of observables")
      try:
        store.put(job, {
            "segments": int(state.segments), "params": jax.tree.leaves(state.params),
            "best_params": jax.tree.leaves(state.best_params), "best_value": state.best_value,
            "best_step": state.best_step, "stopped_at": state.stopped_at,
            "observables": dict(state.observables)})
      except OSError as err:   # a side write: the training goes on (as a chunk's checkpoint)
        ctx.log(f"{name}: warning: its segment checkpoint could not be written ({err}); the "
                "sweep goes on, but a kill now loses its segments")

    yield start, on_state


def run_dir(ctx, name: str) -> Path:
  """``DIR/runs/NAME``."""
  return Path(ctx.out) / RUNS_DIR / name


def figure_path(name: str, figure: str) -> str:
  """A run's figure relative to the reproduction's directory (``runs/NAME/FIGURE``)."""
  return f"{RUNS_DIR}/{name}/{figure}"


def stage_error(result: pipeline.RunResult, stage: str) -> Optional[str]:
  """Why ``stage`` has no result: its error, or ``None`` when it ran."""
  if stage in result.odes:
    return None
  return result.errors.get(stage, f"the {stage} stage was not run")
