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
  ad.reproduce("lu2021", quick=True, out=DIR)   # a paper's experiments as jobs -> Reproduction
  ad.atlas(quick=True, out=DIR)   # the theory-validity atlas -> AtlasResult (ad.atlas.* its parts)
  ad.compile_cache  # ad.compile_cache.enable(): the commands' on-disk compile cache, for a script

The packages are installed only inside attndyn (``import attndyn.dynamics``
or ``from attndyn import dynamics``): nothing of the same name in the
working directory can stand in for them.
"""
import importlib as _importlib

# Library packages and attndyn submodules reachable as attributes, each imported on first use.
_PACKAGES = ("tasks", "models", "dynamics", "analysis")
_SUBMODULES = ("presets", "config", "atlas", "reproduce", "compile_cache")
# name -> (module, attribute): functions and classes reachable as ad.NAME.
_ATTRIBUTES = {"paper_config": ("attndyn.presets", "paper_config"),
               "run": ("attndyn.api", "run"),
               "ConfigError": ("attndyn.tasks.errors", "ConfigError")}

__all__ = [*_PACKAGES, *_SUBMODULES, *_ATTRIBUTES]


# From a source tree (a checkout, or an editable install), the four library packages are the
# folders beside this one: attndyn.models is <root>/models. Only those names are looked up
# there (a finder on attndyn's own path), never in the working directory.
def _source_tree_packages():
  import importlib.abc
  import importlib.util
  import os
  import sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  here = os.path.dirname(os.path.abspath(__file__))
  if os.path.isdir(os.path.join(here, "models")) or not all(
      os.path.isfile(os.path.join(root, p, "__init__.py")) for p in _PACKAGES):
    return   # installed as a wheel: attndyn/models is inside attndyn

  class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
      parts = fullname.split(".")
      if len(parts) < 2 or parts[0] != __name__ or parts[1] not in _PACKAGES:
        return None
      location = os.path.join(root, *parts[1:])
      if os.path.isdir(location):
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(location, "__init__.py"),
            submodule_search_locations=[location])
      if os.path.isfile(location + ".py"):
        return importlib.util.spec_from_file_location(fullname, location + ".py")
      return None

  if not any(type(f).__name__ == "_Finder" and getattr(f, "root", None) == root
             for f in sys.meta_path):
    finder = _Finder()
    finder.root = root
    sys.meta_path.insert(0, finder)


_source_tree_packages()


class _Study(type(_importlib)):
  """A study's module that is also its entry: ``ad.atlas(out=...)`` calls
  :func:`attndyn.api.atlas`, and ``ad.atlas.buckets`` is still the module's (``reproduce``
  likewise)."""

  def __call__(self, *args, **kwargs):
    api = _importlib.import_module(f"{__name__}.api")
    return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


def _callable(module) -> None:
  """Make ``module`` (attndyn.atlas, attndyn.reproduce) callable as its :class:`_Study`."""
  module.__class__ = _Study


def __getattr__(name: str):
  if name in _PACKAGES:
    value = _importlib.import_module(f"{__name__}.{name}")
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
