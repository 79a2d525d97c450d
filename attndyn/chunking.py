"""A run's memory, estimated from its config: per sweep point, and whether it fits at all.

:func:`bytes_per_point` sizes the chunks when ``sweep.chunk_size`` is unset
(:func:`dynamics.strategy.points_per_call`, the budget a fraction of each device's memory or
of the host's RAM): it counts the parameters (times a factor for gradients, optimiser state
and an ODE solver's stages) and the per-sentence activations of a forward/backward pass.
"""
import numpy as np

from attndyn.dynamics.strategy import host_bytes
from attndyn.tasks.errors import ConfigError

__all__ = ["bytes_per_point", "kept_bytes_per_point", "parameter_bytes", "check_fits"]

# Copies of the parameters alive at once: params, grads, updates, optimiser state,
# and up to ~10 for an explicit Runge-Kutta solve (stages, error estimate, saved state).
_PARAM_COPIES = 16
# Arrays of shape [sentences, length, d + d'] alive in a forward/backward pass.
_ACTIVATION_COPIES = 6


def bytes_per_point(cfg) -> int:
  """Rough peak bytes one sweep point needs (``cfg``: :class:`attndyn.config.RunConfig`)."""
  item = np.dtype(cfg.precision).itemsize
  width = cfg.model.embed_dim + cfg.model.key_dim
  params = cfg.task.n_words * width + cfg.model.embed_dim * max(cfg.model.hidden_dim,
                                                                 cfg.task.n_topics) * 2
  tokens = (cfg.task.n_train + cfg.task.n_test) * cfg.task.sentence_length
  return item * (_PARAM_COPIES * params + _ACTIVATION_COPIES * tokens * (width + 2))


# Floats `attndyn run` keeps per recorded step and stage: 4 per topic word (score, ‖v‖, the
# Theorem-1 invariant, the Corollary-1 norm) and 7 scalars (t, loss, train and test accuracy,
# topic attention, the two non-topic changes); and 2 per vocabulary word at the end.
_RECORDED_PER_WORD, _RECORDED_SCALARS, _FINAL_PER_WORD = 4, 7, 2


def kept_bytes_per_point(cfg) -> int:
  """Bytes of what one sweep point returns and the host keeps to the end (all stages)."""
  item = np.dtype(cfg.precision).itemsize
  stages = 1 + len(cfg.ode.kinds)
  per_record = _RECORDED_PER_WORD * cfg.task.n_topic_words + _RECORDED_SCALARS
  return item * stages * (cfg.train.n_records * per_record + _FINAL_PER_WORD * cfg.task.n_words)


def parameter_bytes(cfg) -> int:
  """Bytes of one sweep point's parameters: a lower bound on what training it needs."""
  item = np.dtype(cfg.precision).itemsize
  width = cfg.model.embed_dim + cfg.model.key_dim
  return item * (cfg.task.n_words * width
                 + cfg.model.embed_dim * max(cfg.model.hidden_dim, cfg.task.n_topics) * 2)


def check_fits(cfg) -> None:
  """Refuse, before anything runs, a run that cannot fit in this host's memory whatever the
  chunking: the recorded trajectories of every point plus one point's parameters (both exact,
  so a run that could fit is never refused).

  Raises:
    ConfigError: naming the sizes and the settings that shrink them.
  """
  host = host_bytes()
  kept = cfg.sweep.n_points * kept_bytes_per_point(cfg)
  params = parameter_bytes(cfg)
  if kept + params <= host:
    return
  gb = lambda b: f"{b / 2**30:,.1f} GB"
  if kept >= params:
    raise ConfigError(
        f"the recorded trajectories alone would need {gb(kept)} ({cfg.sweep.n_points} sweep "
        f"points × {cfg.train.n_records} recorded steps × {1 + len(cfg.ode.kinds)} stage(s)), "
        f"more than this machine's {gb(host)} of memory: record less often (train.record_every), "
        f"train for fewer steps, or run fewer points.")
  raise ConfigError(
      f"one sweep point's parameters alone would need {gb(params)} ({cfg.task.n_words} words × "
      f"{cfg.model.embed_dim + cfg.model.key_dim} embedding and key dimensions), more than this "
      f"machine's {gb(host)} of memory: make it smaller (task.vocab_size, model.embed_dim, "
      f"model.key_dim).")
