"""Checkpoints of a sweep, so that ``attndyn run ... --resume`` continues after a kill.

Layout under ``DIR/checkpoints/``: ``manifest.json`` (the config, its hash, the
chunk size and the machine, written before anything runs) and, per stage
(``gd``, ``reduced``, ``gradient_flow``), ``<stage>/chunk_<i>.npz``: the outputs
of chunk ``i`` of the sweep (:func:`dynamics.sweep.chunk_bounds`), one array per
pytree leaf under a stable name (``observables/loss``,
``final_params/classifier/U``, ...), plain arrays only, no pickle. Every file is
written atomically, so a kill loses at most the chunks not yet written
(``sweep.checkpoint_every`` of them). A resumed run reads the finished chunks
back and runs the rest with the same chunk size, which makes its results
bit-identical to an uninterrupted run's on the same machine. The manifest and
every chunk (in its zip comment) carry the run's id (:func:`run_id`), so a
chunk another run wrote into the same directory is refused by name.
"""
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional, Tuple

import jax
import numpy as np

from attndyn.analysis import npz, results
from attndyn import atomic, schema
from attndyn.tasks.errors import ConfigError, digits_error, too_many_digits

__all__ = ["FORMAT", "IGNORED", "flatten", "config_hash", "differences", "leaf_name", "run_id",
           "Checkpoints", "Saver"]

DIRNAME, MANIFEST = "checkpoints", "manifest.json"
FORMAT = 1
# Config fields that do not change the results (they may differ on --resume), the flat
# config and its digest: analysis.results's, which readers check summary.json against.
IGNORED, flatten, config_hash = results.IGNORED, results.flatten, results.config_hash
_BOUNDS = "_chunk/bounds"


def differences(old: dict, new: dict) -> list:
  """``["train.lr = 0.1 in the checkpoints, 0.2 now", ...]`` (:data:`IGNORED` left out)."""
  a, b = flatten(old), flatten(new)
  out = []
  for key in sorted(set(a) | set(b)):
    if key not in IGNORED and a.get(key) != b.get(key):
      out.append(f"{key} = {a.get(key)!r} in the checkpoints, {b.get(key)!r} now")
  return out


def leaf_name(path) -> str:
  """A pytree path as ``a/b/c`` (dict keys, attribute names, sequence indices)."""
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
    else:
      parts.append(str(key))
  return "/".join(parts)


def run_id(config: dict) -> str:
  """The id written into every file of a run (summary.json, trajectories.npz, run_info.json,
  the manifest, each chunk), so that readers refuse a directory mixing two runs' files.

  It is a digest of what determines the results (the config less :data:`IGNORED`, the backend
  and device count), not a random uuid: two runs of one config on one kind of machine write
  the same bytes (tests/test_determinism.py), so their files mix harmlessly and share an id,
  and a resumed run keeps the id of the run it continues.
  """
  return results.run_id_of(config, **_environment())


def _environment() -> dict:
  return {"backend": jax.default_backend(), "device_count": jax.device_count()}


def _read_json(path: Path, what: str) -> dict:
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except UnicodeDecodeError as err:
    raise ConfigError(f"{what} is not UTF-8 text ({err.reason}).") from None
  except json.JSONDecodeError as err:
    raise ConfigError(f"{what} line {err.lineno} column {err.colno} is not valid JSON "
                      f"({err.msg}).") from None
  except ValueError as err:
    if too_many_digits(err):
      raise digits_error(what) from None
    raise


def _verify(root: Path, run: Optional[str]) -> None:
  """Check every chunk file's zip structure and CRCs, and that it is of run ``run`` (the
  manifest's; ``None``: not checked), up front, before anything is computed."""
  for path in sorted(root.glob("*/chunk_*.npz")):
    what = f"checkpoint {str(path)!r}"
    try:
      with zipfile.ZipFile(path) as zf:
        bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
      raise ConfigError(f"{what} is not a readable .npz file (truncated or corrupt: {err}). "
                        f"Delete it to recompute that chunk.") from None
    if bad is not None:
      raise ConfigError(f"{what} is not a readable .npz file (truncated or corrupt: a CRC error "
                        f"in {bad}). Delete it to recompute that chunk.")
    chunk_run = npz.run_id(path)
    if run is not None and chunk_run is not None and chunk_run != run:
      raise ConfigError(f"{what} is from run {chunk_run}, but {str(root / MANIFEST)!r} is from "
                        f"run {run}: two runs wrote into this directory. Start afresh "
                        f"(--force without --resume), or delete {str(path.parent)!r} to "
                        f"recompute that stage.")


class Checkpoints:
  """The checkpoints of one output directory; see the module docstring.

  Build with :meth:`create` (a fresh run) or :meth:`resume`, then pass to
  :func:`attndyn.pipeline.run`.

  Attributes:
    root: ``DIR/checkpoints``.
    manifest: the manifest dict.
    every: write after every this many chunks.
    writer: whether this process writes (process 0).
    loaded: stage -> chunks read back from disk.
    loaded_seconds: stage -> the computing seconds of those chunks, as the processes that
      computed them recorded (``None`` when a chunk has no record: an older attndyn's).
    computed: stage -> chunks computed by this process.
  """

  def __init__(self, root: Path, manifest: dict, *, every: int, writer: bool = True):
    self.root, self.manifest, self.every, self.writer = Path(root), manifest, every, writer
    self.loaded, self.computed, self.loaded_seconds = {}, {}, {}
    self.write_errors = {}   # stage -> indices of chunks whose checkpoint write failed

  @property
  def run_id(self) -> str:
    """The run's id (:func:`run_id`): the manifest's; one an older attndyn wrote has none, and
    gets the id of its config."""
    return self.manifest.get("run_id") or run_id(self.manifest["config"])

  @property
  def chunk_size(self) -> Optional[int]:
    """Points per chunk the sweep uses (``None``: all at once), fixed when the run started."""
    return self.manifest["chunk_size"]

  @classmethod
  def create(cls, out, config: dict, chunk_size: Optional[int], *, every: int,
             writer: bool = True) -> "Checkpoints":
    """Start afresh in ``out``: remove attndyn's old checkpoints there, write the manifest."""
    root = Path(out) / DIRNAME
    manifest = {"format": FORMAT, "config_hash": config_hash(config), "chunk_size": chunk_size,
                **_environment(), "run_id": run_id(config), "config": config}
    if writer:
      atomic.make_dirs(root)
      for old in sorted(root.glob("*/chunk_*.npz")) + sorted(root.glob("*/.chunk_*.tmp")):
        old.unlink()
      atomic.write_json(root / MANIFEST, manifest)
    return cls(root, manifest, every=every, writer=writer)

  @classmethod
  def resume(cls, out, *, writer: bool = True) -> "Checkpoints":
    """The checkpoints of ``out``, for ``--resume`` (call :meth:`check` with the config next).

    Raises:
      ConfigError: ``out`` or its manifest is missing or damaged, or newer than this attndyn.
    """
    out = Path(out)
    if not out.is_dir():
      raise ConfigError(f"--resume: --out {str(out)!r} does not exist, so there is nothing to "
                        f"resume; run without --resume.")
    path = out / DIRNAME / MANIFEST
    what = repr(str(path))
    if path.exists() and not path.is_file():
      raise ConfigError(f"--resume: {what} is not a file: not attndyn's checkpoints, or "
                        f"damaged ones. Rename or remove it, or start afresh in another --out.")
    if not path.is_file():
      raise ConfigError(f"--resume: {str(out)!r} has no checkpoints ({what} is missing), so "
                        f"there is nothing to resume; run without --resume (add --force if "
                        f"the directory is not empty).")
    manifest = _read_json(path, what)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format"), int):
      raise ConfigError(f"{what} has no format number: it was not written by attndyn.")
    if manifest["format"] > FORMAT:
      raise ConfigError(f"{what} has format {manifest['format']}, newer than this attndyn "
                        f"reads (up to {FORMAT}): upgrade attndyn to resume it.")
    for key in ("config", "config_hash", "chunk_size", "backend", "device_count"):
      if key not in manifest:
        raise ConfigError(f"{what} has no {key!r} entry: the file is damaged.")
    size = manifest["chunk_size"]
    if size is not None and not (schema.is_int(size) and 1 <= size <= schema.MAX_INT):
      raise ConfigError(f"{what} has chunk_size = {size!r}; attndyn writes a positive integer "
                        f"or null there: the file is damaged.")
    if not isinstance(manifest["config"], dict) or \
        config_hash(manifest["config"]) != manifest["config_hash"]:
      raise ConfigError(f"{what}: its config does not match its config_hash: the file was "
                        f"edited or is damaged.")
    if writer:  # temporary files of writes a kill interrupted
      for tmp in sorted((out / DIRNAME).glob("*/.chunk_*.tmp")):
        tmp.unlink()
    run = manifest.get("run_id")
    if run is not None and not isinstance(run, str):
      raise ConfigError(f"{what} has run_id = {run!r}; attndyn writes a string there: the file "
                        f"is damaged.")
    _verify(out / DIRNAME, run)
    return cls(out / DIRNAME, manifest, every=1, writer=writer)

  def _resume_mismatch(self, config: dict, started: Optional[dict]) -> Optional[Tuple[str, str]]:
    """``(why, what attndyn run allows)``, or ``None`` when the checkpoints can be resumed."""
    diff = differences(self.manifest["config"] if started is None else started, config)
    if diff:
      return (f"the config differs from the one {str(self.root.parent)!r} was started with: "
              f"{'; '.join(diff)}",
              "Resume with the same config (`attndyn run --out DIR --resume` alone reuses it)")
    env = _environment()
    for key, value in env.items():
      if self.manifest[key] != value:
        return (f"the checkpoints were written with {key} = {self.manifest[key]!r}, this "
                f"process has {value!r}: the chunks and their numbers would differ",
                "Resume on the same kind of machine")
    return None

  def mismatch(self, config: dict, started: Optional[dict] = None) -> Optional[str]:
    """Why these checkpoints cannot be resumed with ``config`` here, or ``None`` if they can.

    Args:
      config: the config of the resumed run (TOML-shaped dict).
      started: the first run's config as this attndyn reads it, i.e. with the
        defaults of keys an older attndyn did not write filled in (default: the
        manifest's config as stored).

    Returns:
      ``None``, or one sentence naming every differing field, or the backend or device
      count that differs (the chunks and their numbers would differ).
    """
    found = self._resume_mismatch(config, started)
    return None if found is None else found[0]

  def check(self, config: dict, every: int, started: Optional[dict] = None) -> None:
    """Refuse to resume with another config or on another kind of machine (``attndyn run``).

    Args:
      config: the config of the resumed run (TOML-shaped dict).
      every: its ``sweep.checkpoint_every`` (may differ from the first run's).
      started: as in :meth:`mismatch`.

    Raises:
      ConfigError: :meth:`mismatch`'s reason, with what ``attndyn run`` allows.
    """
    found = self._resume_mismatch(config, started)
    if found is not None:
      why, allowed = found
      raise ConfigError(f"--resume: {why}. {allowed}, or start afresh in another --out.")
    self.every = every

  def _path(self, stage: str, index: int) -> Path:
    return self.root / stage / f"chunk_{index:05d}.npz"

  def completed(self, stage: str, bounds: list, like: Callable[[], object],
                times: Optional[np.ndarray] = None) -> list:
    """The outputs of the leading chunks of ``stage`` already on disk, read back.

    Args:
      stage: ``gd``, ``reduced`` or ``gradient_flow``.
      bounds: ``[(start, stop), ...]`` of every chunk.
      like: returns the output structure of a chunk (``jax.eval_shape`` of it);
        called only when there is a chunk to read.
      times: the recorded times every point's ``t`` must hold (and that bound
        its ``failed_at``), so a damaged chunk is named before anything runs,
        not by a comparison after every stage.

    Returns:
      A list of pytrees of NumPy arrays, one per finished chunk, in order.

    Raises:
      ConfigError: a chunk file is unreadable or does not match this run.
    """
    done = []
    if not self._path(stage, 0).is_file():
      self.loaded[stage] = 0
      return done
    paths, treedef = jax.tree_util.tree_flatten_with_path(like())
    names = [leaf_name(p) for p, _ in paths]
    for index, (start, stop) in enumerate(bounds):
      path = self._path(stage, index)
      if not path.is_file():
        break
      arrays = npz.read(path, what=f"checkpoint {str(path)!r}")
      problem = (self._mismatch(arrays, names, [leaf for _, leaf in paths], start, stop)
                 or self._wrong_times(arrays, times))
      if problem:
        raise ConfigError(f"checkpoint {str(path)!r} does not match this run ({problem}). "
                          f"Delete {str(self.root / stage)!r} to recompute that stage, or start "
                          f"afresh in another --out.")
      done.append(jax.tree_util.tree_unflatten(treedef, [arrays[n] for n in names]))
    self.loaded[stage] = len(done)
    seconds = [npz.comment(self._path(stage, i)).get("seconds") for i in range(len(done))]
    self.loaded_seconds[stage] = (float(sum(seconds)) if all(
        isinstance(x, (int, float)) for x in seconds) else None)
    return done

  @staticmethod
  def _mismatch(arrays: dict, names: list, leaves: list, start: int, stop: int) -> str:
    bounds = arrays.get(_BOUNDS)
    if bounds is None or bounds.tolist() != [start, stop]:
      return f"it holds sweep points {None if bounds is None else bounds.tolist()}, " \
             f"expected [{start}, {stop}]"
    if set(arrays) - {_BOUNDS} != set(names):
      return f"its arrays are {sorted(set(arrays) - {_BOUNDS})}, expected {sorted(names)}"
    for name, leaf in zip(names, leaves):
      want = ((stop - start,) + tuple(leaf.shape[1:]), np.dtype(leaf.dtype))
      have = (arrays[name].shape, arrays[name].dtype)
      if have != want:
        return f"{name} has shape {have[0]} and dtype {have[1]}, expected {want[0]} {want[1]}"
    return ""

  @staticmethod
  def _wrong_times(arrays: dict, times: Optional[np.ndarray]) -> str:
    if times is None or "t" not in arrays:
      return ""
    times = np.asarray(times, np.float64)
    t = arrays["t"].astype(np.float64)
    if not np.array_equal(t, np.broadcast_to(times, t.shape)):
      return f"its times t are not this run's recorded steps {times[0]:g}, {times[1]:g}, ..., " \
             f"{times[-1]:g}"
    failed = arrays.get("failed_at")
    if failed is not None and not np.all((failed == -1) | ((failed >= 0) & (failed <= times[-1]))):
      return f"its failed_at holds {failed.tolist()}; -1 (no failure) or a step in " \
             f"0..{times[-1]:g} is expected"
    return ""

  def saver(self, stage: str, bounds: list) -> "Saver":
    """An ``on_chunk``-style callback that writes each finished chunk of ``stage``."""
    return Saver(self, stage, bounds)

  def write(self, stage: str, index: int, bounds: tuple, out,
            seconds: Optional[float] = None) -> None:
    """Write chunk ``index`` (points ``bounds``) of ``stage`` atomically (writer only);
    ``seconds``, the time the chunk took to compute, goes in the file's zip comment, so a
    resumed run can report the computing time of the chunks it reads back."""
    if not self.writer:
      return
    paths, _ = jax.tree_util.tree_flatten_with_path(out)
    arrays = {leaf_name(p): np.asarray(leaf) for p, leaf in paths}
    arrays[_BOUNDS] = np.asarray(bounds, np.int64)
    path = self._path(stage, index)
    atomic.make_dirs(path.parent)
    meta = {} if seconds is None else {"seconds": float(seconds)}
    atomic.write(path, lambda tmp: npz.write(tmp, arrays, run_id=self.run_id, meta=meta))


class Saver:
  """Buffers finished chunks and writes them every ``store.every`` chunks (and at the end).

  Call it as ``saver(done, out)`` after each chunk (``done``: points finished so
  far) and :meth:`flush` when the stage ends, normally or not. A chunk's computing time is
  the time since the previous one finished (since the saver was made, compiling included,
  for the first).
  """

  def __init__(self, store: Checkpoints, stage: str, bounds: list):
    self.store, self.stage, self.bounds = store, stage, bounds
    self._index = {stop: i for i, (_, stop) in enumerate(bounds)}
    self.pending = []
    self._last = time.perf_counter()

  def __call__(self, done: int, out) -> None:
    index = self._index[done]
    now = time.perf_counter()
    seconds, self._last = now - self._last, now
    self.store.computed[self.stage] = self.store.computed.get(self.stage, 0) + 1
    if self.store.every <= 0:
      return
    self.pending.append((index, out, seconds))
    if len(self.pending) >= self.store.every or index == len(self.bounds) - 1:
      self.flush()

  def flush(self) -> None:
    """Write every buffered chunk.

    A chunk that cannot be written (a full disk, a read-only mount, ...) is
    named in a warning and the stage goes on: its results are in memory and
    reach the final files; only a kill before then would cost that chunk. The
    stage's computed results are never dropped because a side write failed.
    """
    while self.pending:
      index, out, seconds = self.pending.pop(0)
      try:
        self.store.write(self.stage, index, self.bounds[index], out, seconds=seconds)
      except OSError as err:
        message = f"{err.strerror or err}"
        self.store.write_errors.setdefault(self.stage, []).append(index)
        print(f"attndyn: warning: checkpoint {self.stage} chunk {index} could not be written "
              f"({message}); the run goes on and its results reach the final files, but a "
              f"kill before then loses this chunk.", file=sys.stderr, flush=True)
