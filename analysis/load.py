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
import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from analysis import npz
from analysis.summary import aggregate
from dynamics.trajectory import Trajectory
from tasks.errors import ConfigError

# The layout of summary.json: 2 moved the run-dependent `created`, `command` and
# `seconds` to run_info.json and added `diverged` per run and `n_diverged`.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SUMMARY, TRAJECTORIES = "summary.json", "trajectories.npz"
KINDS = ("gd", "reduced", "gradient_flow")
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
  """
  directory: Path
  summary: dict
  points: dict
  stages: dict

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
    return Results(self.directory, summary, {n: v[idx] for n, v in self.points.items()}, stages)


def _line_of(data: bytes, offset: int) -> int:
  return data[:offset].count(b"\n") + 1


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
  data = path.read_bytes()
  try:
    doc = json.loads(data.decode("utf-8"))
  except UnicodeDecodeError as err:
    raise ConfigError(f"{what} line {_line_of(data, err.start)} is not UTF-8 text "
                      f"({err.reason}).") from None
  except json.JSONDecodeError as err:
    raise ConfigError(f"{what} line {err.lineno} column {err.colno} is not valid JSON "
                      f"({err.msg}): the file is truncated or was edited.") from None
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


def load(directory) -> Results:
  """Read a results directory written by ``attndyn run``.

  Args:
    directory: the ``--out`` directory of a finished run.

  Returns:
    A :class:`Results` with named axes (see the module docstring).

  Raises:
    ConfigError: the directory or one of its files is missing, truncated,
      corrupt, of a newer schema version, or inconsistent with the other.
  """
  directory = Path(directory)
  if not directory.is_dir():
    raise ConfigError(f"results directory {str(directory)!r} does not exist (or is not a "
                      f"directory).")
  summary = read_summary(directory / SUMMARY)
  arrays = npz.read(directory / TRAJECTORIES, what=repr(str(directory / TRAJECTORIES)))
  n_runs = len(summary["runs"])
  points, stages = {}, {}
  for name, value in arrays.items():
    head, _, rest = name.partition("/")
    if value.ndim == 0 or value.shape[0] != n_runs:
      raise ConfigError(f"{str(directory / TRAJECTORIES)!r}: array {name!r} has shape "
                        f"{value.shape}, but summary.json has {n_runs} runs: the two files are "
                        f"from different runs.")
    if head == "points":
      points[rest] = value
    elif rest:
      stages.setdefault(head, {})[rest] = Named(value, dims_of(rest, value.ndim))
  for kind in ["gd"] + sorted(set(stages) - {"gd"}):
    if not {"t", "failed_at"} <= set(stages.get(kind, {})):
      raise ConfigError(f"{str(directory / TRAJECTORIES)!r} has no {kind}/t and {kind}/failed_at "
                        f"arrays: not an attndyn trajectories file, or a damaged one.")
  return Results(directory, summary, points, stages)
