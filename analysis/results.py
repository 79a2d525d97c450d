"""Read a results directory back: ``analysis.load(DIR)`` -> arrays with named axes.

An ``attndyn run`` directory holds ``summary.json`` (numbers per run and their
aggregate) and ``trajectories.npz`` (every recorded array, run axis first).
:func:`load` checks the schema version and the files, and returns a
:class:`Results`: the summary, the config, each run's sweep coordinates and,
per trajectory kind (``gd``, ``reduced``, ``gradient_flow``), its arrays as
:class:`Named` arrays whose axes are named ``run``, ``step``, ``word`` (topic
words) and ``vocab`` (every word of the vocabulary).

Example::

  res = analysis.load("results/quick")
  score = res.gd["score"]                  # Named, dims ("run", "step", "word")
  res.sel(seed=0).gd["loss"].data          # [1, T]
  res.points["train.lr"]                   # [P] grid coordinate of each run
"""
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from attndyn.analysis import npz
from attndyn.analysis.summary import aggregate
from attndyn.dynamics.trajectory import Trajectory
from attndyn.tasks.errors import ConfigError, digits_error, too_many_digits

__all__ = ["SCHEMA_VERSION", "READABLE_VERSIONS", "KINDS", "Named", "dims_of", "Results",
           "read_json", "read_summary", "check_one_run", "expected_kinds", "load", "to_arrays",
           "from_arrays"]

# The layout of summary.json: 2 moved the run-dependent `created`, `command` and
# `seconds` to run_info.json and added `diverged` per run and `n_diverged`.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SUMMARY, TRAJECTORIES, RUN_INFO = "summary.json", "trajectories.npz", "run_info.json"
KINDS = ("gd", "reduced", "extended", "gradient_flow")
_REQUIRED = {"config": dict, "points": list, "runs": list, "aggregate": dict}


class Named(NamedTuple):
  """A NumPy array with a name for each axis.

  Attributes:
    data: the array.
    dims: one name per axis, e.g. ``("run", "step", "word")``.
  """
  data: np.ndarray
  dims: tuple

  @property
  def shape(self) -> tuple:
    return self.data.shape

  def __array__(self, dtype=None, copy=None):
    return np.asarray(self.data, dtype=dtype)

  def isel(self, **index) -> "Named":
    """Index axes by name: ``x.isel(run=0, word=[1, 2])`` (an integer drops the axis).

    Raises:
      ConfigError: an axis name this array does not have.
    """
    for dim in index:
      if dim not in self.dims:
        raise ConfigError(f"axis {dim!r} is not allowed: this array's axes are "
                          f"{', '.join(self.dims)}.")
    key = tuple(index.get(d, slice(None)) for d in self.dims)
    dims = tuple(d for d in self.dims if not isinstance(index.get(d), (int, np.integer)))
    return Named(self.data[key], dims)


def dims_of(name: str, ndim: int) -> tuple:
  """Axis names of the array ``<kind>/<name>`` of trajectories.npz (run axis first)."""
  if name == "failed_at":
    fixed = ("run",)
  elif name.startswith("final_word_"):
    fixed = ("run", "vocab")
  else:
    fixed = ("run", "step", "word")
  fixed = fixed[:ndim]
  return fixed + tuple(f"axis{i}" for i in range(len(fixed), ndim))


@dataclasses.dataclass(frozen=True)
class Results:
  """A results directory in memory.

  Attributes:
    directory: where it was read from.
    summary: summary.json as a dict.
    points: coordinate -> ``[run]`` array: ``seed``, ``data_seed`` and each grid field
      (``"train.lr"``, ...), in the order of the runs.
    stages: kind (``gd``, ``reduced``, ``gradient_flow``) -> name -> :class:`Named`
      (``t``, ``failed_at``, every recorded observable, ``final_word_score``, ...).
    exceptions: stage -> the exception an ODE stage raised, when the results come
      straight from ``ad.run`` (never written; ``summary["errors"]`` has the messages).
    gd_path: which gradient-descent path ran and why, from ``ad.run`` (on disk in
      run_info.json).
  """
  directory: Optional[Path]
  summary: dict
  points: dict
  stages: dict
  exceptions: dict = dataclasses.field(default_factory=dict, compare=False)
  gd_path: dict = dataclasses.field(default_factory=dict, compare=False)

  @property
  def config(self) -> dict:
    """The run's full config, TOML-shaped (``attndyn.config.RunConfig.from_dict`` takes it)."""
    return self.summary["config"]

  @property
  def runs(self) -> list:
    """summary.json's per-run records (same order as the run axis)."""
    return self.summary["runs"]

  @property
  def n_runs(self) -> int:
    return len(self.summary["runs"])

  @property
  def gd(self) -> dict:
    """Gradient descent's arrays: name -> :class:`Named`."""
    return self.stages["gd"]

  @property
  def reduced(self) -> Optional[dict]:
    """The reduced ODE's arrays, or ``None`` when it was not run."""
    return self.stages.get("reduced")

  @property
  def gradient_flow(self) -> Optional[dict]:
    """The gradient flow's arrays, or ``None`` when it was not run."""
    return self.stages.get("gradient_flow")

  def trajectory(self, kind: str) -> Trajectory:
    """One kind as a :class:`dynamics.Trajectory` (no parameters), e.g. for the figures."""
    arrays = self.stages[kind]
    observables = {n: a.data for n, a in arrays.items()
                   if n not in ("t", "failed_at") and not n.startswith("final_")}
    return Trajectory(t=arrays["t"].data, observables=observables, final_params=None,
                      failed_at=arrays["failed_at"].data)

  def sel(self, coords: Optional[Mapping[str, Any]] = None, **kwargs) -> "Results":
    """The runs whose coordinates match, e.g. ``sel(seed=0)``, ``sel({"train.lr": 0.1})``.

    Keyword names may spell a grid field's dot as ``_`` (``train_lr=0.1``). A value
    may be a list (any of). The aggregate is recomputed for the selected runs.

    Raises:
      ConfigError: an unknown coordinate, or no run matches.
    """
    wanted = dict(coords or {})
    by_key = {name.replace(".", "_"): name for name in self.points}
    for key, value in kwargs.items():
      wanted[key if key in self.points else by_key.get(key, key)] = value
    keep = np.ones(self.n_runs, bool)
    for name, value in wanted.items():
      if name not in self.points:
        raise ConfigError(f"sel: coordinate {name!r} is not allowed: one of "
                          f"{', '.join(self.points)}.")
      values = np.atleast_1d(np.asarray(value, dtype=float))
      have = self.points[name].astype(float)
      match = np.isclose(have[:, None], values[None, :], rtol=1e-9, atol=0).any(axis=1)
      if not match.any():
        raise ConfigError(f"sel: {name} = {value!r} matches no run; the runs have "
                          f"{name} in {sorted(set(self.points[name].tolist()))}.")
      keep &= match
    if not keep.any():
      raise ConfigError(f"sel: no run has all of {wanted}.")
    idx = np.flatnonzero(keep)
    runs = [self.runs[i] for i in idx]
    summary = {**self.summary, "runs": runs, "points": [self.summary["points"][i] for i in idx],
               "aggregate": aggregate(runs)}
    stages = {kind: {n: Named(a.data[idx], a.dims) for n, a in arrays.items()}
              for kind, arrays in self.stages.items()}
    return dataclasses.replace(self, summary=summary, stages=stages,
                               points={n: v[idx] for n, v in self.points.items()})


# Config fields that do not change the results (`attndyn run --resume` may change them).
IGNORED = ("sweep.checkpoint_every",)


def flatten(config: dict, prefix: str = "") -> dict:
  """``{"train": {"lr": 0.1}}`` -> ``{"train.lr": 0.1}`` (grid tables stay values)."""
  flat = {}
  for key, value in config.items():
    if isinstance(value, dict) and key != "grid":
      flat.update(flatten(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def config_hash(config: dict) -> str:
  """sha256 of the config's canonical JSON, leaving out :data:`IGNORED` fields."""
  flat = {k: v for k, v in flatten(config).items() if k not in IGNORED}
  return hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()


def run_id_of(config: dict, backend: str, device_count: int) -> str:
  """The id of the run of ``config`` on ``device_count`` devices of ``backend``: a digest of
  what determines the results, written into every file of a run
  (:func:`attndyn.checkpoint.run_id` gives it this machine's backend)."""
  key = json.dumps({"config_hash": config_hash(config), "backend": backend,
                    "device_count": device_count}, sort_keys=True)
  return hashlib.sha256(key.encode()).hexdigest()[:32]


def check_config(path, summary: dict) -> None:
  """summary.json's config must be the one its run id names, as a checkpoint's is: an edited
  config (lr 0.1 -> 0.5) would otherwise be reported as what ran. A file without a run id or
  environment (an older attndyn) is not checked.

  Raises:
    ConfigError: naming the file and both ids.
  """
  run, env = summary.get("run_id"), summary.get("environment")
  if not (isinstance(run, str) and isinstance(env, dict) and "backend" in env
          and "device_count" in env):
    return
  try:
    expected = run_id_of(summary["config"], env["backend"], env["device_count"])
  except (TypeError, ValueError):   # not JSON-able: damaged in a way the digest cannot take
    expected = None
  if expected != run:
    raise ConfigError(f"{str(path)!r}: its config is not the one run {run} ran (that config "
                      f"would be run {expected}): the file was edited or damaged. Run again "
                      f"into it (--force, or --resume to rewrite it from its checkpoints).")


def _line_of(data: bytes, offset: int) -> int:
  return data[:offset].count(b"\n") + 1


def read_json(path, what: str, *, then: str = "") -> Any:
  """The JSON document in the file ``path`` (every JSON file attndyn reads back).

  Raises:
    ConfigError: one line naming ``what``: not UTF-8 text (with the line), not valid JSON
      (with the line and column), each followed by ``then`` (what to do about it); or an
      integer longer than Python reads.
  """
  data = Path(path).read_bytes()
  try:
    return json.loads(data.decode("utf-8"))
  except UnicodeDecodeError as err:
    raise ConfigError(f"{what} line {_line_of(data, err.start)} is not UTF-8 text "
                      f"({err.reason}){then}.") from None
  except json.JSONDecodeError as err:
    raise ConfigError(f"{what} line {err.lineno} column {err.colno} is not valid JSON "
                      f"({err.msg}){then}.") from None
  except ValueError as err:   # an integer of more digits than Python reads
    if too_many_digits(err):
      raise digits_error(what) from None
    raise


def read_summary(path) -> dict:
  """summary.json, with its schema version checked.

  Raises:
    ConfigError: missing, not UTF-8 or not JSON (with the line), not written by
      attndyn, written by a newer attndyn, or missing a required entry.
  """
  path = Path(path)
  what = repr(str(path))
  if not path.is_file():
    raise ConfigError(f"{what} is missing: not an attndyn results directory, or its run did not "
                      f"finish (`attndyn run ... --out DIR --resume` completes it).")
  doc = read_json(path, what, then=": the file is truncated or was edited")
  if not isinstance(doc, dict) or "schema_version" not in doc:
    raise ConfigError(f"{what} has no schema_version: it was not written by attndyn.")
  version = doc["schema_version"]
  if not isinstance(version, int) or isinstance(version, bool) or version < 1:
    raise ConfigError(f"{what}: schema_version = {version!r} is not allowed: a positive "
                      f"integer (this attndyn reads {', '.join(map(str, READABLE_VERSIONS))}).")
  if version > SCHEMA_VERSION:
    raise ConfigError(f"{what} has schema_version {version}, newer than this attndyn reads "
                      f"(up to {SCHEMA_VERSION}): upgrade attndyn to read it.")
  for key, kind in _REQUIRED.items():
    if not isinstance(doc.get(key), kind):
      raise ConfigError(f"{what} has no valid {key!r} entry (expected a JSON "
                        f"{'object' if kind is dict else 'list'}): the file is damaged.")
  return doc


def _run_info_id(path: Path):
  """run_info.json's run id, or ``None`` (no such file, not JSON, or no id: it is not needed
  to read the results, so only an id it does hold is compared)."""
  try:
    doc = json.loads(path.read_text(encoding="utf-8"))
  except (OSError, ValueError):
    return None
  value = doc.get("run_id") if isinstance(doc, dict) else None
  return value if isinstance(value, str) else None


def check_one_run(directory) -> Optional[str]:
  """Refuse a directory whose files were written by different runs; return the run id.

  summary.json, trajectories.npz and run_info.json each carry the id of the run that
  wrote them (attndyn.checkpoint.run_id). A file without one (written by an attndyn
  before run ids) is not compared, so older directories still load.

  Raises:
    ConfigError: two of the files name different runs (both files and ids named).
  """
  directory = Path(directory)
  ids = {}
  try:
    doc = json.loads((directory / SUMMARY).read_text(encoding="utf-8"))
    if isinstance(doc, dict) and isinstance(doc.get("run_id"), str):
      ids[SUMMARY] = doc["run_id"]
  except (OSError, ValueError):
    pass  # read_summary names what is wrong with it
  ids[TRAJECTORIES] = npz.run_id(directory / TRAJECTORIES)
  ids[RUN_INFO] = _run_info_id(directory / RUN_INFO)
  ids = {name: value for name, value in ids.items() if value is not None}
  names = list(ids)
  for other in names[1:]:
    if ids[other] != ids[names[0]]:
      raise ConfigError(
          f"{str(directory / names[0])!r} is from run {ids[names[0]]}, but "
          f"{str(directory / other)!r} is from run {ids[other]}: the directory mixes the files "
          f"of two runs (two runs into one --out, or a run killed while writing). Run again "
          f"into it (--force, or --resume to continue from its checkpoints).")
  return ids[names[0]] if names else None


# What the figures and the report read of every trajectory kind, beside t and failed_at.
_DRAWN = ("loss", "score", "emb_norm", "invariant")
# attndyn.config.ODE_STAGES, read back here (analysis does not import attndyn; a test holds
# the two equal).
_ODE_KINDS = {"none": (), "both": ("reduced", "gradient_flow"), "reduced": ("reduced",),
              "gradient_flow": ("gradient_flow",), "extended": ("extended",),
              "reduced_extended": ("reduced", "extended"),
              "all": ("reduced", "extended", "gradient_flow")}


def _int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def expected_kinds(summary: dict) -> list:
  """The trajectory kinds summary.json implies: ``gd`` and each configured ODE that did not
  fail (a failed stage is in ``errors`` and has no arrays)."""
  ode = summary["config"].get("ode")
  kind = ode.get("kind") if isinstance(ode, dict) else None
  errors = summary.get("errors") if isinstance(summary.get("errors"), dict) else {}
  odes = _ODE_KINDS.get(kind, ()) if isinstance(kind, str) else ()
  return ["gd"] + [k for k in odes if k not in errors]


def _check_arrays(path: Path, summary: dict, arrays: dict) -> None:
  """Every array summary.json implies is there, numeric, and of the shape it implies.

  The run axis holds one entry per run of summary.json; each kind (:func:`expected_kinds`)
  has ``t`` and ``failed_at`` and the observables drawn (:data:`_DRAWN`); every ``[run,
  step, ...]`` array has the recorded times of ``t`` (``train.steps / train.record_every
  + 1`` of them), and the word axes agree within a kind. So a damaged or foreign file is
  one error naming the array, before anything is drawn.

  Raises:
    ConfigError: naming the file and the array.
  """
  where = repr(str(path))
  n_runs = len(summary["runs"])
  for name, value in arrays.items():
    if value.ndim == 0 or value.shape[0] != n_runs:
      raise ConfigError(f"{where}: array {name!r} has shape {value.shape}, but summary.json has "
                        f"{n_runs} runs: the two files are from different runs.")
    if value.dtype.kind not in "biuf":
      raise ConfigError(f"{where}: array {name!r} has dtype {value.dtype}; attndyn writes "
                        f"numbers there: the file is damaged.")
  coords = summary["points"][0] if summary["points"] and isinstance(summary["points"][0], dict) \
      else {}
  for coord in coords:
    if f"points/{coord}" not in arrays:
      raise ConfigError(f"{where} has no array 'points/{coord}', which summary.json's points "
                        f"name: the file is damaged or from another run.")
  train = summary["config"].get("train")
  steps, every = (train.get("steps"), train.get("record_every")) if isinstance(train, dict) \
      else (None, None)
  n_times = steps // every + 1 if _int(steps) and _int(every) else None
  kinds = expected_kinds(summary)
  kinds += sorted({n.partition("/")[0] for n in arrays} - set(kinds) - {"points"})
  for kind in kinds:
    for leaf in ("t", "failed_at") + _DRAWN:
      if f"{kind}/{leaf}" not in arrays:
        raise ConfigError(f"{where} has no array '{kind}/{leaf}', which summary.json implies "
                          f"(the {kind} stage ran): the file is damaged or from another run.")
    t = arrays[f"{kind}/t"]
    if t.ndim != 2 or (n_times is not None and t.shape[1] != n_times):
      raise ConfigError(f"{where}: array '{kind}/t' has shape {t.shape}, but summary.json "
                        f"implies ({n_runs}, {n_times}) (train.steps = {steps}, "
                        f"train.record_every = {every}): the file is damaged or from another "
                        f"run.")
    # the word axes against score's (drawn) and final_word_score's, so the damaged one is named
    words = {dim: (f"{kind}/{ref}", arrays[f"{kind}/{ref}"].shape[axis])
             for dim, ref, axis in (("word", "score", 2), ("vocab", "final_word_score", 1))
             if f"{kind}/{ref}" in arrays and arrays[f"{kind}/{ref}"].ndim > axis}
    for name, value in arrays.items():
      head, _, rest = name.partition("/")
      if head != kind or rest == "t":
        continue
      want = {"failed_at": 1}.get(rest, 2 if rest.startswith("final_word_") else None)
      if (want is not None and value.ndim != want) or \
          (want is None and (value.ndim not in (2, 3) or value.shape[1] != t.shape[1])):
        expected = f"{want} axes" if want is not None else \
            f"({n_runs}, {t.shape[1]}) or ({n_runs}, {t.shape[1]}, words), the times of {kind}/t"
        raise ConfigError(f"{where}: array {name!r} has shape {value.shape}, expected "
                          f"{expected}: the file is damaged or from another run.")
      for axis, dim in enumerate(dims_of(rest, value.ndim)[1:], 1):
        if dim in words and value.shape[axis] != words[dim][1]:
          raise ConfigError(f"{where}: array {name!r} has {value.shape[axis]} {dim} entries, "
                            f"but {words[dim][0]!r} has {words[dim][1]}: the file is damaged.")


def load(directory) -> Results:
  """Read a results directory written by ``attndyn run``.

  Args:
    directory: the ``--out`` directory of a finished run.

  Returns:
    A :class:`Results` with named axes (see the module docstring).

  Raises:
    ConfigError: the directory or one of its files is missing, truncated,
      corrupt, of a newer schema version, inconsistent with the other, from
      another run than the other (:func:`check_one_run`), or holding a config that is not
      its run id's (:func:`check_config`).
  """
  directory = Path(directory)
  if not directory.is_dir():
    raise ConfigError(f"results directory {str(directory)!r} does not exist (or is not a "
                      f"directory).")
  summary = read_summary(directory / SUMMARY)
  check_one_run(directory)
  check_config(directory / SUMMARY, summary)
  arrays = npz.read(directory / TRAJECTORIES, what=repr(str(directory / TRAJECTORIES)))
  _check_arrays(directory / TRAJECTORIES, summary, arrays)
  return from_arrays(directory, summary, arrays)


def to_arrays(result) -> dict:
  """A run's result as flat ``name -> array`` (trajectories.npz's layout, which
  :func:`from_arrays` reads): ``gd/score``, ``reduced/t``, ``points/seed``, ...

  ``result``: anything with ``points`` (the sweep points' dicts), ``gd`` and ``odes`` (kind ->
  :class:`Trajectory`), as :class:`attndyn.pipeline.RunResult`. Every array has the sweep axis
  ``P`` first. Per trajectory kind: ``t`` ``[P, T]``, ``failed_at`` ``[P]``, each recorded
  observable ``[P, T, ...]`` and, from the final parameters, ``final_word_score`` and
  ``final_word_emb_norm`` ``[P, V]`` (every word of the vocabulary).
  """
  import jax

  from attndyn.analysis.observables import embedding_norms
  from attndyn.models.lu import word_scores
  arrays = {f"points/{name}": np.asarray([p[name] for p in result.points])
            for name in result.points[0]}
  kinds = {"gd": result.gd, **result.odes}
  for kind, traj in kinds.items():
    arrays[f"{kind}/t"] = np.asarray(traj.t)
    arrays[f"{kind}/failed_at"] = np.asarray(traj.failed_at)
    for name, value in traj.observables.items():
      arrays[f"{kind}/{name}"] = np.asarray(value)
    final = traj.final_params
    arrays[f"{kind}/final_word_score"] = np.asarray(jax.vmap(word_scores)(final))
    arrays[f"{kind}/final_word_emb_norm"] = np.asarray(jax.vmap(embedding_norms)(final))
  return arrays


def from_arrays(directory: Optional[Path], summary: dict, arrays: Mapping[str, Any]) -> Results:
  """A :class:`Results` from summary.json's document and trajectories.npz's flat arrays
  (``points/seed``, ``gd/score``, ...): what :func:`load` reads, or what ``ad.run`` holds
  in memory (``directory=None``)."""
  points, stages = {}, {}
  for name, value in arrays.items():
    head, _, rest = name.partition("/")
    if head == "points":
      points[rest] = value
    elif rest:
      value = np.asarray(value)
      stages.setdefault(head, {})[rest] = Named(value, dims_of(rest, value.ndim))
  return Results(directory, summary, points, stages)
