"""How many sweep points fit in one compiled call: a rough memory estimate per point.

Used when ``sweep.chunk_size`` is unset. The estimate counts the parameters
(times a factor for gradients, optimiser state and an ODE solver's stages) and
the per-sentence activations of a forward/backward pass; the budget is a
fraction of each device's memory (accelerators) or of the host's RAM (CPU).
"""
import os
from typing import Optional

import jax
import numpy as np

# Copies of the parameters alive at once: params, grads, updates, optimiser state,
# and up to ~10 for an explicit Runge-Kutta solve (stages, error estimate, saved state).
_PARAM_COPIES = 16
# Arrays of shape [sentences, length, d + d'] alive in a forward/backward pass.
_ACTIVATION_COPIES = 6
_BUDGET_FRACTION = 0.5


def bytes_per_point(cfg) -> int:
  """Rough peak bytes one sweep point needs (``cfg``: :class:`attndyn.config.RunConfig`)."""
  item = np.dtype(cfg.precision).itemsize
  width = cfg.model.embed_dim + cfg.model.key_dim
  params = cfg.task.n_words * width + cfg.model.embed_dim * max(cfg.model.hidden_dim,
                                                                 cfg.task.n_topics) * 2
  tokens = (cfg.task.n_train + cfg.task.n_test) * cfg.task.sentence_length
  return item * (_PARAM_COPIES * params + _ACTIVATION_COPIES * tokens * (width + 2))


def device_budget(devices=None) -> int:
  """Bytes one device may use: half its memory, or its share of half the host's RAM (CPU).

  Only this process's devices are inspected (the others may sit on other hosts).
  """
  devices = jax.devices() if devices is None else list(devices)
  local = [d for d in devices if d.process_index == jax.process_index()] or devices[:1]
  limits = []
  for d in local:
    try:
      stats = d.memory_stats()
    except Exception:  # not supported by this backend
      stats = None
    if stats and stats.get("bytes_limit"):
      limits.append(stats["bytes_limit"])
  if len(limits) == len(local):
    return int(_BUDGET_FRACTION * min(limits))
  try:
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    host = 8 << 30
  return int(_BUDGET_FRACTION * host / len(local))


def auto_chunk_size(cfg, devices=None) -> Optional[int]:
  """Points per compiled call, or ``None`` (all at once) when the whole sweep fits.

  Each device holds ``chunk / n_devices`` points of a chunk.
  """
  n_dev = len(jax.devices() if devices is None else devices)
  per_device = device_budget(devices) // max(bytes_per_point(cfg), 1)
  if per_device * n_dev >= cfg.sweep.n_points:
    return None
  return max(n_dev, int(per_device) * n_dev)
