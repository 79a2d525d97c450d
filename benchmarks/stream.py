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


def _best_seconds(fn, args, repeats: int, calls: int = 1) -> float:
  """The fastest of ``repeats`` timings of ``calls`` back-to-back calls of ``fn(*args)``,
  per call (STREAM's convention: the best sweep counts). ``calls > 1`` lets an accelerator
  queue the calls, so the host's dispatch of each does not count in a sub-millisecond sweep."""
  jax.block_until_ready(fn(*args))
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    for _ in range(calls):
      out = fn(*args)
    jax.block_until_ready(out)
    best = min(best, (time.perf_counter() - t0) / calls)
  return best


def _triad(b, c):
  return b + 3.0 * c


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
  jax_gbs = moved / _best_seconds(jax.jit(_triad), (jnp.asarray(b), jnp.asarray(c)),
                                  repeats) / 1e9
  return {"numpy_gbs": numpy_gbs, "jax_gbs": jax_gbs, "best_gbs": max(numpy_gbs, jax_gbs),
          "bytes": moved}


def device_bandwidth(n: int = 1 << 28, repeats: int = 10, calls: int = 10) -> dict:
  """The default device's own memory bandwidth in GB/s: the triad, a scale and a sum, on arrays
  made on the device (no host memory is timed).

  The triad (``3 · 4 · N`` bytes) is the yardstick, as :func:`triad_bandwidth`'s is on a CPU;
  the scale ``a = s·b`` (``2 · 4 · N``: a copy) and the sum of ``b`` (``4 · N``: one read) say
  how far the other two access patterns get.

  Args:
    n: elements per array (default 2²⁸: 1 GiB each, far larger than a GPU's L2 cache).
    repeats: timings; the fastest counts.
    calls: back-to-back calls per timing (:func:`_best_seconds`).

  Returns:
    ``{"triad_gbs", "scale_gbs", "sum_gbs", "n", "device"}``.
  """
  kb, kc = jax.random.split(jax.random.PRNGKey(0))
  b = jax.random.uniform(kb, (n,), jnp.float32)
  c = jax.random.uniform(kc, (n,), jnp.float32)
  gbs = lambda moved, fn, args: moved / _best_seconds(jax.jit(fn), args, repeats, calls) / 1e9
  out = {"triad_gbs": gbs(3 * 4 * n, _triad, (b, c)),
         "scale_gbs": gbs(2 * 4 * n, lambda b: 3.0 * b, (b,)),
         "sum_gbs": gbs(4 * n, jnp.sum, (b,)),
         "n": n, "device": str(list(b.devices())[0])}
  return out
