"""The settings tables shared by the experiments on CoNLL-2000 (Yang's, the structured
attention): the data read and the tagger, and the two made from them.

Evaluating a tagger (predictions, divergences, conlleval scores) is
:mod:`analysis.tagger_scores`; training one, :func:`dynamics.epochs.make_tagger_train`.
"""
import dataclasses
from typing import Literal, Optional

import numpy as np

from attndyn import schema
from attndyn import settings
from attndyn.models import transformer_tagger as tt
from attndyn.tasks import conll2000

__all__ = ["Data", "Tagger", "load_data", "tagger_config", "seeds"]

_DATA = {}


@dataclasses.dataclass(frozen=True)
class Data:
  """Which CoNLL-2000 sentences are read (:func:`tasks.conll2000.load_conll2000`): the
  ``data`` table of the experiments on CoNLL-2000.

  Attributes:
    min_count: a training word enters the vocabulary if seen this often (lowercased).
    limit: read only the first this many sentences of train.txt (``None``: all).
    test_limit: read only the first this many sentences of test.txt (``None``: all).
  """
  min_count: settings.Count
  limit: Optional[settings.Index]
  test_limit: Optional[settings.Index]


@dataclasses.dataclass(frozen=True)
class Tagger:
  """The transformer tagger (:class:`models.transformer_tagger.TaggerConfig`): the ``model``
  table of the experiments on CoNLL-2000.

  Attributes:
    d_model: the width of embeddings and attention.
    n_heads: attention heads.
    d_ff: the feed-forward width of the full block.
    features: the input: words, or words and their POS tags.
    block: ``paper`` (Yang's text: the tags are read from the attention output alone) or
      ``full`` (Vaswani's post-LN encoder block).
    dropout: the dropout rate while training.
  """
  d_model: settings.Count
  n_heads: settings.Count
  d_ff: settings.Count
  features: Literal[tt.FEATURES]
  block: Literal[tt.BLOCKS]
  dropout: settings.Number


def _table(t) -> dict:
  """A settings table (a frozen dataclass of settings, or a mapping) as a dict."""
  return settings.as_json(t) if dataclasses.is_dataclass(t) else dict(t)


def load_data(d, *, path: str = "data") -> conll2000.ConllData:
  """CoNLL-2000 with the settings ``d`` (``limit``, ``test_limit``, ``min_count``: a settings
  table or a mapping), loaded once per process; ``path``: the settings table ``d`` came
  from, named by a bad value's error."""
  d = _table(d)
  key = tuple(sorted(d.items()))
  if key not in _DATA:
    with schema.at(path):
      _DATA[key] = conll2000.load_conll2000(**d)
  return _DATA[key]


def tagger_config(data: conll2000.ConllData, model, *, path: str = "model",
                  **extra) -> tt.TaggerConfig:
  """The tagger for ``data``'s vocabularies and ``model`` (a settings table or a mapping of
  :class:`TaggerConfig` fields); ``path``: the settings table ``model`` came from, named by a
  bad value's error."""
  with schema.at(path):
    return tt.TaggerConfig(n_words=len(data.vocab), n_pos=len(data.pos_vocab),
                           n_tags=len(data.tags), **{**_table(model), **extra})


def seeds(n: int) -> np.ndarray:
  return np.arange(int(n), dtype=np.uint32)
