"""A STREAM-like triad: the memory bandwidth the benchmarks are compared against.

.. math:: a_i = b_i + s\\,c_i

moves ``3 · 4 · N`` bytes (float32: two reads, one write; STREAM's counting)
per sweep. Arrays are far larger than the last-level cache.

References:
  McCalpin, "Memory Bandwidth and Machine Balance in Current High Performance
  Computers", IEEE TCCA Newsletter, 1995. https://www.cs.virginia.edu/stream/
"""
import time

import jax
import jax.numpy as jnp
import numpy as np


def triad_bandwidth(n: int = 1 << 25, repeats: int = 7) -> dict:
  """Best-of-``repeats`` triad bandwidth in GB/s, NumPy and jitted JAX.

  Args:
    n: elements per array (default 2²⁵: 128 MiB each).
    repeats: sweeps timed; the fastest counts (STREAM's convention).

  Returns:
    ``{"numpy_gbs", "jax_gbs", "best_gbs", "bytes"}``.
  """
  b = np.random.default_rng(0).random(n, dtype=np.float32)
  c = np.random.default_rng(1).random(n, dtype=np.float32)
  a = np.empty_like(b)
  moved = 3 * 4 * n
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    np.multiply(c, np.float32(3.0), out=a)
    np.add(a, b, out=a)
    best = min(best, time.perf_counter() - t0)
  # np.multiply + np.add touch a twice more than a fused triad: count what moved.
  numpy_gbs = 5 * 4 * n / best / 1e9
  triad = jax.jit(lambda b, c: b + 3.0 * c)
  bj, cj = jnp.asarray(b), jnp.asarray(c)
  triad(bj, cj).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    triad(bj, cj).block_until_ready()
    best = min(best, time.perf_counter() - t0)
  jax_gbs = moved / best / 1e9
  return {"numpy_gbs": numpy_gbs, "jax_gbs": jax_gbs, "best_gbs": max(numpy_gbs, jax_gbs),
          "bytes": moved}
