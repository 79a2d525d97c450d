"""What a run leaves in its output directory: summary.json, trajectories.npz and PNG figures.

Every file is written atomically (a temporary file in the same directory, then
``os.replace``), so a crash never leaves half a file, and nothing that is not
attndyn's own output is ever overwritten or deleted. Only process 0 writes
when several processes share a sweep (``jax.distributed``).
"""
import datetime
import importlib.metadata
import json
import os
import platform
import tempfile
from pathlib import Path

import jax
import numpy as np

import analysis.figures as figures
import models
from analysis.observables import embedding_norms
from analysis.summary import aggregate, json_ready, run_summaries
from attndyn import tomlwrite
from attndyn.pipeline import RunResult
from tasks.errors import ConfigError

SCHEMA_VERSION = 1
SUMMARY, TRAJECTORIES, CONFIG = "summary.json", "trajectories.npz", "config.toml"
FIGURES = ("sen.png", "dynamics.png", "loss.png", "invariant.png")
LABELS = {"gd": "GD", "reduced": "reduced ODE", "gradient_flow": "gradient flow"}
_LIBRARIES = ("jax", "jaxlib", "optax", "diffrax", "flax", "numpy", "matplotlib", "attndyn")


def is_writer() -> bool:
  """True on the one process that writes outputs (process 0 of a distributed run)."""
  return jax.process_index() == 0


def prepare_out_dir(path, *, force: bool = False) -> Path:
  """Check (and on the writer, create) the output directory before anything runs.

  Args:
    path: the ``--out`` directory.
    force: allow a non-empty directory; attndyn then replaces only its own
      files there (summary.json, trajectories.npz, the PNGs) and leaves the rest.

  Raises:
    ConfigError: ``path`` is a file, cannot be created, or is non-empty without ``force``.
  """
  out = Path(path)
  if out.exists() and not out.is_dir():
    raise ConfigError(f"--out {str(out)!r} is a file, not a directory.")
  if out.is_dir() and not force:
    entries = sorted(p.name for p in out.iterdir())
    if entries:
      raise ConfigError(
          f"--out {str(out)!r} is not empty (it holds {', '.join(entries[:3])}"
          f"{', ...' if len(entries) > 3 else ''}). attndyn never deletes files: pick a new "
          f"directory, or pass --force to replace only attndyn's own outputs there.")
  if is_writer():
    try:
      out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
      raise ConfigError(f"--out {str(out)!r} cannot be created: {err.strerror or err}.") from None
    if not os.access(out, os.W_OK):
      raise ConfigError(f"--out {str(out)!r} is not writable.")
  return out


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def _atomic(path: Path, write) -> Path:
  """Call ``write(tmp_path)`` then move the temporary file onto ``path``."""
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  os.close(fd)
  try:
    write(tmp)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a normal file's mode
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  return path


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


def trajectories(result: RunResult) -> dict:
  """Result as flat ``name -> array``: ``gd/score``, ``reduced/t``, ``points/seed``, ...

  Every array has the sweep axis ``P`` first. Per trajectory kind: ``t``
  ``[P, T]``, ``failed_at`` ``[P]``, each recorded observable ``[P, T, ...]`` and,
  from the final parameters, ``final_word_score`` and ``final_word_emb_norm``
  ``[P, V]`` (every word of the vocabulary).
  """
  arrays = {f"points/{name}": np.asarray([p[name] for p in result.points])
            for name in result.points[0]}
  kinds = {"gd": result.gd, **result.odes}
  for kind, traj in kinds.items():
    arrays[f"{kind}/t"] = np.asarray(traj.t)
    arrays[f"{kind}/failed_at"] = np.asarray(traj.failed_at)
    for name, value in traj.observables.items():
      arrays[f"{kind}/{name}"] = np.asarray(value)
    final = traj.final_params
    arrays[f"{kind}/final_word_score"] = np.asarray(jax.vmap(models.word_scores)(final))
    arrays[f"{kind}/final_word_emb_norm"] = np.asarray(jax.vmap(embedding_norms)(final))
  return arrays


def write_npz(out: Path, result: RunResult) -> Path:
  """``trajectories.npz``: plain arrays only (loadable with ``allow_pickle=False``)."""
  arrays = trajectories(result)

  def write(tmp):
    with open(tmp, "wb") as f:
      np.savez(f, **arrays)
  return _atomic(out / TRAJECTORIES, write)


def write_figures(out: Path, result: RunResult) -> tuple:
  """The four PNGs; returns ``(written names, {name: error message})``."""
  trajs = {LABELS["gd"]: result.gd, **{LABELS.get(k, k): v for k, v in result.odes.items()}}
  draw = {
      "sen.png": lambda p: figures.sen_figure({LABELS["gd"]: result.gd}, result.m, p),
      "dynamics.png": lambda p: figures.dynamics_figure(trajs, p),
      "loss.png": lambda p: figures.loss_figure(trajs, p),
      "invariant.png": lambda p: figures.invariant_figure(trajs, p),
  }
  written, failed = [], {}
  for name in FIGURES:
    try:
      _atomic(out / name, draw[name])
      written.append(name)
    except Exception as err:  # a figure must not cost the numbers
      failed[name] = f"{type(err).__name__}: {err}"
  return written, failed


def summary(result: RunResult, *, files: dict, command=None) -> dict:
  """The summary.json document (strict JSON: non-finite numbers are ``null``)."""
  runs = run_summaries(result.points, result.gd, result.odes, result.m)
  return json_ready({
      "schema_version": SCHEMA_VERSION,
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "command": command,
      "config": result.config.to_dict(),
      "environment": environment(),
      "points": result.points,
      "seconds": result.seconds,
      "errors": result.errors,
      "files": files,
      "runs": runs,
      "aggregate": aggregate(runs),
  })


def write_summary(out: Path, doc: dict) -> Path:
  """``summary.json``, atomically."""
  def write(tmp):
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(doc, f, indent=1, allow_nan=False)
      f.write("\n")
  return _atomic(out / SUMMARY, write)


def write_config(out: Path, result: RunResult) -> Path:
  """``config.toml``: the run's full config; ``attndyn run DIR/config.toml`` repeats the run."""
  def write(tmp):
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(tomlwrite.dumps(result.config.to_dict()))
  return _atomic(out / CONFIG, write)


def write_all(out: Path, result: RunResult, *, command=None) -> dict:
  """Write the config, the trajectories, the figures, then the summary (which lists them).

  Returns:
    The summary document (also on processes that do not write).
  """
  if not is_writer():
    return summary(result, files={}, command=command)
  write_config(out, result)
  write_npz(out, result)
  written, failed = write_figures(out, result)
  files = {"config": CONFIG, "trajectories": TRAJECTORIES, "figures": written,
           "figure_errors": failed}
  doc = summary(result, files=files, command=command)
  write_summary(out, doc)
  return doc
