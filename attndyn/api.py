"""``ad.run(cfg, *, ode=...) -> Results``: one whole ``attndyn run`` from Python.

The public entry to a run; :func:`attndyn.pipeline.run` stays the engine (GD and the
ODEs over the sweep) and ``attndyn run`` calls :func:`run`. Without ``out`` nothing is
written and the results stay in memory; with ``out`` the command's files are written
there (locked, checkpointed, resumable) and read back with :func:`analysis.load`.
Either way the result is the :class:`analysis.results.Results` that ``analysis.load``
returns, with the same named arrays.
"""
import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from attndyn.analysis.results import Results, from_arrays
from attndyn.config import ODE_KINDS, RunConfig
from attndyn.tasks.errors import ConfigError, check

__all__ = ["run"]


def _as_config(cfg: Any, ode: Union[None, str, Mapping]) -> RunConfig:
  """``cfg`` (a RunConfig, a preset name or a TOML-shaped dict) with ``ode`` applied."""
  from attndyn import presets
  if isinstance(cfg, str):
    raw = presets.preset(cfg)
  elif isinstance(cfg, RunConfig):
    raw = cfg.to_dict()
  elif isinstance(cfg, Mapping):
    raw = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in cfg.items()}
  else:
    raise ConfigError(f"cfg = {type(cfg).__name__} is not allowed: a RunConfig "
                      "(ad.paper_config(NAME)), a preset name, or a TOML-shaped dict.")
  if ode is not None:
    if isinstance(ode, str):
      check(ode in ODE_KINDS, "ode", ode, f"one of {', '.join(ODE_KINDS)}, or a dict of "
            "[ode] settings")
      ode = {"kind": ode}
    check(isinstance(ode, Mapping), "ode", ode,
          f"one of {', '.join(ODE_KINDS)}, or a dict of [ode] settings")
    raw["ode"] = {**raw.get("ode", {}), **ode}
  # Always through the schema: a RunConfig built by hand (dataclasses.replace with an optax
  # transformation as train.optimizer, say) is checked as a TOML config would be.
  return RunConfig.from_dict(raw)


def _in_memory(result) -> Results:
  """The :class:`Results` of a :class:`attndyn.pipeline.RunResult`, as ``analysis.load``
  would read it from the files ``attndyn run`` writes (``directory`` is ``None``)."""
  from attndyn import outputs
  doc = outputs.summary(result, files={})
  return dataclasses.replace(from_arrays(None, doc, outputs.trajectories(result)),
                             exceptions=dict(result.exceptions), gd_path=dict(result.gd_path))


def run(cfg: Union[RunConfig, str, Mapping, Callable], *, ode: Union[None, str, Mapping] = None,
        out: Union[None, str, Path] = None, force: bool = False, resume: bool = False,
        progress: bool = False, devices=None, command: Optional[list] = None) -> Results:
  """Run gradient descent and the configured ODEs over a config's sweep.

  What ``attndyn run`` does, from Python: the dataset, each sweep point's initial
  parameters, GD (on the exact fast path where it applies) and the ODEs beside it,
  chunked and sharded, by :func:`attndyn.pipeline.run`.

  Args:
    cfg: a :class:`attndyn.config.RunConfig` (``ad.paper_config("quick", ...)``), a
      preset name, or a TOML-shaped dict. (The CLI passes a function of the resumed
      run's config dict, ``None`` for a fresh run, returning the RunConfig, so that
      ``--resume`` reads DIR's config while holding DIR's lock.)
    ode: the ODEs beside GD, a kind of :data:`attndyn.config.ODE_KINDS` (``"none"``,
      ``"reduced"``, ``"extended"``, ``"gradient_flow"``, ``"both"``, ...), or a dict of ``[ode]`` settings (``{"kind": "reduced", "rtol": 1e-8}``),
      merged into ``cfg``'s ``[ode]`` and validated. ``None``: as ``cfg`` says.
    out: a directory to write the command's files to (``summary.json``,
      ``trajectories.npz``, figures, checkpoints; it must be new or empty unless
      ``force``); ``None`` writes nothing.
    force: write into a non-empty ``out``, replacing only attndyn's own files.
    resume: continue a killed run in ``out`` from its checkpoints.
    progress: draw a progress bar per stage on stderr.
    devices: devices to shard the sweep over (default: all visible).
    command: the command line recorded in ``run_info.json`` (``out`` only).

  Returns:
    :class:`analysis.results.Results`: ``res.gd["score"]`` (dims run, step, word),
    ``res.reduced``, ``res.gradient_flow``, ``res.points``, ``res.summary`` (summary.json,
    with ``errors`` naming an ODE stage that failed; its exception in
    ``res.exceptions``), ``res.sel(seed=0)``.

  Raises:
    ConfigError: a bad config or ``ode`` (one line), a run too large for memory, an
      ``out`` that is not new or empty, a busy ``out``.
  """
  from attndyn import chunking, pipeline
  if out is None:
    check(not resume, "resume", resume, "False without out (resume continues a run in out)")
    config = cfg(None) if callable(cfg) and not isinstance(cfg, RunConfig) else cfg
    config = _as_config(config, ode)
    chunking.check_fits(config)
    with pipeline.precision_scope(config.precision):
      return _in_memory(pipeline.run(config, progress=progress, devices=devices))
  from attndyn import lock, outputs
  if not outputs.is_writer():
    return _write(cfg, ode, Path(out), force, resume, progress, devices, command)
  with lock.hold(out, create=not resume):
    return _write(cfg, ode, Path(out), force, resume, progress, devices, command)


def _write(cfg, ode, out: Path, force, resume, progress, devices, command) -> Results:
  from attndyn import checkpoint, chunking, outputs, pipeline
  resumed = checkpoint.Checkpoints.resume(out, writer=outputs.is_writer()) if resume else None
  raw = resumed.manifest["config"] if resumed else None
  config = cfg(raw) if callable(cfg) and not isinstance(cfg, RunConfig) else (
      cfg if cfg is not None else raw)
  check(config is not None, "cfg", None, "a config, or resume=True with an out that holds one")
  config = _as_config(config, ode)
  chunking.check_fits(config)
  out = outputs.prepare_out_dir(out, force=force, resume=resume)
  store = _checkpoints(config, out, resumed)
  if outputs.is_writer():
    outputs.write_config(out, config)
  with pipeline.precision_scope(config.precision):
    result = pipeline.run(config, progress=progress, devices=devices, checkpoints=store)
    doc = outputs.write_all(out, result, command=command, checkpoints=store)
  if outputs.is_writer():
    from attndyn.analysis.results import load
    res = load(out)
  else:
    res = dataclasses.replace(from_arrays(out, doc, outputs.trajectories(result)))
  return dataclasses.replace(res, exceptions=dict(result.exceptions),
                             gd_path=dict(result.gd_path))


def _checkpoints(cfg: RunConfig, out: Path, resumed):
  """The run's checkpoints: ``resumed`` checked against ``cfg``, or fresh ones (or none)."""
  from attndyn import checkpoint, outputs, pipeline
  every = cfg.sweep.checkpoint_every
  if resumed is not None:
    try:
      started = RunConfig.from_dict(resumed.manifest["config"]).to_dict()
    except ConfigError:
      started = None      # compared as stored; check() names the fields that differ
    resumed.check(cfg.to_dict(), every, started=started)
    return resumed
  if not every:
    return None
  return checkpoint.Checkpoints.create(out, cfg.to_dict(), pipeline.plan_chunk_size(cfg),
                                       every=every, writer=outputs.is_writer())
