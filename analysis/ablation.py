"""The score–embedding synergy ablation of Lu et al. (2021), Fig 3.

Attn-TC is compared with Attn-TC-KF (keys, hence scores, frozen) and
Attn-TC-EF (embeddings frozen). Eq (8),

.. math::
   \\frac{ds_t}{d\\mathsf t} = \\Big[\\big(v_t - \\langle \\bar v(χ∖t)\\rangle_{Ψ_t}\\big)^T
   \\frac{dv_t}{d\\mathsf t}\\Big]
   \\Big\\langle \\frac{e^{s_t} + Z(χ∖t)}{Z(χ∖t)} \\Big\\rangle_{Ψ_t}^{-1},

says the topic word's score falls while its embedding, relative to the
average non-topic context, points against the direction it moves in: mutual
diminution, until the embedding has moved far enough (then mutual
enhancement). :func:`diminution_init` builds such a start on purpose.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Eq (8) and Fig 3. https://arxiv.org/abs/2011.10036
"""
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.observables import topic_observables
from attndyn.analysis.theorem1 import nontopic_context
from attndyn.dynamics.auto_train import make_auto_train
from attndyn.models import lu
from attndyn.models.lu_linear import apply_linear_for
from attndyn.models.objective import make_loss
from attndyn.tasks.topic import TopicDataset

__all__ = ["embedding_velocity", "eq8_projection", "diminution_init", "first_step_at_or_below",
           "fraction_below", "fraction_above", "rate_crossover", "at_step", "from_diminution_start"]


def embedding_velocity(loss_fn: Callable, params: dict, dataset: TopicDataset, word) -> jax.Array:
  """``[d]`` ``−∂L/∂ν_word``: the direction gradient descent moves the word's embedding (Eq (7))."""
  grads = jax.grad(lambda p: loss_fn(p, dataset.train)[0])(params)
  return -grads["embeddings"][word]


def eq8_projection(loss_fn: Callable, params: dict, dataset: TopicDataset, word) -> jax.Array:
  """``(v_t − ⟨v̄(χ∖t)⟩_{Ψ_t})ᵀ dv_t/dt`` up to the positive factor ``lr·‖q‖²``: the sign of ``ds_t/dt`` (Eq (8)).

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    params: Lu-model parameters.
    dataset: the topic task (``Ψ_t`` from ``train_topic_word``).
    word: topic word id.

  Returns:
    A scalar: negative means the score is falling (mutual diminution).
  """
  qnorm = jnp.linalg.norm(params["query"])
  ctx = nontopic_context(params, dataset)
  v = qnorm * params["embeddings"][word]
  return jnp.dot(v - ctx.vbar[word], qnorm * embedding_velocity(loss_fn, params, dataset, word))


def diminution_init(loss_fn: Callable, params: dict, dataset: TopicDataset, word,
                    alpha) -> dict:
  """Move a topic word's initial embedding so that Eq (8) starts negative.

  With ``u`` the unit direction of ``dv_t/dt`` at the start, the embedding is
  shifted along ``u`` only, so that ``(v_t − ⟨v̄(χ∖t)⟩)·u = −α``: the topic
  word now has a *smaller* projection on the gradient passed from the
  classifier than the average non-topic context, and its score first drops
  (the last two plots of Fig 3).

  Args:
    loss_fn: ``loss_fn(params, batch) -> (loss, aux)``.
    params: initial Lu-model parameters.
    dataset: the topic task.
    word: topic word id.
    alpha: the projection's target magnitude, > 0, in ``v = ‖q‖ν`` units.

  Returns:
    The parameters with ``embeddings[word]`` replaced.
  """
  qnorm = jnp.linalg.norm(params["query"])
  vel = embedding_velocity(loss_fn, params, dataset, word)
  u = vel / jnp.linalg.norm(vel)
  ctx = nontopic_context(params, dataset)
  v = qnorm * params["embeddings"][word]
  v_new = v - (jnp.dot(v - ctx.vbar[word], u) + alpha) * u
  return {**params, "embeddings": params["embeddings"].at[word].set(v_new / qnorm)}


def first_step_at_or_below(steps, values, threshold) -> np.ndarray:
  """First recorded step with ``values ≤ threshold``, per run (NaN if never).

  Args:
    steps: ``[T]`` recorded steps.
    values: ``[..., T]``.
    threshold: scalar or ``[...]``.
  """
  steps = np.asarray(steps, np.float64)
  values = np.asarray(values, np.float64)
  hit = values <= np.asarray(threshold, np.float64)[..., None]
  first = np.argmax(hit, axis=-1)
  return np.where(hit.any(-1), steps[first], np.nan)


def fraction_below(steps, a, b, until) -> np.ndarray:
  """Fraction of recorded steps ``0 < t < until`` with ``a(t) < b(t)``, per run.

  Args:
    steps: ``[T]``.
    a, b: ``[..., T]`` (e.g. the TC and KF training losses).
    until: ``[...]`` end of the window (e.g. TC's convergence step; NaN: all steps).

  Returns:
    ``[...]`` the fraction (NaN for an empty window).
  """
  steps = np.asarray(steps, np.float64)
  until = np.asarray(until, np.float64)
  until = np.where(np.isfinite(until), until, np.inf)
  window = (steps > 0) & (steps < until[..., None])
  below = np.asarray(a) < np.asarray(b)
  count = window.sum(-1)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(count > 0, (below & window).sum(-1) / count, np.nan)


def fraction_above(steps, a, b, until) -> np.ndarray:
  """Fraction of recorded steps ``0 < t < until`` with ``a(t) > b(t)`` (see :func:`fraction_below`)."""
  return fraction_below(steps, -np.asarray(a, np.float64), -np.asarray(b, np.float64), until)


def rate_crossover(steps, a, b) -> np.ndarray:
  """First recorded step from which on ``da/dt > db/dt`` at every later step (finite differences), per run.

  Fig 3 (last plot): after mutual diminution, "the increase speed of the
  Attn-TC's embedding norm exceeds the Attn-TC-KF's since around the 370-th
  epoch".

  Args:
    steps: ``[T]`` (the window to look in, e.g. the first 1.5K epochs).
    a, b: ``[..., T]``.

  Returns:
    ``[...]`` the step (NaN if ``a`` is not faster at the last step).
  """
  steps = np.asarray(steps, np.float64)
  mid = steps[1:]
  faster = np.diff(np.asarray(a, np.float64), axis=-1) > np.diff(np.asarray(b, np.float64), axis=-1)
  # Index of the last step where a was not faster; the crossover is the next one.
  not_faster = ~faster
  last_slow = np.where(not_faster.any(-1), faster.shape[-1] - 1 - np.argmax(not_faster[..., ::-1], -1), -1)
  ok = last_slow < faster.shape[-1] - 1
  return np.where(ok, mid[np.minimum(last_slow + 1, len(mid) - 1)], np.nan)


def at_step(steps, x, when) -> np.ndarray:
  """``x[r, t]`` at the recorded step ``when[r]`` of each run (the last step where ``when`` is NaN)."""
  steps = np.asarray(steps, np.float64)
  idx = [int(np.searchsorted(steps, w)) if np.isfinite(w) else len(steps) - 1 for w in when]
  return np.asarray([x[r, min(i, len(steps) - 1)] for r, i in enumerate(idx)])


def from_diminution_start(model_cfg: lu.LuModelConfig, train_cfg, dataset: TopicDataset, word,
                          alpha: float, dtype) -> Callable:
  """``one(seed)``: gradient descent of one seed from its diminution start (Fig 3's 4th and
  5th panels).

  The start is the seed's ``models.lu.init`` (as ``attndyn run`` draws it) moved by
  :func:`diminution_init` so that Eq (8)'s projection for ``word`` is ``−alpha``; training is
  :func:`dynamics.make_auto_train` (the exact fast path where it applies) with the topic
  observables recorded.

  Returns:
    ``one(seed) -> {"obs": observables, "eq8": Eq (8)'s projection at the moved start,
    "eq8_standard": at the seed's own start}``.
  """
  apply = apply_linear_for(model_cfg)
  loss_fn = make_loss(apply)
  choice = make_auto_train(loss_fn, dataset.train, topic_observables(apply, dataset), train_cfg,
                           model_cfg.trainable(), model_cfg=model_cfg)

  def one(seed):
    key = jax.random.PRNGKey(seed)
    p0 = lu.init(key, model_cfg, dtype)
    p_dim = diminution_init(loss_fn, p0, dataset, word, alpha)
    return {"obs": choice.train(p_dim, key).observables,
            "eq8": eq8_projection(loss_fn, p_dim, dataset, word),
            "eq8_standard": eq8_projection(loss_fn, p0, dataset, word)}

  return one
