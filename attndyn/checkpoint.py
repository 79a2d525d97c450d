"""Checkpoints of a sweep, so that ``attndyn run ... --resume`` continues after a kill.

``DIR/checkpoints/`` holds ``manifest.json`` (the config, its hash, the chunk size and
the machine, written before anything runs) beside a :class:`attndyn.jobs.Store` of the
finished chunks. Chunk ``i`` of a stage (``gd``, ``reduced``, ``gradient_flow``) is the
entry whose key digests the run's id (:func:`run_id`: its config, backend and device
count), the stage and the chunk's sweep points (:func:`dynamics.sweep.chunk_bounds`); it
holds one array per pytree leaf under a stable name (``observables/loss``, ...), the
seconds the chunk took, and the pytree those arrays form with a stamp of the code that
wrote it. The key leaves out the code's revision, so a run resumes across an upgrade, as
it always could: a chunk whose arrays are not the ones this code computes (the structure
of the stage traced here) is computed again; one this same code wrote is read back into
its recorded structure without tracing the stage (seconds for an ODE solve). Every entry
is written atomically and checked on reading (the store's
digest), so a kill loses at most the chunks not yet written (``sweep.checkpoint_every``
of them), and a damaged entry, or one another run wrote (its key is another), is never
read back. A resumed run reads the finished chunks back and runs the rest with the same
chunk size, which makes its results bit-identical to an uninterrupted run's on the same
machine.
"""
import functools
import importlib
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import jax
import numpy as np

from attndyn.analysis import results
from attndyn import atomic, jobs, schema
from attndyn.tasks.errors import ConfigError

__all__ = ["FORMAT", "IGNORED", "flatten", "config_hash", "differences", "run_id", "Checkpoints",
           "Saver"]

DIRNAME, MANIFEST = "checkpoints", "manifest.json"
FORMAT = 2      # 2: the chunks are store entries (1: chunk files, which are not read)
# Config fields that do not change the results (they may differ on --resume), the flat
# config and its digest: analysis.results's, which readers check summary.json against.
IGNORED, flatten, config_hash = results.IGNORED, results.flatten, results.config_hash
# A chunk's array names: each leaf's pytree path as ``a/b/c`` (dict keys, attribute names,
# sequence indices).
_leaf_name = functools.partial(jax.tree_util.keystr, simple=True, separator="/")


def _code_stamp() -> str:
  """What decides a stage's output structure beside the run's config (its id, in the chunk's
  key): this code's revision (:func:`attndyn.jobs.key_of`) and the JAX it runs on."""
  return jobs.key_of("checkpoint structure", jax.__version__)


def _tree_json(treedef):
  """A chunk's pytree structure as JSON: ``0`` a leaf; dicts of string keys, lists, tuples,
  ``None`` and attndyn's NamedTuples (by module and name). ``None`` for any other node.

  JSON, not ``PyTreeDef.serialize_using_proto``: JAX's own encoding refuses NamedTuples (a
  :class:`dynamics.Trajectory` is one), and the store keeps no pickles."""
  node = treedef.node_data()
  if node is None:
    return 0
  kind, data = node
  of = [_tree_json(child) for child in treedef.children()]
  if any(child is None for child in of):
    return None
  if kind is dict and all(isinstance(k, str) for k in data):
    return {"dict": list(data), "of": of}
  if kind in (list, tuple):
    return {kind.__name__: of}
  if kind is type(None):
    return {"none": []}
  if (issubclass(kind, tuple) and hasattr(kind, "_fields")
      and kind.__module__.startswith("attndyn.")):
    return {"namedtuple": f"{kind.__module__}:{kind.__qualname__}", "of": of}
  return None


def _skeleton(doc):
  """The pytree :func:`_tree_json` described, with ``0`` at each leaf.

  Raises:
    ValueError: ``doc`` is not such a description, or names a type outside attndyn's
      modules or not a NamedTuple of that many fields.
  """
  if doc == 0 and not isinstance(doc, bool):
    return 0
  if not isinstance(doc, dict) or len(doc) > 2:
    raise ValueError("not a pytree description")
  if "dict" in doc:
    keys, of = doc["dict"], doc["of"]
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)
            and len(set(keys)) == len(keys) == len(of)):
      raise ValueError("a dict's keys do not match its children")
    return dict(zip(keys, map(_skeleton, of)))
  if set(doc) == {"list"} or set(doc) == {"tuple"}:
    (kind, of), = doc.items()
    return (list if kind == "list" else tuple)(map(_skeleton, of))
  if set(doc) == {"none"}:
    return None
  module, _, name = str(doc.get("namedtuple", "")).partition(":")
  if not module.startswith("attndyn.") or not name:
    raise ValueError("a node type outside attndyn")
  kind = importlib.import_module(module)
  for part in name.split("."):
    kind = getattr(kind, part)
  of = doc["of"]
  if not (isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")
          and len(kind._fields) == len(of)):
    raise ValueError(f"{name} is not a NamedTuple of {len(of)} fields")
  return kind(*map(_skeleton, of))


def differences(old: dict, new: dict) -> list:
  """``["train.lr = 0.1 in the checkpoints, 0.2 now", ...]`` (:data:`IGNORED` left out)."""
  a, b = flatten(old), flatten(new)
  out = []
  for key in sorted(set(a) | set(b)):
    if key not in IGNORED and a.get(key) != b.get(key):
      out.append(f"{key} = {a.get(key)!r} in the checkpoints, {b.get(key)!r} now")
  return out


def run_id(config: dict) -> str:
  """The id written into every file of a run (summary.json, trajectories.npz, run_info.json,
  the manifest; each chunk's key), so that readers refuse a directory mixing two runs' files.

  It is a digest of what determines the results (the config less :data:`IGNORED`, the backend
  and device count), not a random uuid: two runs of one config on one kind of machine write
  the same bytes (tests/test_determinism.py), so their files mix harmlessly and share an id,
  and a resumed run keeps the id of the run it continues.
  """
  return results.run_id_of(config, **_environment())


def _environment() -> dict:
  return {"backend": jax.default_backend(), "device_count": jax.device_count()}


class Checkpoints:
  """The checkpoints of one output directory; see the module docstring.

  Build with :meth:`create` (a fresh run) or :meth:`resume`, then pass to
  :func:`attndyn.pipeline.run`.

  Attributes:
    root: ``DIR/checkpoints``.
    store: the :class:`attndyn.jobs.Store` of the finished chunks there.
    manifest: the manifest dict.
    every: write after every this many chunks.
    writer: whether this process writes (process 0).
    loaded: stage -> chunks read back from disk.
    loaded_seconds: stage -> the computing seconds of those chunks, as the processes that
      computed them recorded (``None`` when a chunk has no record).
    computed: stage -> chunks computed by this process.
  """

  def __init__(self, root: Path, manifest: dict, *, every: int, writer: bool = True):
    self.root, self.manifest, self.every, self.writer = Path(root), manifest, every, writer
    self.store = jobs.Store(self.root)
    self.loaded, self.computed, self.loaded_seconds = {}, {}, {}

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
             writer: bool = True, keep: bool = False) -> "Checkpoints":
    """Start afresh in ``out``: write the manifest, and remove the chunks stored there
    unless ``keep`` (they are another config's: their keys are not this run's)."""
    root = Path(out) / DIRNAME
    manifest = {"format": FORMAT, "config_hash": config_hash(config), "chunk_size": chunk_size,
                **_environment(), "run_id": run_id(config), "config": config}
    if writer:
      atomic.make_dirs(root)
      if not keep:
        jobs.Store(root).discard([Path(MANIFEST).stem])
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
    manifest = results.read_json(path, what)
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
    run = manifest.get("run_id")
    if run is not None and not isinstance(run, str):
      raise ConfigError(f"{what} has run_id = {run!r}; attndyn writes a string there: the file "
                        f"is damaged.")
    return cls(out / DIRNAME, manifest, every=1, writer=writer)

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
    diff = differences(self.manifest["config"] if started is None else started, config)
    if diff:
      return (f"the config differs from the one {str(self.root.parent)!r} was started with: "
              f"{'; '.join(diff)}")
    for key, value in _environment().items():
      if self.manifest[key] != value:
        return (f"the checkpoints were written with {key} = {self.manifest[key]!r}, this "
                f"process has {value!r}: the chunks and their numbers would differ")
    return None

  def check(self, config: dict, every: int, started: Optional[dict] = None) -> None:
    """Refuse to resume with another config or on another kind of machine (``attndyn run``).

    Args:
      config: the config of the resumed run (TOML-shaped dict).
      every: its ``sweep.checkpoint_every`` (may differ from the first run's).
      started: as in :meth:`mismatch`.

    Raises:
      ConfigError: :meth:`mismatch`'s reason, with what ``attndyn run`` allows.
    """
    why = self.mismatch(config, started)
    if why is not None:
      allowed = ("Resume with the same config (`attndyn run --out DIR --resume` alone reuses "
                 "it)" if why.startswith("the config") else "Resume on the same kind of machine")
      raise ConfigError(f"--resume: {why}. {allowed}, or start afresh in another --out.")
    self.every = every

  def entry(self, stage: str, index: int, bounds) -> jobs.Job:
    """The store entry of chunk ``index`` (sweep points ``bounds``) of ``stage``."""
    start, stop = (int(b) for b in bounds)
    return jobs.Job(f"{stage}-chunk-{index:05d}", None, (),
                    jobs.key_of("chunk", self.run_id, stage, start, stop, code=False))

  def completed(self, stage: str, bounds: list, like: Callable[[], object],
                times: Optional[np.ndarray] = None) -> list:
    """The outputs of the leading chunks of ``stage`` in the store, read back.

    Args:
      stage: ``gd``, ``reduced`` or ``gradient_flow``.
      bounds: ``[(start, stop), ...]`` of every chunk.
      like: returns the output structure of a chunk (``jax.eval_shape`` of it);
        called only when there is a chunk to read.
      times: the recorded times every point's ``t`` must hold (and that bound
        its ``failed_at``).

    Returns:
      A list of pytrees of NumPy arrays, one per finished chunk, in order. Reading stops
      at the first chunk not stored, damaged (said by the store) or not of this code's
      arrays and times (said here): it and the rest are computed again.
    """
    done, seconds = [], []
    for index, (start, stop) in enumerate(bounds):
      job = self.entry(stage, index, (start, stop))
      got = self.store.get(job) if job.key in self.store else None
      if got is None:
        break
      arrays = got["arrays"]
      if not done:
        paths, treedef = jax.tree_util.tree_flatten_with_path(
            self._written_structure(got) or like())
        names = [_leaf_name(p) for p, _ in paths]
      problem = (self._mismatch(arrays, names, [leaf for _, leaf in paths], stop - start)
                 or self._wrong_times(arrays, times))
      if problem:
        print(f"attndyn: checkpoint {stage} chunk {index} ({self.root / job.key}.json) does "
              f"not fit this run ({problem}): it and the chunks after it are computed again",
              file=sys.stderr, flush=True)
        break
      done.append(jax.tree_util.tree_unflatten(treedef, [arrays[n] for n in names]))
      seconds.append(got["seconds"])
    self.loaded[stage] = len(done)
    if done:
      self.loaded_seconds[stage] = (float(sum(seconds)) if all(
          isinstance(x, (int, float)) for x in seconds) else None)
    return done

  @staticmethod
  def _written_structure(got: dict):
    """The chunk's output structure (``jax.ShapeDtypeStruct`` leaves, one point) as its writer
    recorded it, when that was this code (:func:`_code_stamp`): the same code and run (the
    chunk's key) give the same structure, so ``like``, which traces the stage's whole
    program (seconds for an ODE solve), is not needed. ``None`` otherwise."""
    written = got.get("structure")
    if not isinstance(written, dict) or written.get("code") != _code_stamp():
      return None
    try:
      paths, treedef = jax.tree_util.tree_flatten_with_path(_skeleton(written.get("tree")))
    except (ValueError, TypeError, KeyError, ImportError, AttributeError):
      return None
    arrays = got["arrays"]
    names = [_leaf_name(p) for p, _ in paths]
    if set(names) != set(arrays) or len(names) != len(arrays):
      return None
    return jax.tree_util.tree_unflatten(treedef, [
        jax.ShapeDtypeStruct((1,) + arrays[n].shape[1:], arrays[n].dtype) for n in names])

  @staticmethod
  def _mismatch(arrays: dict, names: list, leaves: list, size: int) -> str:
    if set(arrays) != set(names):
      return f"its arrays are {sorted(arrays)}, expected {sorted(names)}"
    for name, leaf in zip(names, leaves):
      want = ((size,) + tuple(leaf.shape[1:]), np.dtype(leaf.dtype))
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
    """Store chunk ``index`` (points ``bounds``) of ``stage`` (writer only) with ``seconds``,
    the time it took to compute, so a resumed run can report the computing time of the
    chunks it reads back."""
    if self.writer:
      paths, treedef = jax.tree_util.tree_flatten_with_path(out)
      arrays = {_leaf_name(p): np.asarray(leaf) for p, leaf in paths}
      entry = {"arrays": arrays, "seconds": seconds}
      tree = _tree_json(treedef)
      if tree is not None:   # read back without tracing the stage, by this same code
        entry["structure"] = {"code": _code_stamp(), "tree": tree}
      self.store.put(self.entry(stage, index, bounds), entry)


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
        print(f"attndyn: warning: checkpoint {self.stage} chunk {index} could not be written "
              f"({err.strerror or err}); the run goes on and its results reach the final "
              f"files, but a kill before then loses this chunk.", file=sys.stderr, flush=True)
