"""Word-pair scores and embeddings of Attn-TC-CNN (Lu et al. 2021, Appendix A, Figs 8-9).

The width-2 convolutions of :mod:`models.cnn` give every ordered
word pair ``(a, b)`` a key and an embedding,

.. math::
   ρ_{ab} = W^κ_0{}^T κ_a + W^κ_1{}^T κ_b + b^κ, \\qquad
   μ_{ab} = W^ν_0{}^T ν_a + W^ν_1{}^T ν_b + b^ν,

and a score ``s_{ab} = qᵀρ_{ab}``. These do not start near zero, so Appendix A
centres them on their initial values before checking Assumption 1 and the SEN
relation: ``Δs_{ab} = s_{ab} − s_{ab}(0)`` and ``‖q‖·‖μ_{ab} − μ_{ab}(0)‖``.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Appendix A. https://arxiv.org/abs/2011.10036
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn import models
from attndyn import tasks
from attndyn.analysis.assumption1 import change_ratio
from attndyn.dynamics.train import TrainConfig, make_train

__all__ = ["pair_scores", "pair_embeddings", "centred_pairs", "topic_pair_changes",
           "nontopic_pair_mask", "shares_topic_word", "train_on_pairs", "split_change_ratios"]


def pair_scores(params: dict) -> jax.Array:
  """``[V, V]`` score ``s_{ab}`` of every ordered pair (row: first word)."""
  conv, q = params["conv"], params["query"]
  first = params["keys"] @ (conv["key_kernel"][0] @ q)
  second = params["keys"] @ (conv["key_kernel"][1] @ q)
  bias = jnp.dot(conv.get("key_bias", jnp.zeros_like(q)), q)
  return first[:, None] + second[None, :] + bias


def pair_embeddings(params: dict) -> jax.Array:
  """``[V, V, d]`` embedding ``μ_{ab}`` of every ordered pair."""
  conv = params["conv"]
  first = params["embeddings"] @ conv["embed_kernel"][0]
  second = params["embeddings"] @ conv["embed_kernel"][1]
  bias = conv.get("embed_bias", jnp.zeros(first.shape[-1], first.dtype))
  return first[:, None, :] + second[None, :, :] + bias


def centred_pairs(params: dict, params0: dict):
  """``(Δs [V, V], ‖q‖·‖Δμ‖ [V, V])``: every pair's score and embedding change since ``params0``."""
  ds = pair_scores(params) - pair_scores(params0)
  dmu = pair_embeddings(params) - pair_embeddings(params0)
  return ds, jnp.linalg.norm(params["query"]) * jnp.linalg.norm(dmu, axis=-1)


def topic_pair_changes(params: dict, params0: dict, pairs: jax.Array):
  """``(Δs [P], ‖q‖·‖Δμ‖ [P])`` of the topic pairs ``pairs [J, P/J, 2]`` (flattened)."""
  flat = pairs.reshape(-1, 2)
  conv, q = params["conv"], params["query"]

  def score(p):
    rho = (p["keys"][flat[:, 0]] @ p["conv"]["key_kernel"][0]
           + p["keys"][flat[:, 1]] @ p["conv"]["key_kernel"][1] + p["conv"].get("key_bias", 0.0))
    return rho @ p["query"]

  def emb(p):
    return (p["embeddings"][flat[:, 0]] @ p["conv"]["embed_kernel"][0]
            + p["embeddings"][flat[:, 1]] @ p["conv"]["embed_kernel"][1]
            + p["conv"].get("embed_bias", 0.0))

  del conv
  return score(params) - score(params0), jnp.linalg.norm(q) * jnp.linalg.norm(
      emb(params) - emb(params0), axis=-1)


def shares_topic_word(pairs: jax.Array, n_words: int) -> jax.Array:
  """``[V, V]`` bool: True for every ordered pair with a word that is in some topic pair (the
  topic pairs themselves included; combine with :func:`nontopic_pair_mask`)."""
  in_topic = jnp.zeros(n_words, bool).at[pairs.reshape(-1)].set(True)
  return in_topic[:, None] | in_topic[None, :]


def nontopic_pair_mask(pairs: jax.Array, n_words: int) -> jax.Array:
  """``[V, V]`` bool: True for every ordered pair that is not a topic pair."""
  flat = pairs.reshape(-1, 2)
  return jnp.ones((n_words, n_words), bool).at[flat[:, 0], flat[:, 1]].set(False)


def train_on_pairs(seed, task_cfg: tasks.MarkovPairsConfig, model_cfg: models.CNNAttentionConfig,
                   train_cfg: TrainConfig) -> dict:
  """One run of Appendix A: Attn-TC-CNN trained by full-batch GD on its own Markov word-pair
  task, the task drawn from ``PRNGKey(seed)`` and the initialisation from its ``fold_in(·, 1)``.

  Returns:
    ``obs``: recorded along training, the loss, the test accuracy and the topic pairs' centred
    score ``Δs`` and ``‖q‖·‖Δμ‖`` (:func:`topic_pair_changes`); after training, every pair's
    ``pair_score`` / ``pair_norm`` (:func:`centred_pairs`, ``[V, V]``), the ``nontopic`` pairs
    (:func:`nontopic_pair_mask`) and those of them sharing a word with a topic pair
    (``shares_word``, :func:`shares_topic_word`).
  """
  model = models.cnn_attention(model_cfg)
  loss_fn = models.make_loss(model.apply)
  key = jax.random.PRNGKey(seed)
  data = tasks.make_markov_pairs_dataset(key, task_cfg)

  def record(params, params0):
    ds, dn = topic_pair_changes(params, params0, data.pairs)
    return {"loss": loss_fn(params, data.train)[0],
            "test_acc": models.accuracy(model.apply(params, data.test).logits, data.test.labels),
            "score": ds, "emb_norm": dn}

  train = make_train(loss_fn, data.train, record, train_cfg, model_cfg.trainable())
  params0 = model.init(jax.random.fold_in(key, 1))
  traj = train(params0, key)
  ds, dn = centred_pairs(traj.final_params, params0)
  mask = nontopic_pair_mask(data.pairs, task_cfg.n_words)
  return {"obs": traj.observables, "pair_score": ds, "pair_norm": dn, "nontopic": mask,
          "shares_word": mask & shares_topic_word(data.pairs, task_cfg.n_words)}


def split_change_ratios(pair_values: dict, topic_values: dict, parts: dict) -> dict:
  """Assumption 1's ratio (:func:`analysis.assumption1.change_ratio`) of each run over a part
  of its non-topic pairs, a part whose size differs between runs.

  Args:
    pair_values: ``{key: [R, P]}`` every pair's centred value per run (``score``, ``norm``).
    topic_values: ``{key: [R, T]}`` the topic pairs' values at the end.
    parts: ``{part: [R, P] bool}`` the pairs of each part.

  Returns:
    ``{part: {key: [R]}}``.
  """
  return {part: {key: np.array([change_ratio(values[r][sel[r]][None], topic_values[key][r][None])[0]
                                for r in range(sel.shape[0])])
                 for key, values in pair_values.items()}
          for part, sel in parts.items()}
