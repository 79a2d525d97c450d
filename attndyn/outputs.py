"""What a run leaves in its output directory: summary.json, trajectories.npz, PNG figures.

Every file is written atomically (a temporary file in the same directory, then
``os.replace``), so a crash never leaves half a file, and nothing that is not
attndyn's own output is ever overwritten or deleted. Only process 0 writes
when several processes share a sweep (``jax.distributed``).

summary.json and trajectories.npz depend only on the config and the machine:
two runs of the same config give the same bytes. What differs between runs
(the time, the command line, wall-clock seconds, whether it was resumed) goes
to run_info.json. Each file carries the run id (summary.json's and
run_info.json's ``run_id``, trajectories.npz's zip comment), which
:func:`analysis.load` compares, so a directory mixing two runs' files is refused.
"""
import datetime
import importlib.metadata
import os
import platform
from pathlib import Path

import jax
import numpy as np

import attndyn.analysis.figures as figures
from attndyn.analysis import npz
from attndyn.analysis.results import RUN_INFO, SCHEMA_VERSION, SUMMARY, TRAJECTORIES, to_arrays
from attndyn.analysis.summary import aggregate, json_ready, run_summaries
from attndyn import atomic, checkpoint, lock, tomlwrite
from attndyn.pipeline import RunResult
from attndyn.progress import ProgressBar
from attndyn.tasks.errors import ConfigError

__all__ = ["FIGURES", "LABELS", "is_writer", "prepare_out_dir", "environment", "run_id",
           "write_npz", "draw_figures", "summary", "run_info", "write_summary", "write_config",
           "write_all", "RESCUE_PREFIX", "refuse_nonempty", "refuse_wrong_kind"]

CONFIG = "config.toml"
FIGURES = ("sen.png", "attndyn.dynamics.png", "loss.png", "invariant.png")
LABELS = {"gd": "GD", "reduced": "reduced ODE", "extended": "extended ODE",
          "gradient_flow": "gradient flow"}
_LIBRARIES = ("jax", "jaxlib", "optax", "diffrax", "flax", "numpy", "matplotlib", "attndyn")


def is_writer() -> bool:
  """True on the one process that writes outputs (process 0 of a distributed run)."""
  return jax.process_index() == 0


def refuse_nonempty(out: Path, remedy: str) -> None:
  """One line when the directory ``out`` holds anything but attndyn's lock: what it holds
  (the first three names), then ``remedy``. Every command's ``--out`` is checked so."""
  entries = sorted(p.name for p in out.iterdir() if p.name != lock.LOCKFILE)
  if entries:
    raise ConfigError(f"--out {str(out)!r} is not empty (it holds {', '.join(entries[:3])}"
                      f"{', ...' if len(entries) > 3 else ''}). {remedy}")


def prepare_out_dir(path, *, force: bool = False, resume: bool = False) -> Path:
  """Check (and on the writer, create) the output directory before anything runs.

  Args:
    path: the ``--out`` directory.
    force: allow a non-empty directory; attndyn then replaces only its own
      files there (summary.json, trajectories.npz, the PNGs, checkpoints) and
      leaves the rest.
    resume: the directory is the one being resumed (it holds checkpoints).

  Raises:
    ConfigError: ``path`` is a file, cannot be created, or is non-empty without ``force``.
  """
  out = Path(path)
  if out.exists() and not out.is_dir():
    raise ConfigError(f"--out {str(out)!r} is a file, not a directory.")
  # Only the writer judges emptiness: in a distributed run on a shared filesystem, process 0
  # may already have created its lock or checkpoints when another process gets here.
  if out.is_dir() and not (force or resume) and is_writer():
    refuse_nonempty(out, "attndyn never deletes files: pick a new directory, pass --force to "
                    "replace only attndyn's own outputs there, or --resume to continue a run "
                    "that was killed.")
  if out.is_dir():
    _check_own_entries(out)
  if is_writer():
    try:
      out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
      raise ConfigError(f"--out {str(out)!r} cannot be created: {err.strerror or err}.") from None
    if not os.access(out, os.W_OK):
      raise ConfigError(f"--out {str(out)!r} is not writable.")
    # temporary files of writes a kill interrupted (the caller holds the directory's lock)
    atomic.remove_leftovers(out)
    atomic.remove_leftovers(out / checkpoint.DIRNAME, recursive=True)
  return out


def _check_own_entries(out: Path) -> None:
  """attndyn's own output names in ``out`` must be of the kind it writes there (a file where it
  writes a file, a directory where it keeps checkpoints) and no symbolic link, so no write fails
  after a run."""
  files = [out / name for name in (SUMMARY, TRAJECTORIES, CONFIG, RUN_INFO, *FIGURES)]
  root = out / checkpoint.DIRNAME
  dirs = [root]
  if root.is_dir() and not root.is_symlink():   # the manifest and every stored chunk
    files += sorted(root.glob("*.json")) + sorted(root.glob("*.npz"))
  for path in files + dirs:   # before anything is computed, not when the results are written
    atomic.refuse_link(path)
  for path in files:
    refuse_wrong_kind(out, path, "attndyn writes a file")
  for path in dirs:
    refuse_wrong_kind(out, path, "attndyn keeps checkpoints", directory=True)


def refuse_wrong_kind(out: Path, path: Path, what: str, *, directory: bool = False) -> None:
  """One line when ``path`` (in ``out``) exists but is not a file (``directory``: not a
  directory), where ``what`` (``"attndyn writes a file"``) there."""
  if path.exists() and not (path.is_dir() if directory else path.is_file()):
    raise ConfigError(f"--out {str(out)!r}: {str(path)!r} is not a "
                      f"{'directory' if directory else 'file'}, and {what} there. Rename or "
                      f"remove it, or pick another --out.")


def environment() -> dict:
  """Library versions, Python, JAX backend and device/process counts."""
  versions = {"python": platform.python_version()}
  for name in _LIBRARIES:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = None
  return {"versions": versions, "backend": jax.default_backend(),
          "device_count": jax.device_count(), "process_count": jax.process_count(),
          "devices": sorted({d.device_kind for d in jax.devices()}),
          "platform": platform.platform()}


def run_id(result: RunResult, checkpoints=None) -> str:
  """The id of the run (:func:`attndyn.checkpoint.run_id`): its checkpoints' when it has
  them (a resumed run keeps the id of the run it continues), else its config's."""
  if checkpoints is not None:
    return checkpoints.run_id
  return checkpoint.run_id(result.config.to_dict())


def write_npz(out: Path, result: RunResult, *, run: str = None) -> Path:
  """``trajectories.npz``: plain arrays only (``allow_pickle=False``), reproducible bytes;
  the run id (default: :func:`run_id` of ``result``) in its zip comment."""
  arrays = to_arrays(result)
  run = run or run_id(result)
  return atomic.write(out / TRAJECTORIES, lambda tmp: npz.write(tmp, arrays, run_id=run))


def draw_figures(out: Path, trajs: dict, m: int, *, progress: bool = False) -> tuple:
  """The four PNGs of ``trajs`` (kind -> Trajectory, ``gd`` first) into ``out``.

  Returns:
    ``(written names, {name: error message})``: a figure that fails is reported,
    never raised, so it cannot cost the numbers.
  """
  labelled = {LABELS.get(k, k): v for k, v in trajs.items()}
  draw = {
      "sen.png": lambda p: figures.sen_figure({LABELS["gd"]: trajs["gd"]}, m, p),
      "attndyn.dynamics.png": lambda p: figures.dynamics_figure(labelled, p),
      "loss.png": lambda p: figures.loss_figure(labelled, p),
      "invariant.png": lambda p: figures.invariant_figure(labelled, p),
  }
  bar = ProgressBar("figures", len(FIGURES), steps_per_point=None, unit="figures",
                    enabled=progress)
  written, failed = [], {}
  # a diverged run's inf and NaN are drawn as gaps (and named in the run's lines), not warned
  # about by numpy on stderr
  try:
    with np.errstate(all="ignore"):
      for i, name in enumerate(FIGURES):
        try:
          atomic.write(out / name, draw[name])
          written.append(name)
        except Exception as err:  # a figure must not cost the numbers
          failed[name] = f"{type(err).__name__}: {err}"
        bar.update(i + 1)
  finally:
    bar.close()
  return written, failed


def summary(result: RunResult, *, files: dict, run: str = None) -> dict:
  """The summary.json document (strict JSON: non-finite numbers are ``null``).

  Only what the config and the machine determine: no time, no command line. ``run``:
  the run id (default: :func:`run_id` of ``result``).
  """
  with np.errstate(all="ignore"):   # a diverged run's numbers are null, and named, not warned
    runs = run_summaries(result.points, result.gd, result.odes, result.m)
  return json_ready({
      "schema_version": SCHEMA_VERSION,
      "run_id": run or run_id(result),
      "config": result.config.to_dict(),
      "environment": environment(),
      "points": result.points,
      "errors": result.errors,
      "files": files,
      "runs": runs,
      "aggregate": aggregate(runs),
  })


def run_info(result: RunResult, *, command=None, checkpoints=None) -> dict:
  """The run_info.json document: what differs between two runs of the same config."""
  chunks = None
  if checkpoints is not None:
    chunks = {"chunk_size": checkpoints.chunk_size, "loaded": checkpoints.loaded,
              "loaded_seconds": checkpoints.loaded_seconds, "computed": checkpoints.computed}
  return json_ready({
      "run_id": run_id(result, checkpoints),
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "command": command,
      "seconds": result.seconds,
      "gd_path": result.gd_path,
      "resumed": bool(checkpoints is not None and any(checkpoints.loaded.values())),
      "chunks": chunks,
  })


def write_summary(out: Path, doc: dict) -> Path:
  """``summary.json``, atomically."""
  return atomic.write_json(out / SUMMARY, doc)


def write_config(out: Path, cfg) -> Path:
  """``config.toml``: the full config (``cfg``: a RunConfig); ``attndyn run DIR/config.toml``
  repeats the run."""
  return atomic.write_text(out / CONFIG, tomlwrite.dumps(cfg.to_dict()))


def write_all(out: Path, result: RunResult, *, command=None, checkpoints=None) -> dict:
  """Write the config, the trajectories, the figures, the summary (which lists them), run_info.

  Returns:
    The summary document (also on processes that do not write).
  """
  run = run_id(result, checkpoints)
  if not is_writer():
    return summary(result, files={}, run=run)
  try:
    write_config(out, result.config)
    write_npz(out, result, run=run)
  except OSError as err:
    raise _rescued(err, result, run) from None
  written, failed = draw_figures(out, {"gd": result.gd, **result.odes}, result.m)
  files = {"config": CONFIG, "trajectories": TRAJECTORIES, "run_info": RUN_INFO,
           "figures": written, "figure_errors": failed}
  doc = summary(result, files=files, run=run)
  try:
    write_summary(out, doc)
  except OSError as err:
    raise _rescued(err, result, run) from None
  atomic.write_json(out / RUN_INFO, run_info(result, command=command, checkpoints=checkpoints))
  return doc


RESCUE_PREFIX = "attndyn-rescue-"


def _rescued(err: OSError, result: RunResult, run: str) -> Exception:
  """Save a finished run's results where there is room, when ``--out`` cannot take them.

  Writes ``config.toml``, ``trajectories.npz`` and ``summary.json`` (figures
  left out) into a new folder ``$TMPDIR/attndyn-rescue-RUNID-XXXXXXXX/`` (mode 0700,
  an unpredictable name: in a shared ``/tmp`` nobody can plant a link there beforehand) and
  returns the one-line error naming it; when that fails too, returns ``err`` itself (the CLI
  then names the checkpoints that are kept, if any).
  """
  try:
    rescue = atomic.private_dir(f"{RESCUE_PREFIX}{run}-")
    write_config(rescue, result.config)
    write_npz(rescue, result, run=run)
    files = {"config": CONFIG, "trajectories": TRAJECTORIES, "figures": [], "figure_errors": {}}
    write_summary(rescue, summary(result, files=files, run=run))
  except OSError:
    return err
  reason = f"{err.strerror or err}"
  where = f"{err.filename!r}: " if isinstance(err.filename, str) else ""
  return ConfigError(f"{where}{reason}; the finished results were saved instead to "
                     f"{str(rescue)!r} (config.toml, trajectories.npz, summary.json; `attndyn "
                     f"report {rescue}` reads them): make room, then copy them into --out.")
