"""``import attndyn as ad``: one namespace for Python users, with the paper's settings."""
import importlib
import subprocess
import sys

import pytest

import analysis
import attndyn as ad
import dynamics
import models
import tasks


def test_import_attndyn_loads_packages_on_first_use():
  """``import attndyn`` loads no JAX (the CLI starts fast); ``ad.<package>`` is the package;
  ``analysis.figures`` (the README's usage) is reached from ``import analysis`` alone."""
  code = "import sys, attndyn\nassert 'jax' not in sys.modules and 'models' not in sys.modules"
  subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
  assert (ad.tasks, ad.models, ad.dynamics, ad.analysis) == (tasks, models, dynamics, analysis)
  assert ad.presets.paper_config is ad.paper_config
  assert analysis.__getattr__("figures") is importlib.import_module("analysis.figures")
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
