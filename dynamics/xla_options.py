"""XLA compile options, kept to those the installed jaxlib knows.

The per-stage options (:data:`dynamics.fast_lu.COMPILER_OPTIONS`,
:data:`dynamics.reduced_ode.COMPILER_OPTIONS`, ...) are compile-time tuning
only: they never change what a program computes beyond float rounding. XLA
rejects a whole compilation over one option name it does not know
(``INVALID_ARGUMENT: No such compile option``), and option names come and go
between jaxlib releases, so an option the installed XLA does not accept is
dropped rather than allowed to fail a run.
"""
import functools
from typing import Mapping, Optional

import jax
import numpy as np

__all__ = ["supported"]


@functools.lru_cache(maxsize=None)
def _accepted(name: str, value) -> bool:
  """Whether XLA compiles a trivial program with ``{name: value}`` (probed once per process)."""
  try:
    jax.jit(lambda x: x + 1).lower(np.float32(0)).compile({name: value})
  except RuntimeError:  # jax.errors.JaxRuntimeError: "No such compile option"
    return False
  return True


def supported(options: Optional[Mapping]) -> Optional[dict]:
  """``options`` without the entries the installed XLA rejects (``None`` stays ``None``)."""
  if options is None:
    return None
  return {name: value for name, value in options.items() if _accepted(name, value)}
