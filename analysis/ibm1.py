"""IBM Translation Model 1 trained by EM (Brown et al., 1993), vectorised over the corpus.

Snell et al., Section 4.2, read attention training through IBM Model 1: under a
uniform alignment prior, EM first learns word translation probabilities
``t(o | i)`` from co-occurrence, and the alignment posterior then follows them:

.. math:: p(a_t = l \\mid x, o) = \\frac{t(o_t \\mid x_l)}{\\sum_{l'} t(o_t \\mid x_{l'})}

E-step: expected counts ``c(o, i) = Σ_pairs Σ_t Σ_l [o_t = o][x_l = i] p(a_t = l)``;
M-step: ``t(o | i) = c(o, i) / Σ_o' c(o', i)``. Initialised uniform, so the first
E-step's alignment is uniform and its counts are the co-occurrence counts.
No NULL word (the source sentence is what the attention model can attend to).
"""
import numpy as np

from attndyn.tasks.errors import check

__all__ = ["alignment_posterior", "train_ibm1"]


def alignment_posterior(table: np.ndarray, src: np.ndarray, src_mask: np.ndarray,
                        tgt: np.ndarray) -> np.ndarray:
  """``[N, T, L]`` posterior ``p(a_t = l | x, o)`` under translation table ``t(o | i)``.

  Args:
    table: ``[V_src, V_tgt]`` with ``table[i, o] = t(o | i)``.
    src: ``[N, L]`` source ids; ``src_mask`` ``[N, L]`` True at real words.
    tgt: ``[N, T]`` target ids (0 = padding; its rows are returned as zeros).
  """
  p = table[src[:, None, :], tgt[:, :, None]] * src_mask[:, None, :]
  z = p.sum(-1, keepdims=True)
  post = np.where(z > 0, p / np.where(z > 0, z, 1.0), 0.0)
  return post * (tgt > 0)[:, :, None]


def train_ibm1(src: np.ndarray, src_mask: np.ndarray, tgt: np.ndarray, src_vocab: int,
               tgt_vocab: int, iterations: int = 10) -> np.ndarray:
  """EM for IBM Model 1; returns ``table [V_src, V_tgt]`` with rows ``t(· | i)``.

  Args:
    src, src_mask, tgt: the parallel corpus as padded id arrays (see
      :func:`alignment_posterior`).
    src_vocab, tgt_vocab: table sizes.
    iterations: EM iterations (each a full E- and M-step).

  Rows of source words that never occur stay uniform.
  """
  check(isinstance(iterations, int) and iterations >= 1, "iterations", iterations,
        "a positive integer")
  src, tgt = np.asarray(src), np.asarray(tgt)
  check(src.max(initial=0) < src_vocab and tgt.max(initial=0) < tgt_vocab, "src/tgt ids",
        (int(src.max(initial=0)), int(tgt.max(initial=0))),
        f"below src_vocab = {src_vocab} and tgt_vocab = {tgt_vocab}")
  table = np.full((src_vocab, tgt_vocab), 1.0 / tgt_vocab)
  flat = (src[:, None, :] * tgt_vocab + tgt[:, :, None]).ravel()
  for _ in range(iterations):
    post = alignment_posterior(table, src, src_mask, tgt)
    counts = np.bincount(flat, weights=post.ravel(), minlength=src_vocab * tgt_vocab)
    counts = counts.reshape(src_vocab, tgt_vocab)
    z = counts.sum(1, keepdims=True)
    table = np.where(z > 0, counts / np.where(z > 0, z, 1.0), 1.0 / tgt_vocab)
  return table
