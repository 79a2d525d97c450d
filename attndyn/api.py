"""The commands from Python: ``ad.run`` (one run), ``ad.reproduce`` and ``ad.atlas`` (studies).

``ad.run(cfg, *, ode=...) -> Results``: one whole ``attndyn run``.

The public entry to a run; :func:`attndyn.pipeline.run` stays the engine (GD and the
ODEs over the sweep) and ``attndyn run`` calls :func:`run`. Without ``out`` nothing is
written and the results stay in memory; with ``out`` the command's files are written
there (locked, checkpointed, resumable) and read back with :func:`analysis.load`.
Either way the result is the :class:`analysis.results.Results` that ``analysis.load``
returns, with the same named arrays.
"""
import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

from attndyn.analysis.results import Results, from_arrays, to_arrays
from attndyn.config import ODE_KINDS, RunConfig
from attndyn.tasks.errors import ConfigError, check

__all__ = ["run", "Reproduction", "reproduce", "atlas"]


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


def _results(result, out: Optional[Path] = None, doc: Optional[dict] = None) -> Results:
  """The :class:`Results` of a :class:`attndyn.pipeline.RunResult`: read back from ``out``
  on the process that wrote it, else as ``analysis.load`` would read it from the files
  ``attndyn run`` writes (``doc``: their summary, by default computed from ``result``)."""
  from attndyn import outputs
  from attndyn.analysis.results import load
  if out is not None and outputs.is_writer():
    res = load(out)
  else:
    doc = outputs.summary(result, files={}) if doc is None else doc
    res = from_arrays(out, doc, to_arrays(result))
  return dataclasses.replace(res, exceptions=dict(result.exceptions),
                             gd_path=dict(result.gd_path))


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
      return _results(pipeline.run(config, progress=progress, devices=devices))
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
  return _results(result, out, doc)


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
  return checkpoint.Checkpoints.create(out, cfg.to_dict(), pipeline.plan(cfg).chunk_size,
                                       every=every, writer=outputs.is_writer())


class Reproduction(NamedTuple):
  """What :func:`reproduce` ran and judged.

  Attributes:
    out: the output directory (replication.md / replication.json, figures, experiments/).
    counts: claims per verdict (``pass``, ``fail``, ``inconclusive``, ...).
    claims: one row per claim of replication.json.
    experiments: the experiments' documents (``DIR/experiments/NAME.json``), in order.
  """
  out: Path
  counts: dict
  claims: list
  experiments: list


def reproduce(paper: str, *, out: Union[str, Path], quick: bool = False,
              only: Optional[Sequence[str]] = None, settings: Sequence[str] = (),
              resume: bool = False, force: bool = False, workers: int = 1,
              scheduler: Optional[str] = None, client=None, progress: bool = False,
              command: Optional[list] = None) -> Reproduction:
  """``attndyn reproduce PAPER``: run a paper's experiments as jobs and judge every claim.

  Args:
    paper: ``lu2021``, ``snell``, ``yang``, ``flavours`` or ``sgd``.
    out: the output directory (new or empty unless ``force`` or ``resume``).
    quick: the quick settings (minutes on 2 cores).
    only: the experiments to run (default: all, in the paper's order).
    settings: ``--set NAME.key=value`` items (typed: :mod:`attndyn.settings`).
    resume: keep every experiment whose job is in ``out``'s store; run the others.
    workers, scheduler, client: where the jobs run (:func:`attndyn.jobs.cluster`).
    progress: progress lines on stderr.

  Returns:
    A :class:`Reproduction`.
  """
  from attndyn import lock, outputs
  from attndyn.reproduce import cli as reproduce_cli
  from attndyn.reproduce import report, runner
  command = command or ["ad.reproduce", paper]
  with lock.hold(out, create=not resume):
    out = outputs.prepare_out_dir(Path(out), force=force, resume=resume)
    reproduce_cli._remove_leftovers(out)
    docs = runner.run(paper, out, quick=quick, only=only, items=settings, verbose=progress,
                      command=command, resume=resume, workers=workers, scheduler=scheduler,
                      client=client)
    doc = report.write(paper, out, command=command, environment=outputs.environment())
  return Reproduction(out, doc["counts"], doc["claims"], docs)


def atlas(*, out: Union[str, Path], quick: bool = False, settings: Sequence[str] = (),
          resume: bool = False, force: bool = False, workers: int = 1,
          scheduler: Optional[str] = None, client=None, progress: bool = False,
          command: Optional[list] = None):
  """``attndyn atlas``: where Lu et al.'s theory holds over a grid, its buckets run as jobs.

  Args:
    out: the output directory (new or empty unless ``force`` or ``resume``).
    quick: the quick grid.
    settings: ``--set KEY=VALUE`` items (``tau=100``, ``classifiers=["tc"]``).
    resume: keep every bucket in ``out``'s store; compute the others.
    workers, scheduler, client: where the buckets run (:func:`attndyn.jobs.cluster`).
    progress: a progress bar on stderr.

  Returns:
    :class:`attndyn.atlas.AtlasResult` (rows, curves, findings, seconds, failures).
  """
  from attndyn import atlas as atlas_study
  from attndyn import atomic, lock, outputs
  atlas_study.settings(quick=quick, items=settings)   # bad settings: before out is touched
  with lock.hold(out, create=not resume):
    out = outputs.prepare_out_dir(Path(out), force=force, resume=resume)
    atomic.remove_leftovers(out / atlas_study.STORE)   # a file a kill cut short
    return atlas_study.run_atlas(out, quick=quick, items=settings, resume=resume,
                                 progress=progress, command=command or ["ad.atlas"],
                                 workers=workers, scheduler=scheduler, client=client)
