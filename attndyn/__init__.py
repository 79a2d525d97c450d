"""attndyn: how attention models learn, as one namespace for Python users and the CLI.

``import attndyn as ad`` gives the library's packages, imported on first use
(so the ``attndyn`` command starts without loading JAX)::

  ad.tasks      # synthetic tasks and datasets (tasks.TopicTaskConfig, make_topic_dataset)
  ad.models     # pure init/apply models (models.LuModelConfig, lu_attention, make_loss)
  ad.dynamics   # training, sweeps and ODEs (make_train, make_auto_train, run_sweep, ...)
  ad.analysis   # theory quantities, metrics and figures
  ad.presets    # the CLI's named settings; ad.paper_config(name) as typed configs
  ad.atlas      # the theory-validity atlas: ad.atlas.run_atlas(out, quick=True)
  ad.compile_cache  # ad.compile_cache.enable(): the commands' on-disk compile cache, for a script

The same packages are importable on their own (``import dynamics``).
"""
import importlib

# Library packages and attndyn submodules reachable as attributes, each imported on first use.
_PACKAGES = ("tasks", "models", "dynamics", "analysis")
_SUBMODULES = ("presets", "config", "atlas", "compile_cache")

__all__ = [*_PACKAGES, *_SUBMODULES, "paper_config"]


def __getattr__(name: str):
  if name in _PACKAGES:
    module = importlib.import_module(name)
  elif name in _SUBMODULES:
    module = importlib.import_module(f"{__name__}.{name}")
  elif name == "paper_config":
    module = importlib.import_module(f"{__name__}.presets").paper_config
  else:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  globals()[name] = module
  return module


def __dir__():
  return sorted(set(globals()) | set(__all__))
