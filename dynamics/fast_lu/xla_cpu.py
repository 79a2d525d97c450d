"""Seeds-last helpers and the XLA:CPU workarounds of the fast path (slice sums, a fusion
barrier, raw gathers): each computes what its plain ``jnp`` form would, faster on CPU."""
import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np

__all__ = []


def _sum_rows(x_fn, n: int):
  """``Σ_i x_fn(i0, i1)`` over rows ``i < n`` as unrolled slice sums (two levels).

  ``x_fn(a, b)`` returns rows ``a:b`` of the summand (``[b − a, ...]``); this
  avoids XLA's slow CPU reduction over a non-minor axis. Blocks of ``b`` rows,
  ``b`` a divisor of ``n`` near ``√n`` when there is one.
  """
  root = int(np.sqrt(n))
  divisors = [b for b in range(max(1, root // 2), 2 * root + 2) if n % b == 0]
  block = min(divisors, key=lambda b: b + n // b) if divisors else max(1, root)
  full = n // block
  part = _tree_sum([x_fn(b * block, (b + 1) * block) for b in range(full)])
  tail = n - full * block
  if tail:
    rest = x_fn(full * block, n)
    part = rest if part is None else part.at[:tail].add(rest)
  rows = part.shape[0]
  return _tree_sum([part[k] for k in range(rows)])


def _sum_many_rows(x_fn, n: int, parts: int = 8):
  """``Σ_i x_fn(i0, i1)`` over rows ``i < n`` for large ``n`` (a sum over words): three levels.

  First ``parts`` slices of ``n // parts`` rows are added (one kernel, the
  remainder rows added into the first ones), then :func:`_sum_rows` sums those
  rows: fewer slices than :func:`_sum_rows` alone (``2√n``), so both the kernel and
  its compile are smaller for a sum over the whole vocabulary (``∂L/∂U``).
  """
  rows = n // parts
  if rows < parts:
    return _sum_rows(x_fn, n)
  part = _tree_sum([x_fn(k * rows, (k + 1) * rows) for k in range(parts)])
  if n > parts * rows:
    part = part.at[:n - parts * rows].add(x_fn(parts * rows, n))
  return _sum_rows(lambda a, b: part[a:b], rows)


def _tree_sum(xs):
  xs = [x for x in xs if x is not None]
  if not xs:
    return None
  while len(xs) > 1:
    xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]


def _materialize(pred, fn, *args):
  """``fn(*args)``, computed in its own fused kernels and stored.

  XLA:CPU fuses a cheap sum of gathers into each of its consumers, recomputing
  the gathers per consumer; a ``lax.cond`` on a predicate that is always true at
  run time (``pred``, traced, so XLA cannot fold it) is a fusion boundary.
  ``fn`` is traced once (its jaxpr is replayed as the taken branch), not once
  for the output shapes and again for the branch.
  """
  closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
  out_tree = jax.tree.structure(out_shape)
  computed = lambda *leaves: jax.tree.unflatten(out_tree, jax_core.jaxpr_as_fun(closed)(*leaves))
  zeros = lambda *_: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), out_shape)
  return jax.lax.cond(pred, computed, zeros, *jax.tree.leaves(args))


def _rows(table, index):
  """``table[index]``: rows of ``table [R, ...]`` at ``index [n, 1]`` (NumPy int32, in bounds).

  The gather ``jnp`` indexing emits, bound directly: the step holds over a
  hundred of these, and ``jnp``'s general indexing machinery is a large part of
  the time to trace them.
  """
  dims = jax.lax.GatherDimensionNumbers(offset_dims=tuple(range(1, table.ndim)),
                                        collapsed_slice_dims=(0,), start_index_map=(0,))
  return jax.lax.gather(table, index, dims, (1,) + table.shape[1:],
                        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _columns(index):
  """The columns of a NumPy index table ``[n, K]`` as ``K`` int32 arrays ``[n, 1]`` for :func:`_rows`."""
  index = np.asarray(index, np.int32)
  return [np.ascontiguousarray(index[:, k:k + 1]) for k in range(index.shape[1])]


def _gather_sum(table, columns):
  """``Σ_k table[index[:, k]]``: ``[n, ...]`` from ``table [R, ...]``, ``columns = _columns(index)``."""
  return _tree_sum([_rows(table, c) for c in columns])


def _weighted_row_sum(pred, weights, table, index):
  """``Σ_l weights[:, l] ⊙ table[index[:, l]]``: ``[n, c, S]`` for ``weights [n, L, S]``,
  ``table [R, c, S]`` and a NumPy ``index [n, L]``, one row gather per column, in its own
  fused kernels and stored (:func:`_materialize` on ``pred``, traced and true): its
  consumers (a product with a classifier, a mean over sentences) would otherwise recompute
  the gathers for every element they read."""
  columns = _columns(index)

  def total(w, t):
    return _tree_sum([w[:, k, None] * _rows(t, c) for k, c in enumerate(columns)])

  return _materialize(pred, total, weights, table)


def _finite_per_seed(x):
  """``[S]``: whether every entry of a seeds-last array ``x [..., S]`` is finite."""
  return jnp.all(jnp.isfinite(x.reshape(-1, x.shape[-1])), axis=0)


def _seeds_last(x):
  return jnp.moveaxis(x, 0, -1)


def _seeds_first(x):
  return jnp.moveaxis(x, -1, 0)
