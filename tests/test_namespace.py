"""``import attndyn as ad``: one namespace for Python users, with the paper's settings."""
import importlib
import subprocess
import sys

import pytest

from attndyn import analysis
import attndyn as ad
from attndyn import dynamics
from attndyn import models
from attndyn import tasks


def test_import_attndyn_loads_packages_on_first_use():
  """``import attndyn`` loads no JAX (the CLI starts fast); ``ad.<package>`` is the package;
  ``analysis.figures`` (the README's usage) is reached from ``from attndyn import analysis`` alone."""
  code = "import sys, attndyn\nassert 'jax' not in sys.modules and 'attndyn.models' not in sys.modules"
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
  assert (ad.tasks, ad.models, ad.dynamics, ad.analysis) == (tasks, models, dynamics, analysis)
  assert ad.presets.paper_config is ad.paper_config
  assert analysis.__getattr__("figures") is importlib.import_module("attndyn.analysis.figures")
  assert callable(analysis.figures.sen_figure)
  with pytest.raises(AttributeError, match="no attribute 'modles'"):
    ad.modles
  with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
    ad.analysis.nonexistent


def test_no_export_hides_a_submodule():
  """``import dynamics.ode as m`` must give the module: a package attribute named like one of
  its submodules (the function ``gradient_flow`` re-exported over ``dynamics/gradient_flow.py``)
  made ``import dynamics.gradient_flow as m`` return the function."""
  import pkgutil
  hidden = []
  for package in (tasks, models, dynamics, analysis, ad):
    for info in pkgutil.iter_modules(package.__path__):
      module = importlib.import_module(f"{package.__name__}.{info.name}")
      if getattr(package, info.name) is not module:
        hidden.append(f"{package.__name__}.{info.name}")
  assert not hidden, hidden


def test_paper_config_gives_typed_paper_settings():
  """The text preset as typed configs: the paper's unit query (not the class default
  ‖q‖ ≈ √15), n_words and n_classes taken from the task, overrides validated."""
  cfg = ad.paper_config("lu2021-text-tc")
  assert isinstance(cfg.task, tasks.TopicTaskConfig)
  assert isinstance(cfg.model, models.LuModelConfig)
  assert isinstance(cfg.train, dynamics.TrainConfig)
  assert (cfg.model.query_norm, cfg.model.embed_std, cfg.model.embed_dim) == (1.0, 1e-3, 15)
  assert models.LuModelConfig(n_words=2, n_classes=2).query_norm is None   # what it replaces
  assert (cfg.model.n_words, cfg.model.n_classes) == (cfg.task.n_words, cfg.task.n_topics) \
      == (5008, 4)
  assert (cfg.train.lr, cfg.train.steps, cfg.ode.rtol) == (0.1, 5000, 1e-6)
  small = ad.paper_config("lu2021-text-fc", task={"vocab_size": 100}, precision="float64")
  assert (small.model.n_words, small.model.classifier, small.precision) == (108, "fc", "float64")
  with pytest.raises(tasks.ConfigError, match="steps"):
    ad.paper_config("quick", train={"steps": 7})
  with pytest.raises(tasks.ConfigError, match="lu2021-text-tc"):
    ad.paper_config("lu2021-txt-tc")


def _public_modules():
  import pkgutil
  for package in (tasks, models, dynamics, analysis, importlib.import_module("attndyn")):
    yield package
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
      if not any(part.startswith("_") for part in info.name.split(".")):
        yield importlib.import_module(info.name)


def test_every_public_module_declares_all_and_has_what_it_declares():
  missing, absent = [], []
  for module in _public_modules():
    names = getattr(module, "__all__", None)
    if names is None:
      missing.append(module.__name__)
      continue
    absent += [f"{module.__name__}.{n}" for n in names if not hasattr(module, n)]
  assert not missing and not absent, (missing, absent)


def test_one_config_error_and_no_imports_on_show():
  """One ConfigError class, reachable from every package; ``dir`` of ``ad``, ``ad.config`` and
  ``ad.dynamics`` shows their own names (not importlib, np, math, ...; no module beside the
  functions in ``ad.dynamics``), and ``dir(ad.analysis)`` shows its lazily imported modules."""
  from attndyn import config
  from attndyn.tasks.errors import ConfigError
  assert all(m.ConfigError is ConfigError for m in (ad, tasks, models, dynamics, analysis, config))
  assert "importlib" not in dir(ad) and {"run", "ConfigError", "paper_config"} <= set(dir(ad))
  imported = {"np", "math", "itertools", "dataclasses", "tomllib", "Optional", "Path", "schema"}
  assert not imported & set(dir(config)), imported & set(dir(config))
  modules = [n for n in dir(dynamics) if isinstance(getattr(dynamics, n), type(importlib))]
  assert not modules, modules
  assert "figures" in dir(analysis) and "load" in dir(analysis)
