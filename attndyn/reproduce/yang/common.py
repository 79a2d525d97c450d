"""Data, model, training and comparison helpers shared by the Yang experiments.

Every compiled function here works on one run; the experiments vmap them over
seeds, λ or probe sources, so a whole sweep is one compiled call.
"""
import dataclasses
from typing import Callable, Literal, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attndyn.analysis import divergences
from attndyn.analysis.conlleval import conlleval_ids
from attndyn import schema
from attndyn import settings
from attndyn.models import transformer_tagger as tt
from attndyn.tasks import conll2000

__all__ = ["MAXLEN", "Data", "Tagger", "load_data", "tagger_config", "predictor", "comparer", "matched_head_jsd",
           "adam", "scores", "f1_per_epoch", "take", "select_epoch", "seeds", "host"]

_DATA = {}
MAXLEN = 128   # longest sentence the host-side scorer pads to (CoNLL-2000: 78)


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


def _chunks(batch, chunk: int):
  """``batch`` padded (mask False) to a multiple of ``chunk`` rows and reshaped ``[n_chunks, chunk, ...]``."""
  n = batch.tokens.shape[0]
  chunk = min(chunk, n)
  n_chunks = -(-n // chunk)
  pad = n_chunks * chunk - n
  padded = jax.tree.map(lambda x: jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]),
                        batch)
  return jax.tree.map(lambda x: x.reshape((n_chunks, chunk) + x.shape[1:]), padded), n


def _maps(maps_fn, source, b):
  return None if maps_fn is None else jax.lax.stop_gradient(maps_fn(source, b))


def predictor(cfg: tt.TaggerConfig, buckets, chunk: int = 256, maps_fn: Callable = None) -> Callable:
  """``predict(params, source=None) -> tuple`` of ``[n_b, L_b]`` int8 argmax tags, one per length bucket.

  Evaluation mode (no dropout), in chunks of ``chunk`` sentences.
  ``maps_fn(source, chunk_batch)`` gives attention maps that replace the
  model's own (the probing classifier); ``None`` uses the model's attention.
  """
  parts = [_chunks(b, chunk) for b in buckets]

  def predict(params, source=None):
    def one(b):
      out = tt.apply(params, b, cfg, attention=_maps(maps_fn, source, b))
      return jnp.argmax(out.logits, -1).astype(jnp.int8)
    outs = []
    for chunks, n in parts:
      out = jax.lax.map(one, chunks)
      outs.append(out.reshape((-1,) + out.shape[2:])[:n])
    return tuple(outs)

  return predict


def comparer(cfg_a: tt.TaggerConfig, cfg_b: tt.TaggerConfig, buckets, chunk: int = 128,
             maps_fn_b: Callable = None) -> Callable:
  """``compare(params_a, params_b, source_b=None) -> dict``: mean divergences between two taggers.

  Means run over the real tokens (queries) of every sentence and every head:
  ``jsd`` (attention rows, head h of a vs head h of b), ``kl_ab`` =
  KL(α_a ‖ α_b), ``kl_ba`` = KL(α_b ‖ α_a), ``tvd`` (output distributions,
  per token), ``jsd_heads [H, H]`` (head i of a vs head j of b, for matching
  heads across independently trained models), ``agree`` (fraction of tokens
  with the same argmax tag). ``maps_fn_b(source_b, chunk)`` replaces b's
  attention (a probe).
  """
  parts = [_chunks(b, chunk)[0] for b in buckets]

  def compare(params_a, params_b, source_b=None):
    def one(b):
      oa = tt.apply(params_a, b, cfg_a)
      ob = tt.apply(params_b, b, cfg_b, attention=_maps(maps_fn_b, source_b, b))
      m = b.mask.astype(oa.logits.dtype)                      # [c, L]
      mh = m[:, None, :]                                        # [c, 1, L] per head and query
      pa, pb = jax.nn.softmax(oa.logits, -1), jax.nn.softmax(ob.logits, -1)
      aa, ab = oa.attention, ob.attention
      cross = divergences.jsd(aa[:, :, None], ab[:, None, :])  # [c, H, H, L]
      return {"jsd": jnp.sum(divergences.jsd(aa, ab) * mh),
              "kl_ab": jnp.sum(divergences.kl(aa, ab) * mh),
              "kl_ba": jnp.sum(divergences.kl(ab, aa) * mh),
              "jsd_heads": jnp.sum(cross * m[:, None, None, :], axis=(0, 3)),
              "tvd": jnp.sum(divergences.tvd(pa, pb) * m),
              "agree": jnp.sum((jnp.argmax(pa, -1) == jnp.argmax(pb, -1)) * m),
              "tokens": jnp.sum(m)}
    per = [jax.tree.map(lambda x: jnp.sum(x, 0), jax.lax.map(one, chunks)) for chunks in parts]
    sums = jax.tree.map(lambda *xs: sum(xs), *per)
    tok, heads = sums["tokens"], cfg_a.n_heads
    return {"jsd": sums["jsd"] / (tok * heads), "kl_ab": sums["kl_ab"] / (tok * heads),
            "kl_ba": sums["kl_ba"] / (tok * heads), "jsd_heads": sums["jsd_heads"] / tok,
            "tvd": sums["tvd"] / tok, "agree": sums["agree"] / tok}

  return compare


def matched_head_jsd(jsd_heads: np.ndarray) -> float:
  """Mean JSD after the best one-to-one matching of heads (all permutations; H ≤ 8)."""
  import itertools
  h = jsd_heads.shape[-1]
  return float(min(np.mean([jsd_heads[i, p[i]] for i in range(h)])
                   for p in itertools.permutations(range(h))))


def adam(lr: float) -> optax.GradientTransformation:
  return optax.adam(lr)


def scores(preds, buckets, tags):
  """conlleval scores of one prediction: a tuple of ``[n_b, L_b]`` arrays, one per bucket."""
  gold = np.concatenate([np.pad(np.asarray(b.labels), ((0, 0), (0, MAXLEN - b.labels.shape[1])))
                         for b in buckets])
  mask = np.concatenate([np.pad(np.asarray(b.mask), ((0, 0), (0, MAXLEN - b.mask.shape[1])))
                         for b in buckets])
  guess = np.concatenate([np.pad(np.asarray(p), ((0, 0), (0, MAXLEN - p.shape[1]))) for p in preds])
  return conlleval_ids(gold, guess, mask, tags)


def f1_per_epoch(preds, buckets, tags) -> np.ndarray:
  """``[..., E]`` chunk F1 of a tuple of per-bucket predictions ``[..., E, n_b, L_b]``."""
  lead = np.asarray(preds[0]).shape[:-2]
  flat = [np.asarray(p).reshape((-1,) + p.shape[-2:]) for p in preds]
  f1 = [scores([f[i] for f in flat], buckets, tags).f1 for i in range(flat[0].shape[0])]
  return np.asarray(f1).reshape(lead)


def take(preds, *index):
  """The per-bucket predictions at ``index`` of the leading axes."""
  return tuple(np.asarray(p)[index] for p in preds)


def select_epoch(dev_f1: np.ndarray) -> np.ndarray:
  """Per run, the epoch (0-based) with the best dev F1 (earliest on ties)."""
  return np.argmax(np.asarray(dev_f1), axis=-1)


def seeds(n: int) -> np.ndarray:
  return np.arange(int(n), dtype=np.uint32)


def host(tree):
  return jax.tree.map(np.asarray, tree)


