"""One run of attndyn as a frozen, validated dataclass, read from TOML and written to JSON.

A run is the topic task, the Lu model, how to train it, which sweep of seeds
and hyperparameters to vmap over, which ODEs to compare with, and the float
precision. ``RunConfig.from_dict`` takes the TOML shape (sections ``[task]``,
``[model]``, ``[train]``, ``[sweep]``, ``[ode]`` and a top-level ``precision``)
and ``to_dict`` gives it back, exactly: ``from_dict(c.to_dict()) == c``.
"""
import dataclasses
import itertools
import math
import tomllib
from pathlib import Path
from typing import Optional

import numpy as np

from attndyn import schema
from attndyn.dynamics.strategy import fast_path_for_sweep
from attndyn.dynamics.ode import ATOL, RTOL, SOLVERS
from attndyn.dynamics.optimizers import optimizer_name
from attndyn.dynamics.reduced_ode import FORMS, check_reduced_config
from attndyn.dynamics.train import TrainConfig
from attndyn.models.lu import LuModelConfig
from attndyn.settings import as_json
from attndyn.tasks.errors import ConfigError, check, digits_error, too_many_digits
from attndyn.tasks.topic import TopicTaskConfig

__all__ = ["ConfigError", "TASK_KINDS", "PRECISIONS", "GD_PATHS", "ODE_KINDS", "GRID_FIELDS",
           "MAX_POINTS", "SweepConfig", "ODEConfig", "RunConfig", "read_toml", "load"]

TASK_KINDS = ("topic",)
PRECISIONS = ("float32", "float64")
GD_PATHS = ("auto", "generic", "fast")
ODE_KINDS = ("none", "reduced", "extended", "gradient_flow", "both", "reduced_extended", "all")
# The ODEs each kind solves (analysis.results reads the same table back from summary.json).
ODE_STAGES = {"none": (), "both": ("reduced", "gradient_flow"),
              "reduced_extended": ("reduced", "extended"),
              "all": ("reduced", "extended", "gradient_flow")}
# Continuous hyperparameters a sweep may vmap over (dotted TOML names).
GRID_FIELDS = ("train.lr", "model.embed_std", "model.key_std", "model.query_std",
               "model.query_norm")
MAX_POINTS = 1_000_000


@dataclasses.dataclass(frozen=True)
class SweepConfig:
  """Which runs to vmap over: every combination of data seed, grid point and init seed.

  Attributes:
    seeds: init seeds: an integer ``n`` means ``0..n-1``, or a list of distinct
      integers; run ``i`` initialises from ``jax.random.PRNGKey(seed)``.
    data_seeds: dataset seeds, in the same form; the dataset is
      ``tasks.make_topic_dataset(jax.random.PRNGKey(data_seed), task)``.
    grid: continuous hyperparameters to sweep, as a Cartesian product: in TOML
      a table of field name → list of values, e.g.
      ``grid = {"train.lr" = [0.05, 0.1], "model.embed_std" = [1e-3, 0.3]}``
      (in Python ``((field, values), ...)``), fields from :data:`GRID_FIELDS`.
    chunk_size: sweep points per compiled call; unset picks one from a memory
      estimate (everything at once when it fits). The estimate depends on the
      config and the machine's memory limits, never on the memory free at the
      time, and a checkpointed run records it for ``--resume``.
    checkpoint_every: write the finished chunks to ``DIR/checkpoints`` after
      every this many chunks (``attndyn run --resume`` continues from them);
      0 writes no checkpoints, so no ``--resume``.
  """
  seeds: tuple = (0,)
  data_seeds: tuple = (0,)
  grid: tuple = ()
  chunk_size: Optional[int] = None
  checkpoint_every: int = 1

  def __post_init__(self):
    for name in ("seeds", "data_seeds"):
      value = getattr(self, name)
      check(isinstance(value, tuple), f"sweep.{name}", value, "a tuple of distinct integers >= 0")
      schema.coerce(f"sweep.{name}", value, "seeds")
    grid = schema.coerce("sweep.grid", self.grid, "grid", GRID_FIELDS)
    check(grid == self.grid, "sweep.grid", self.grid,
          "a tuple of (field name, tuple of floats) pairs")
    if self.chunk_size is not None:
      check(schema.is_int(self.chunk_size) and self.chunk_size >= 1, "sweep.chunk_size",
            self.chunk_size, "a positive integer, or unset for automatic chunking")
    check(schema.is_int(self.checkpoint_every) and self.checkpoint_every >= 0,
          "sweep.checkpoint_every", self.checkpoint_every,
          "an integer >= 0: checkpoint after every N chunks, 0 for never")
    check(self.n_points <= MAX_POINTS, "sweep points (data_seeds × grid × seeds)",
          self.n_points, f"at most {MAX_POINTS} in one run")

  @property
  def n_points(self) -> int:
    """P = len(data_seeds) * prod(len(values) for the grid) * len(seeds)."""
    return len(self.data_seeds) * math.prod(len(v) for _, v in self.grid) * len(self.seeds)

  def points(self) -> list:
    """The P sweep points in order (data seed outermost, init seed innermost).

    Returns:
      ``[{"seed": int, "data_seed": int, <grid field>: float, ...}, ...]``.
    """
    names = [name for name, _ in self.grid]
    out = []
    for data_seed, values, seed in itertools.product(
        self.data_seeds, itertools.product(*(v for _, v in self.grid)), self.seeds):
      out.append({"seed": seed, "data_seed": data_seed, **dict(zip(names, values))})
    return out


@dataclasses.dataclass(frozen=True)
class ODEConfig:
  """Which continuous-time dynamics to solve next to gradient descent, and how.

  Attributes:
    kind: ``none``, ``reduced`` (Lemma 2, :func:`dynamics.reduced_sen_ode`:
      only the topic words move; softmax attention and a fixed query only),
      ``extended`` (Lemma 2 plus the non-topic words' collective push,
      ``dynamics.reduced_sen_ode(extended=True)``, docs/extended_reduced_dynamics.md; the
      same conditions), ``gradient_flow`` (the full model, :func:`dynamics.gradient_flow`),
      ``both`` (reduced and gradient_flow), ``reduced_extended`` (the two reduced ODEs) or
      ``all`` (the three). ODEs need ``train.optimizer = "gd"``: they are its continuous limit.
    form: the reduced ODE's form: ``lemma2`` (eqs 7-8, which conserve Theorem
      1's Q exactly) or ``exact`` (eqs 5-6, which honour frozen embeddings or keys).
    solver: diffrax solver name.
    rtol: relative tolerance of the adaptive step-size controller, > 0. It holds
      for every run: with one data seed and FC or TC, each chunk's reduced ODEs
      (below 200 points per call) are solved as one system whose shared step is
      accepted only if every run's own error passes; otherwise, and for TL, each
      run is solved with its own steps.
    atol: absolute tolerance of the adaptive step-size controller, > 0.
    max_steps: most solver steps per run (per chunk where the reduced ODEs are
      solved as one system) before it is reported as failed.
    dtmin: smallest solver step, accepted whatever its error estimate (unset:
      none). TL's ReLU makes the vector field discontinuous; where the flow
      slides along a kink the adaptive controller stalls, and a floor lets it
      step through as GD does (see :func:`dynamics.gradient_flow`).
  """
  kind: str = "none"
  form: str = "lemma2"
  solver: str = "tsit5"
  rtol: float = RTOL
  atol: float = ATOL
  max_steps: int = 100_000
  dtmin: Optional[float] = None

  def __post_init__(self):
    check(self.kind in ODE_KINDS, "ode.kind", self.kind, f"one of {', '.join(ODE_KINDS)}")
    check(self.form in FORMS, "ode.form", self.form, f"one of {', '.join(FORMS)}")
    check(self.solver in SOLVERS, "ode.solver", self.solver, f"one of {', '.join(SOLVERS)}")
    for name in ("rtol", "atol"):
      value = getattr(self, name)
      check(schema.is_number(value) and 0 < value < float("inf"), f"ode.{name}", value,
            "a finite number > 0")
    check(schema.is_int(self.max_steps) and self.max_steps >= 1, "ode.max_steps",
          self.max_steps, "a positive integer")
    check(self.dtmin is None or (schema.is_number(self.dtmin) and 0 < self.dtmin < float("inf")),
          "ode.dtmin", self.dtmin, "a finite number > 0, or unset")

  @property
  def kinds(self) -> tuple:
    """The ODEs to solve: a subset of ``("reduced", "extended", "gradient_flow")``."""
    return ODE_STAGES.get(self.kind, (self.kind,))


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """Everything one ``attndyn run`` needs.

  Attributes:
    task: the synthetic topic task.
    model: the Lu attention model; ``n_words`` and ``n_classes`` follow the task.
    train: how gradient descent (or another optimiser) trains it.
    sweep: the seeds and hyperparameters vmapped over.
    ode: the continuous-time dynamics compared with it.
    precision: ``float32`` or ``float64``: the dtype of parameters, observables
      and time. Every number of the config must fit it (at most 3.4e38 in size
      for float32).
    gd_path: how gradient descent is computed: ``auto`` (the exact fast path
      of :mod:`dynamics.fast_lu` wherever it applies — softmax attention with a
      fixed query or a trained one from zero keys, or sparsemax attention with a
      fixed query; full-batch GD, one dataset shared by all seeds — autodiff
      elsewhere), ``generic`` (always autodiff) or ``fast`` (the fast path, an
      error where it does not apply). Both paths give the same trajectory to
      float rounding (``tests/test_fast_path.py``); ``run_info.json`` records
      which one ran and why.
  """
  task: TopicTaskConfig
  model: LuModelConfig
  train: TrainConfig
  sweep: SweepConfig = SweepConfig()
  ode: ODEConfig = ODEConfig()
  precision: str = "float32"
  gd_path: str = "auto"

  def __post_init__(self):
    check(self.precision in PRECISIONS, "precision", self.precision,
          f"one of {', '.join(PRECISIONS)}")
    check(self.gd_path in GD_PATHS, "gd_path", self.gd_path, f"one of {', '.join(GD_PATHS)}")
    check(isinstance(self.train.optimizer, str), "train.optimizer",
          optimizer_name(self.train.optimizer),
          "a name in a run's config (TOML); an optax transformation trains through "
          "dynamics.make_train / make_auto_train")
    check(self.model.n_words == self.task.n_words, "model.n_words", self.model.n_words,
          f"the task's vocabulary size {self.task.n_words}")
    check(self.model.n_classes == self.task.n_topics, "model.n_classes", self.model.n_classes,
          f"the task's n_topics = {self.task.n_topics}")
    t = self.task.n_topic_words
    check(self.task.n_train >= t, "task.n_train", self.task.n_train,
          f"at least n_topics*words_per_topic = {t}, so every topic word can occur")
    if self.train.batch_size:
      check(self.train.batch_size <= self.task.n_train, "train.batch_size",
            self.train.batch_size, f"at most task.n_train = {self.task.n_train}")
    self._check_grid()
    self._check_flow_time()
    self._check_ode()
    self._check_range()
    if self.gd_path == "fast":
      verdict = fast_path_for_sweep(self.model, self.train, self.sweep.grid,
                                    len(self.sweep.data_seeds))
      check(bool(verdict), "gd_path", self.gd_path,
            f'"auto" or "generic" here: the fast path does not apply ({verdict.reason})')

  def _check_grid(self):
    for name, values in self.sweep.grid:
      section, key = name.split(".")
      for value in values:
        try:
          dataclasses.replace(getattr(self, section), **{key: value})
        except ConfigError as err:
          raise ConfigError(f'sweep.grid["{name}"] holds {value!r}: {err}') from None

  def _check_flow_time(self):
    """With ``train.flow_time``, ``train.steps`` holds the run of the sweep's smallest lr."""
    if self.train.flow_time is None:
      return
    grid = dict(self.sweep.grid)
    lrs = grid.get("train.lr", (self.train.lr,))
    lr = min(lrs)
    need = self.train.run_steps(lr)
    check(need <= self.train.steps, "train.steps", self.train.steps,
          f"at least {need} = train.flow_time / lr = {self.train.flow_time:g} / {lr:g} (the "
          f"{'sweep' if 'train.lr' in grid else 'run'}'s smallest lr), rounded up to a multiple "
          f"of train.record_every")

  def _check_range(self):
    """Every number fits the run's precision (1e308 becomes inf in float32, silently)."""
    largest = float(np.finfo(self.precision).max)
    values = [(f"{section}.{field.name}", getattr(getattr(self, section), field.name))
              for section in ("task", "model", "train", "sweep", "ode")
              for field in dataclasses.fields(getattr(self, section))]
    values += [(f'sweep.grid["{name}"]', v) for name, grid in self.sweep.grid for v in grid]
    for name, value in values:
      if isinstance(value, float) and abs(value) > largest:
        hint = '; use precision = "float64"' if self.precision == "float32" else ""
        raise ConfigError(f"{name} = {value!r} is not allowed with precision = "
                          f'"{self.precision}": at most {largest:.4g} in size (the largest '
                          f"{self.precision}){hint}.")

  def _check_ode(self):
    if not self.ode.kinds:
      return
    check(self.train.optimizer == "gd", "ode.kind", self.ode.kind,
          f'"none" when train.optimizer = "{self.train.optimizer}" (the ODEs are the '
          f'continuous limit of full-batch gradient descent, train.optimizer = "gd")')
    if {"reduced", "extended"} & set(self.ode.kinds):
      check(self.model.normaliser == "softmax", "model.normaliser", self.model.normaliser,
            f'"softmax" with ode.kind = "{self.ode.kind}": Lemma 2\'s reduced ODE (eqs 7-8) is '
            f'derived for softmax attention; use ode.kind = "gradient_flow" or "none" '
            f'(the sparsemax ODE: `attndyn reproduce flavours`)')
      if self.model.train_query:
        raise ConfigError(f'ode.kind = "{self.ode.kind}" (reduced ODE): the reduced SEN ODE '
                          f"needs a fixed query (Lemma 1; every score moves when q trains): set "
                          f'model.train_query = false, or use ode.kind = "gradient_flow".')
      try:
        check_reduced_config(self.ode.form, self.model.trainable())
      except ConfigError as err:
        raise ConfigError(f'ode.kind = "{self.ode.kind}" (reduced ODE): {err}') from None

  def to_dict(self) -> dict:
    """The TOML-shaped dict (lists for tuples, ``None`` for unset); JSON-serialisable."""
    doc = as_json(self)
    del doc["model"]["n_words"], doc["model"]["n_classes"]
    doc["sweep"]["grid"] = dict(doc["sweep"]["grid"])    # the TOML form: a table
    return {"precision": self.precision, "gd_path": self.gd_path,
            "task": {"kind": "topic", **doc["task"]},
            **{section: doc[section] for section in ("model", "train", "sweep", "ode")}}

  @classmethod
  def from_dict(cls, raw: dict) -> "RunConfig":
    """Build and validate a config from the TOML shape (missing keys take defaults).

    Raises:
      ConfigError: an unknown section or key, a wrong type or a bad value.
    """
    check(isinstance(raw, dict), "config", raw, "a table of sections")
    allowed = list(schema.SECTIONS) + list(schema.TOP_LEVEL)
    for key in raw:
      if key not in allowed:
        if key in schema.SECTIONS or isinstance(raw[key], dict):
          raise ConfigError(f'unknown section [{key}].{schema.suggest(key, schema.SECTIONS)} '
                            f"Allowed sections: {', '.join(schema.SECTIONS)}.")
        raise schema.unknown_key(key, allowed)
    sections = {}
    for section, kinds in schema.SECTIONS.items():
      table = raw.get(section, {})
      schema.check_section(section, table)
      sections[section] = {k: schema.coerce(f"{section}.{k}", v, kinds[k], GRID_FIELDS)
                           for k, v in table.items()}
    kind = sections["task"].pop("kind", "topic")
    check(kind in TASK_KINDS, "task.kind", kind, f"one of {', '.join(TASK_KINDS)}")
    top = {key: schema.coerce(key, raw[key], kind) for key, kind in schema.TOP_LEVEL.items()
           if key in raw}   # a key left out takes RunConfig's default
    with schema.at("task"):
      task = TopicTaskConfig(**sections["task"])
    with schema.at("model"):
      model = LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, **sections["model"])
    with schema.at("train"):
      train = TrainConfig(**sections["train"])
    return cls(task=task, model=model, train=train, sweep=SweepConfig(**sections["sweep"]),
               ode=ODEConfig(**sections["ode"]), **top)


def read_toml(path) -> dict:
  """The raw dict of a TOML file.

  Raises:
    ConfigError: the file is missing, unreadable or not valid TOML.
  """
  path = Path(path)
  what = f"config file {str(path)!r}"
  if not path.is_file():
    raise ConfigError(f"{what} does not exist (or is not a file).")
  try:
    data = path.read_bytes()
  except OSError as err:
    raise ConfigError(f"{what} cannot be read: {err.strerror or err}.") from None
  if not data.strip():
    raise ConfigError(f"{what} is empty: write at least one [section] (see `attndyn presets "
                      f"--show quick`), or use --preset NAME.")
  data = data.removeprefix(b"\xef\xbb\xbf")     # a UTF-8 byte-order mark some editors write
  try:
    return tomllib.loads(data.decode("utf-8"))
  except UnicodeDecodeError as err:
    line = data[:err.start].count(b"\n") + 1
    raise ConfigError(f"{what} line {line} is not UTF-8 text (byte {data[err.start]:#04x}): "
                      f"TOML files are UTF-8.") from None
  except tomllib.TOMLDecodeError as err:
    raise ConfigError(f"{what} is not valid TOML: {err}.") from None
  except ValueError as err:
    if too_many_digits(err):
      raise digits_error(what) from None
    raise


def load(path) -> RunConfig:
  """Read and validate a TOML config file."""
  return RunConfig.from_dict(read_toml(path))


def __dir__():
  # The config's names only: not the modules and helpers imported above (np, math, ...).
  return sorted(__all__)
