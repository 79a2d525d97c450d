"""The benchmark workload: Lu et al.'s text preset, S seeds sharing one dataset.

Section 5.1 of Lu et al. (2021): J = 4 topics × 2 topic words, M = 5000
non-topic words, m = 20 per sentence, 800 training sentences, d = d' = 15,
embedding std 1e-3, a fixed query, full-batch gradient descent with lr 0.1,
float32. The classifier is TC (trainable linear ``U``) unless stated.
"""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import models
from attndyn import tasks
from attndyn.dynamics import xla_options

LR = 0.1


class Workload(NamedTuple):
  """One benchmark configuration.

  Attributes:
    task: the task sizes.
    data: the dataset (shared by every seed).
    model_cfg: the model configuration.
    params0: initial parameters of the S seeds (leaves ``[S, ...]``, float32).
    keys: ``[S, 2]`` the seeds' PRNG keys.
    lr: learning rate.
  """
  task: tasks.TopicTaskConfig
  data: tasks.TopicDataset
  model_cfg: models.LuModelConfig
  params0: Any
  keys: Any
  lr: float

  @property
  def seeds(self) -> int:
    return self.keys.shape[0]


def make_workload(seeds: int, *, vocab_size: int = 5000, n_train: int = 800,
                  classifier: str = "tc", data_seed: int = 0) -> Workload:
  """The preset with ``seeds`` initialisations (seed ``i`` uses ``split(PRNGKey(1), S)[i]``)."""
  task = tasks.TopicTaskConfig(vocab_size=vocab_size, n_train=n_train)
  options = xla_options.supported(tasks.TOPIC_COMPILER_OPTIONS)
  data = jax.jit(tasks.make_topic_dataset, static_argnums=1,
                 compiler_options=options)(jax.random.PRNGKey(data_seed), task)
  model_cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics,
                                   classifier=classifier)
  keys = jax.random.split(jax.random.PRNGKey(1), seeds)
  params0 = jax.jit(jax.vmap(lambda k: models.lu.init(k, model_cfg, jnp.float32)))(keys)
  return Workload(task, data, model_cfg, params0, keys, LR)


def model_bytes_per_seed_epoch(w: Workload) -> float:
  """Bytes one seed·epoch must move at least (float32), the yardstick for bandwidth.

  Read and write every training word's weighted embedding and score once,
  write and read its ``J`` projected channels ``Uᵀx_w``, gather each token's
  ``[e_w, Uᵀx_w]`` row once for the forward pass, write and read the ``J + 1``
  backward channels per word:
  ``4 · (2 V_a (d + 1) + 2 V_a J + n L (J + 1) + 2 V_a (J + 1))``.
  """
  tokens = np.asarray(w.data.train.tokens)
  active = len(np.unique(tokens))
  d, j = w.model_cfg.embed_dim, w.model_cfg.n_classes
  return 4.0 * (2 * active * (d + 1) + 2 * active * j + tokens.size * (j + 1)
                + 2 * active * (j + 1))
