"""Theorem 1 of Lu et al. (2021): the conserved quantity of a topic word.

Along the reduced dynamics of Lemma 2 (non-topic words frozen),

.. math::
   Q_t = s_t + e^{s_t}\\langle 1/Z(χ∖t)\\rangle_{Ψ_t}
         - \\tfrac12 \\|v_t - \\langle \\bar v(χ∖t)\\rangle_{Ψ_t}\\|_2^2

is constant in time (eq 9). Here ``v = ‖q‖ν``, ``Z(χ∖t) = Σ_{w∈χ∖t} e^{s_w}``
and ``v̄(χ∖t) = Σ_{w∈χ∖t} v_w e^{s_w}/Z(χ∖t)``, averaged over the training
sentences Ψ_t that contain ``t``. Evaluated on gradient descent, where the
non-topic words do move a little, ``Q_t`` drifts; the drift measures how well
Assumption 1 and the continuous-time limit hold.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.sen import array_module
from attndyn.models.lu import word_scores
from attndyn.tasks.topic import TopicDataset

__all__ = ["NonTopicContext", "psi_mean", "nontopic_context", "invariant", "invariant_drift",
           "max_invariant_drift", "drift_before_failure"]


class NonTopicContext(NamedTuple):
  """Averages over Ψ_t of the sentence minus its topic word.

  Attributes:
    inv_z: ``[T]`` ``⟨1/Z(χ∖t)⟩_{Ψ_t}``.
    vbar: ``[T, d]`` ``⟨v̄(χ∖t)⟩_{Ψ_t}`` in ``v = ‖q‖ν`` units.
  """
  inv_z: jax.Array
  vbar: jax.Array


def psi_mean(values: jax.Array, dataset: TopicDataset) -> jax.Array:
  """``⟨values⟩_{Ψ_t}`` for every topic word: ``values [n, ...]`` → ``[T, ...]``."""
  onehot = jax.nn.one_hot(dataset.train_topic_word, dataset.n_topic_words, dtype=values.dtype)
  counts = jnp.maximum(onehot.sum(0), 1.0)
  return jnp.tensordot(onehot, values, axes=(0, 0)) / counts.reshape((-1,) + (1,) * (values.ndim - 1))


def nontopic_context(params: dict, dataset: TopicDataset) -> NonTopicContext:
  """``⟨1/Z(χ∖t)⟩`` and ``⟨v̄(χ∖t)⟩`` over Ψ_t, from the current parameters."""
  batch = dataset.train
  rest = batch.mask & (batch.tokens != dataset.train_topic_word[:, None])
  scores = word_scores(params)[batch.tokens]
  shift = jnp.max(jnp.where(rest, scores, -jnp.inf), axis=1, keepdims=True)
  weights = jnp.where(rest, jnp.exp(scores - shift), 0.0)
  z = weights.sum(1)
  qnorm = jnp.linalg.norm(params["query"])
  vbar = qnorm * jnp.einsum("nl,nld->nd", weights / z[:, None], params["embeddings"][batch.tokens])
  inv_z = jnp.exp(-shift[:, 0]) / z
  return NonTopicContext(inv_z=psi_mean(inv_z, dataset), vbar=psi_mean(vbar, dataset))


def invariant(params: dict, dataset: TopicDataset) -> jax.Array:
  """``[T]`` Theorem-1 quantity ``Q_t`` (eq 9) of every topic word."""
  topic = jnp.arange(dataset.n_topic_words)
  s = word_scores(params)[topic]
  v = jnp.linalg.norm(params["query"]) * params["embeddings"][topic]
  ctx = nontopic_context(params, dataset)
  return s + jnp.exp(s) * ctx.inv_z - 0.5 * jnp.sum((v - ctx.vbar) ** 2, axis=-1)


def invariant_drift(q: jax.Array, score: jax.Array) -> jax.Array:
  """Largest change of ``Q_t`` relative to the score's growth.

  Args:
    q: ``[..., time, T]`` recorded ``Q_t``.
    score: ``[..., time, T]`` recorded ``s_t``.

  Returns:
    ``[..., T]`` ``max_τ |Q_t(τ) − Q_t(0)| / |s_t(end) − s_t(0)|`` (NumPy for host inputs).
  """
  xp = array_module(q, score)
  change = xp.max(xp.abs(q - q[..., :1, :]), axis=-2)
  growth = xp.abs(score[..., -1, :] - score[..., 0, :])
  with np.errstate(divide="ignore", invalid="ignore"):   # a word that did not move: inf, NaN
    return change / growth


def max_invariant_drift(observables: dict) -> np.ndarray:
  """``[...]``: :func:`invariant_drift` of recorded ``invariant`` and ``score`` (``[..., time,
  T]``, taken in float64), its largest value over the ``T`` topic words."""
  return np.max(np.asarray(invariant_drift(np.asarray(observables["invariant"], np.float64),
                                           np.asarray(observables["score"], np.float64))), axis=-1)


def drift_before_failure(q, score, t, failed_at) -> list:
  """Per run that failed (``failed_at ≥ 0``), Q_t's drift over the span solved before it failed.

  Args:
    q, score: ``[R, time, T]`` recorded ``Q_t`` and ``s_t`` (NaN after a failure).
    t: ``[R, time]`` the recorded times.
    failed_at: ``[R]`` the failure time, ``-1`` for a run that did not fail.

  Returns:
    ``[(largest drift over the topic words, last finite time)]`` for each failed run with more
    than one finite record, in run order.
  """
  q, score = np.asarray(q, np.float64), np.asarray(score, np.float64)
  out = []
  for i in np.flatnonzero(np.asarray(failed_at) >= 0):
    ok = np.flatnonzero(np.all(np.isfinite(q[i]), -1) & np.all(np.isfinite(score[i]), -1))
    if ok.size > 1:
      k = ok[-1] + 1
      out.append((float(np.max(invariant_drift(q[i, :k], score[i, :k]))),
                  float(np.asarray(t)[i, k - 1])))
  return out
