"""Evaluating Yang's transformer tagger: predictions, divergences between two taggers, conlleval scores.

Every compiled function here works on one run (the experiments vmap them over seeds, λ
or probe sources); the scores are computed on the host from the per-bucket predictions.
Used by ``attndyn reproduce yang`` (tagger, adversary) and the structured-attention
experiment on CoNLL-2000.

References:
  Yang, "Analysis of attention weights in a transformer tagger" (Sections 4-5).
  Wiegreffe & Pinter, "Attention is not not Explanation", EMNLP 2019 (the seed baseline).
"""
import itertools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis import divergences
from attndyn.analysis.conlleval import conlleval_ids
from attndyn.analysis.copying_stats import first_crossing
from attndyn.models import transformer_tagger as tt

__all__ = ["MAXLEN", "predictor", "comparer", "matched_head_jsd", "seed_baseline", "scores",
           "f1_per_epoch", "take", "select_epoch", "steps_to_level", "host"]

MAXLEN = 128   # longest sentence the host-side scorer pads to (CoNLL-2000: 78)


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
  h = jsd_heads.shape[-1]
  return float(min(np.mean([jsd_heads[i, p[i]] for i in range(h)])
                   for p in itertools.permutations(range(h))))


def seed_baseline(cfg: tt.TaggerConfig, params, buckets) -> dict:
  """Divergences of seed 0 from every other seed (``params``: stacked ``[S, ...]``) on
  ``buckets``, in one vmapped call: Wiegreffe & Pinter's baseline of the attention's variance
  under another initialisation (:func:`comparer`'s values ``[S − 1]``, and ``jsd_matched``,
  the heads matched by :func:`matched_head_jsd`); ``{}`` for one seed."""
  if jax.tree.leaves(params)[0].shape[0] < 2:
    return {}
  compare = comparer(cfg, cfg, buckets)
  p0 = jax.tree.map(lambda x: x[0], params)
  others = jax.tree.map(lambda x: x[1:], params)
  out = host(jax.jit(jax.vmap(lambda p: compare(p0, p)))(others))
  out["jsd_matched"] = np.asarray([matched_head_jsd(h) for h in out["jsd_heads"]])
  return out


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


def steps_to_level(dev_f1: np.ndarray, level: float, steps_per_epoch: int) -> np.ndarray:
  """``[S]``: the step after which dev F1 (``[S, E]``, after each epoch of ``steps_per_epoch``
  steps) first reaches ``level`` (NaN: never within the budget): a learning speed."""
  dev_f1 = np.asarray(dev_f1)
  return first_crossing(dev_f1, steps_per_epoch * np.arange(1, dev_f1.shape[-1] + 1), level)


def host(tree):
  """``tree`` with every leaf a NumPy array (on the host)."""
  return jax.tree.map(np.asarray, tree)
