"""analysis.absence: recall of each topic with its topic word masked out."""
import jax.numpy as jnp
import numpy as np

from attndyn import models
from attndyn.analysis.absence import recall_without_topic_word, without_topic_words


def test_only_topic_words_are_masked(tiny_data):
  task, data = tiny_data
  out = without_topic_words(data.test, task.n_topic_words)
  tokens, mask = np.asarray(data.test.tokens), np.asarray(out.mask)
  np.testing.assert_array_equal(mask, np.asarray(data.test.mask) & (tokens >= task.n_topic_words))
  assert (~mask).sum(1).tolist() == [1] * tokens.shape[0]      # one topic word per sentence


def test_a_bias_free_classifier_without_topic_signal_calls_every_sentence_class_0(tiny_data, key):
  """Non-topic embeddings 0: without its topic word a sentence's context is 0, every TC logit
  is 0 and argmax picks class 0, so topic 0 has recall 1 and every other topic 0; with a bias
  favouring class 1 (a TL with zero weights), topic 1 has recall 1."""
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                             key_dim=2, classifier="tc", embed_std=1.0, key_std=1.0)
  params = models.lu.init(key, cfg, jnp.float64)
  params["embeddings"] = params["embeddings"].at[task.n_topic_words:].set(0.0)
  rec = recall_without_topic_word(models.lu.apply, params, data.test, task.n_topic_words,
                                  task.n_topics)
  np.testing.assert_array_equal(rec, [1.0, 0.0])
  tl = {"U1": jnp.zeros((3, 4)), "b1": jnp.zeros(4), "U2": jnp.zeros((4, 2)),
        "b2": jnp.array([0.0, 1.0])}
  rec = recall_without_topic_word(models.lu.apply, {**params, "classifier": tl}, data.test,
                                  task.n_topic_words, task.n_topics)
  np.testing.assert_array_equal(rec, [0.0, 1.0])
