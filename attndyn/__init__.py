"""attndyn: how attention models learn, as one namespace for Python users and the CLI.

``import attndyn as ad`` gives the library's packages, imported on first use
(so the ``attndyn`` command starts without loading JAX)::

  ad.tasks      # synthetic tasks and datasets (tasks.TopicTaskConfig, make_topic_dataset)
  ad.models     # pure init/apply models (models.LuModelConfig, lu_attention, make_loss)
  ad.dynamics   # training, sweeps and ODEs (make_train, make_auto_train, run_sweep, ...)
  ad.analysis   # theory quantities, metrics and figures (ad.analysis.load(DIR))
  ad.presets    # the CLI's named settings; ad.paper_config(name) as typed configs
  ad.run(cfg, ode="reduced")   # one whole `attndyn run` -> the Results ad.analysis.load reads
  ad.ConfigError               # the one error type for bad input (a ValueError)
  ad.atlas      # the theory-validity atlas: ad.atlas.run_atlas(out, quick=True)
  ad.compile_cache  # ad.compile_cache.enable(): the commands' on-disk compile cache, for a script

The same packages are importable on their own (``import dynamics``).
"""
import importlib as _importlib

# Library packages and attndyn submodules reachable as attributes, each imported on first use.
_PACKAGES = ("tasks", "models", "dynamics", "analysis")
_SUBMODULES = ("presets", "config", "atlas", "compile_cache")
# name -> (module, attribute): functions and classes reachable as ad.NAME.
_ATTRIBUTES = {"paper_config": ("attndyn.presets", "paper_config"),
               "run": ("attndyn.api", "run"),
               "ConfigError": ("tasks.errors", "ConfigError")}

__all__ = [*_PACKAGES, *_SUBMODULES, *_ATTRIBUTES]


def __getattr__(name: str):
  if name in _PACKAGES:
    value = _importlib.import_module(name)
  elif name in _SUBMODULES:
    value = _importlib.import_module(f"{__name__}.{name}")
  elif name in _ATTRIBUTES:
    module, attribute = _ATTRIBUTES[name]
    value = getattr(_importlib.import_module(module), attribute)
  else:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(__all__) | {n for n in globals() if n.startswith("__")} |
                {n for n in globals() if not n.startswith("_") and n in __all__})
