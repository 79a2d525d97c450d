"""What structure does to attention maps: contiguity of the support and agreement with gold chunks.

Numbers in, numbers out (NumPy), for attention maps ``[..., L_q, L_k]`` (rows are
queries) with a key mask:

* :func:`mean_run_length`: the support ``{j : α_j > 0}`` of a row splits into
  maximal runs of adjacent positions; its mean run length is ``|support| / #runs``
  (1 for isolated words, the sentence length for a full support). The lecture's
  fusedmax "penalize[s] weight differences between adjacent positions", so its
  supports should come in longer runs than sparsemax's.
* :func:`zero_fraction`: the fraction of real keys with weight exactly 0 (sparsity).
* :func:`chunk_segments` / :func:`in_chunk_mass`: the share of a query's attention
  mass on the words of its own gold chunk (conlleval's chunk boundaries; an ``O``
  word is a chunk of its own), against the share uniform attention would give
  (the chunk's length over the sentence's).

The CRF and SparseMAP weights are marginals in ``[0, 1]`` that need not sum to 1;
the in-chunk share divides by each row's total mass, so every normaliser is
measured on the same scale. :func:`tagger_measures` applies them to the maps of trained
taggers (Yang's, :mod:`models.transformer_tagger`), with their conlleval scores.

References:
  Treviso et al., attention-mechanisms lecture (2020), "Structured attention".
  Tjong Kim Sang & Buchholz, "Introduction to the CoNLL-2000 Shared Task: Chunking", 2000.
"""
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis import tagger_scores
from attndyn.analysis.conlleval import split_tag, start_of_chunk
from attndyn.models import transformer_tagger as tt

__all__ = ["run_stats", "mean_run_length", "zero_fraction", "chunk_segments", "in_chunk_mass",
           "mass_share", "tagger_measures", "copying_measures"]


def _rows(attention, key_mask):
  a = np.asarray(attention, float)
  m = np.broadcast_to(np.asarray(key_mask, bool), a.shape)
  return a, m


def run_stats(attention, key_mask):
  """``(support size, number of runs)`` of every row, both ``[...]`` (float).

  A run is a maximal set of adjacent real positions all in the support.
  """
  a, m = _rows(attention, key_mask)
  s = (a > 0) & m
  starts = s.copy()
  starts[..., 1:] &= ~s[..., :-1]
  return s.sum(-1).astype(float), starts.sum(-1).astype(float)


def mean_run_length(attention, key_mask, row_mask=None) -> float:
  """Mean over rows of ``|support| / #runs`` (rows with an empty support, or ``row_mask`` False, left out).

  Args:
    attention: ``[..., L_q, L_k]`` weights.
    key_mask: broadcastable to it, True at real keys.
    row_mask: ``[..., L_q]`` True at the real queries (default: every row).

  Returns:
    The mean, or NaN when no row has a support.
  """
  size, runs = run_stats(attention, key_mask)
  keep = runs > 0
  if row_mask is not None:
    keep &= np.broadcast_to(np.asarray(row_mask, bool), keep.shape)
  return float(np.mean(size[keep] / runs[keep])) if keep.any() else float("nan")


def zero_fraction(attention, key_mask, row_mask=None) -> float:
  """Fraction of the (real query, real key) weights that are exactly 0."""
  a, m = _rows(attention, key_mask)
  if row_mask is not None:
    m = m & np.asarray(row_mask, bool)[..., None]
  return float(np.sum((a == 0) & m) / max(np.sum(m), 1))


def chunk_segments(tag_ids, mask, tags: Sequence[str]) -> np.ndarray:
  """``[n, L]`` int: the gold chunk each word belongs to, numbered from 0 per sentence; −1 at padding.

  Chunk starts follow conlleval's ``startOfChunk``; each ``O`` word is its own segment.
  """
  tag_ids, mask = np.asarray(tag_ids), np.asarray(mask, bool)
  seg = -np.ones(tag_ids.shape, int)
  for i in range(tag_ids.shape[0]):
    current, last, last_type = -1, "O", ""
    for j in np.nonzero(mask[i])[0]:
      prefix, kind = split_tag(tags[int(tag_ids[i, j])])
      if prefix == "O" or start_of_chunk(last, prefix, last_type, kind):
        current += 1
      seg[i, j] = current
      last, last_type = prefix, kind
  return seg


def in_chunk_mass(attention, segments) -> "tuple[np.ndarray, np.ndarray]":
  """Per real query: the share of its attention mass on its own gold chunk, and uniform's share.

  Args:
    attention: ``[n, H, L, L]`` (or ``[n, L, L]``) weights, query rows.
    segments: ``[n, L]`` from :func:`chunk_segments` (−1 at padding).

  Returns:
    ``(share, uniform)``: ``[n, (H,) L]`` arrays, NaN at padded queries and at rows
    with no mass; ``uniform`` is ``|chunk| / |sentence|``.
  """
  a = np.asarray(attention, float)
  seg = np.asarray(segments)
  same = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] >= 0)     # [n, Lq, Lk]
  real = seg >= 0
  uniform = same.sum(-1) / np.maximum(real.sum(-1, keepdims=True), 1)
  if a.ndim == 4:
    same, real, uniform = same[:, None], real[:, None], np.broadcast_to(
        uniform[:, None], a.shape[:-1])
  total = np.sum(a * (seg[:, None, None, :] >= 0 if a.ndim == 4 else real[:, None, :]), -1)
  share = np.sum(a * same, -1) / np.where(total > 0, total, 1.0)
  share = np.where(real & (total > 0), share, np.nan)
  return share, np.where(real, uniform, np.nan)


def mass_share(attention, target, key_mask) -> "tuple[np.ndarray, np.ndarray]":
  """Per row: the share of its mass on the keys ``target``, and uniform attention's share.

  Args:
    attention: ``[n, (H,) L_q, L_k]`` weights.
    target: ``[n, L_q, L_k]`` bool, the keys that count for each query (e.g. the source
      positions holding the word a copying model must output).
    key_mask: ``[n, L_k]`` bool, the real keys.

  Returns:
    ``(share, uniform)`` of shape ``attention.shape[:-1]``; NaN at rows with no mass.
  """
  a = np.asarray(attention, float)
  km = np.asarray(key_mask, bool)[:, None, :]
  tgt = np.asarray(target, bool) & km
  uniform = tgt.sum(-1) / np.maximum(km.sum(-1), 1)
  if a.ndim == 4:
    tgt, km, uniform = tgt[:, None], km[:, None], uniform[:, None]
  total = np.sum(a * km, -1)
  share = np.where(total > 0, np.sum(a * tgt, -1) / np.where(total > 0, total, 1.0), np.nan)
  return share, np.broadcast_to(uniform, share.shape)


def tagger_measures(cfg: tt.TaggerConfig, params, test, tags: Sequence[str], n_seeds: int) -> dict:
  """Per seed of the stacked tagger ``params`` on the batch ``test``: conlleval's ``f1`` and
  ``acc``, and the measures above of its attention maps (``run_length``, ``zero_fraction``,
  the in-chunk share ``in_chunk`` and uniform attention's ``uniform``, means over real
  queries); ``maps``: each seed's attention ``[n, H, L, L]``."""
  apply = jax.jit(lambda p: (lambda o: (jnp.argmax(o.logits, -1), o.attention))(
      tt.apply(p, test, cfg)))
  seg = chunk_segments(test.labels, test.mask, tags)
  mask = np.asarray(test.mask)
  km, qm = mask[:, None, None, :], mask[:, None, :]
  out = {k: [] for k in ("f1", "acc", "run_length", "zero_fraction", "in_chunk", "uniform")}
  maps = []
  for i in range(n_seeds):
    guess, att = jax.device_get(apply(jax.tree.map(lambda x: x[i], params)))
    sc = tagger_scores.scores((guess,), (test,), tags)
    share, uniform = in_chunk_mass(att, seg)
    out["f1"].append(sc.f1)
    out["acc"].append(sc.accuracy)
    out["run_length"].append(mean_run_length(att, km, qm))
    out["zero_fraction"].append(zero_fraction(att, km, qm))
    out["in_chunk"].append(float(np.nanmean(share)))
    out["uniform"].append(float(np.nanmean(uniform)))
    maps.append(att)
  return {**{k: np.asarray(v) for k, v in out.items()}, "maps": maps}


def copying_measures(attention, batch) -> dict:
  """Per seed, the measures above of a copying model's cross-attention ``[S, n, K, T, L]`` on
  the pairs ``batch`` (``tokens [n, L]``, ``labels [n, T]``, ``mask``), over the real target
  steps (label > 0): ``run_length``, ``zero_fraction``, and the share of attention mass on
  the source words equal to the output (``on_target``) against uniform attention's
  (``uniform``), each ``[S]``."""
  x, y, m = (np.asarray(v) for v in (batch.tokens, batch.labels, batch.mask))
  target = (x[:, None, :] == y[:, :, None]) & m[:, None, :]        # source words equal to the output
  rows = (y > 0)[:, None, :]                                       # real target steps
  km = m[:, None, None, :]
  per = {k: [] for k in ("run_length", "zero_fraction", "on_target", "uniform")}
  for a in attention:
    share, uniform = mass_share(a, target, m)
    per["run_length"].append(mean_run_length(a, km, rows))
    per["zero_fraction"].append(zero_fraction(a, km, rows))
    per["on_target"].append(float(np.nanmean(np.where(rows, share, np.nan))))
    per["uniform"].append(float(np.nanmean(np.where(rows, uniform, np.nan))))
  return {k: np.asarray(v) for k, v in per.items()}
