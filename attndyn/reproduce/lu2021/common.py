"""Settings and small helpers shared by the Lu et al. (2021) experiments.

The synthetic setting is Section 5.1's text (the ``lu2021-text-*`` presets, read from there):
J = 4 topics × 2 topic words, M = 5000 non-topic words, m = 20 per sentence,
800 / 200 sentences, d = d' = 15, embeddings N(0, σ²/d = 1e-6), keys 0 (every
score starts at 0), a fixed query of unit norm, FC's U with orthonormal
columns, full-batch gradient descent with lr 0.1.
"""
from typing import Dict

import jax
import numpy as np

from attndyn import models
from attndyn import tasks
from attndyn import presets, schema
from attndyn.dynamics import xla_options

__all__ = ["TEXT_TASK", "TEXT_MODEL", "NAMES", "topic_data", "text_run", "lu_config", "seeds",
           "host"]

# The paper's text settings, from the one place they are written (attndyn.presets).
TEXT_TASK = {k: v for k, v in presets.preset("lu2021-text-tc")["task"].items() if k != "kind"}
TEXT_MODEL = {k: v for k, v in presets.preset("lu2021-text-tc")["model"].items()
              if k not in ("classifier", "fc_init", "train_query", "freeze")}
NAMES = {"fc": "Attn-FC", "tc": "Attn-TC", "tl": "Attn-TL"}


_DATA = {}


def topic_data(task: Dict, data_seed: int = 0, *, path: str = "task"):
  """``(TopicTaskConfig, TopicDataset)`` of a task dict (generated once per process);
  ``path``: the settings table it came from, named by a bad value's error."""
  with schema.at(path):
    cfg = tasks.TopicTaskConfig(**task)
  if (cfg, data_seed) not in _DATA:
    options = xla_options.supported(tasks.TOPIC_COMPILER_OPTIONS)
    _DATA[cfg, data_seed] = jax.jit(tasks.make_topic_dataset, static_argnums=1,
                                    compiler_options=options)(jax.random.PRNGKey(data_seed), cfg)
  return cfg, _DATA[cfg, data_seed]


def text_run(classifier: str, changes: Dict) -> Dict:
  """The ``attndyn run`` config of the ``lu2021-text-<classifier>`` preset with ``changes`` applied."""
  from attndyn.reproduce import engine
  return engine.deep_update(presets.preset(f"lu2021-text-{classifier}"), changes)


def lu_config(task_cfg: tasks.TopicTaskConfig, classifier: str, model: Dict, *,
              path: str = "model", **extra) -> models.LuModelConfig:
  """The Lu model for a topic task (vocabulary and classes from the task); ``path``: the
  settings table ``model`` came from, named by a bad value's error."""
  fields = {**model, **extra}
  with schema.at(path):
    return models.LuModelConfig(n_words=task_cfg.n_words, n_classes=task_cfg.n_topics,
                                classifier=classifier, **fields)


def seeds(n: int) -> np.ndarray:
  """``[n]`` uint32 init seeds ``0..n-1`` (the sweep input)."""
  return np.arange(int(n), dtype=np.uint32)


def host(tree):
  """NumPy copies of every leaf."""
  return jax.tree.map(np.asarray, tree)
