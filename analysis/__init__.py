"""Theory quantities, metrics and figures.

The functions below are imported with the package; every other submodule
(``analysis.figures`` and the other plotting modules, ...) is imported on first
attribute access, so ``import analysis; analysis.figures...`` works.
"""
import importlib as _importlib
import importlib.util as _importlib_util

from attndyn.analysis.absence import recall_without_topic_word as recall_without_topic_word
from attndyn.analysis.theorem1 import invariant as invariant
from attndyn.analysis.theorem1 import invariant_drift as invariant_drift
from attndyn.analysis.theorem1 import nontopic_context as nontopic_context
from attndyn.analysis.observables import embedding_norms as embedding_norms
from attndyn.analysis.observables import topic_observables as topic_observables
from attndyn.analysis.sen import sen_norm as sen_norm
from attndyn.analysis.sen import sen_relative_error as sen_relative_error
from attndyn.analysis.closed_form import closed_form_updates as closed_form_updates
from attndyn.analysis.closed_form import context_gradients as context_gradients
from attndyn.analysis.deviation import deviation_curve as deviation_curve
from attndyn.analysis.deviation import final_abs_deviation as final_abs_deviation
from attndyn.analysis.deviation import max_abs_deviation as max_abs_deviation
from attndyn.analysis.lemma1 import equivalent_keys as equivalent_keys
from attndyn.analysis.summary import aggregate as aggregate
from attndyn.analysis.results import Named as Named
from attndyn.analysis.results import Results as Results
from attndyn.analysis.results import load as load
from attndyn.analysis.summary import run_summaries as run_summaries
from attndyn.analysis.purity import AttendedPurityStats as AttendedPurityStats
from attndyn.analysis.purity import attended_purity_stats as attended_purity_stats
from attndyn.analysis.purity import attended_words as attended_words
from attndyn.analysis.purity import occurrence_counts as occurrence_counts
from attndyn.analysis.purity import purity_record as purity_record
from attndyn.analysis.purity import topic_purity as topic_purity
from attndyn.analysis.divergences import jsd as jsd
from attndyn.analysis.divergences import kl as kl
from attndyn.analysis.divergences import tvd as tvd
from attndyn.analysis.sgd_noise import loglog_slope as loglog_slope
from attndyn.analysis.sgd_noise import takeoff_times as takeoff_times
from attndyn.analysis.conlleval import chunk_f1 as chunk_f1

from attndyn.tasks.errors import ConfigError as ConfigError

__all__ = ["ConfigError", "recall_without_topic_word", "invariant", "invariant_drift",
           "nontopic_context", "embedding_norms", "topic_observables", "sen_norm",
           "sen_relative_error", "closed_form_updates", "context_gradients", "deviation_curve",
           "final_abs_deviation", "max_abs_deviation", "equivalent_keys", "aggregate", "Named",
           "Results", "load", "run_summaries", "AttendedPurityStats", "attended_purity_stats",
           "attended_words", "occurrence_counts", "purity_record", "topic_purity", "jsd", "kl",
           "tvd", "loglog_slope", "takeoff_times", "chunk_f1"]


def __getattr__(name: str):
  """Import the submodule ``analysis.<name>`` on first use."""
  if not name.startswith("_") and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
    return _importlib.import_module(f"{__name__}.{name}")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  """The functions above and every submodule (``figures``, ``results``, ...), imported or not."""
  import pkgutil
  return sorted(set(__all__) | {m.name for m in pkgutil.iter_modules(__path__)
                                if not m.name.startswith("_")})
