"""Output relevance (Snell et al., slides "Understanding Attention Training via Output Relevance").

For an attention classifier ``y = Σ_t a_t r_t`` with ``r_t = W h_t``, the output
relevance of position t is its vote ``r_t``; attention is attracted to large
``r``. In Lu et al.'s bag-of-words model ``h_t = ν_{w_t}`` and ``W = Uᵀ``, so each
word has one vote vector ``r_w = Uᵀν_w ∈ R^J``; its strength is the norm of
the vote after removing the part common to all classes:

.. math:: \\rho_w = \\| (I - \\tfrac{1}{J}\\mathbf{1}\\mathbf{1}^\\top) U^\\top \\nu_w \\|
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn import dynamics, models, tasks
from attndyn.analysis.copying_stats import first_crossing
from attndyn.models.lu import word_scores

__all__ = ["relevance", "relevance_record", "relevance_point", "half_rise_time"]


def relevance(params: dict) -> jax.Array:
  """``[V]`` ``ρ_w``: the class-discriminating part of each word's vote ``Uᵀν_w`` (TC/FC classifier)."""
  votes = params["embeddings"] @ params["classifier"]["U"]
  return jnp.linalg.norm(votes - votes.mean(-1, keepdims=True), axis=-1)


def relevance_record(n_topic: int, topic_attention_fn):
  """``record(params, params0)``: mean ρ and score over topic / non-topic words, attention on the topic word.

  Args:
    n_topic: the topic words are ids ``0..n_topic-1``.
    topic_attention_fn: ``params -> scalar`` mean attention on the topic word.
  """
  def record(params, params0):
    del params0
    rho, s = relevance(params), word_scores(params)
    return {"rho_topic": rho[:n_topic].mean(), "rho_other": rho[n_topic:].mean(),
            "score_topic": s[:n_topic].mean(), "score_other": s[n_topic:].mean(),
            "topic_attention": topic_attention_fn(params), "rho": rho, "score": s}
  return record


def relevance_point(task: "tasks.TopicTaskConfig", cfg: "models.LuModelConfig",
                    tc: "dynamics.TrainConfig"):
  """``one(seed) -> records [R]``: Lu et al.'s model ``cfg`` trained by full-batch GD (``tc``)
  on the topic task drawn from ``fold_in(PRNGKey(seed), 7)``, from ``init(PRNGKey(seed))``,
  recording :func:`relevance_record` (the attention on the topic word: mean over the training
  sentences)."""
  n_topic = task.n_topic_words

  def one(seed):
    key = jax.random.PRNGKey(seed)
    data = tasks.make_topic_dataset(jax.random.fold_in(key, 7), task)
    is_topic = data.train.tokens == data.train_topic_word[:, None]

    def topic_attention(params):
      a = models.lu.apply(params, data.train).attention
      return jnp.mean(jnp.sum(jnp.where(is_topic, a, 0.0), -1))

    record = relevance_record(n_topic, topic_attention)
    train = dynamics.make_train(models.make_loss(models.lu.apply), data.train, record, tc,
                                cfg.trainable())
    return train(models.lu.init(key, cfg), key).observables

  return one


def half_rise_time(x: np.ndarray, t: np.ndarray) -> np.ndarray:
  """``[S]``: the first recorded time at which each curve ``x [S, R]`` has made half of its
  rise from its first to its last record (NaN: never)."""
  rise = x - x[:, :1]
  return first_crossing(rise / np.maximum(rise[:, -1:], 1e-30), t, 0.5)
