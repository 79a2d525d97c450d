"""Lemma 1 of Lu et al. (2021): fixing a non-zero query loses no capacity.

For any keys ``K`` and query ``q`` and any non-zero ``q̃`` there are keys ``K̃``
with the same scores, ``q̃ᵀK̃ = qᵀK``; the proof (Appendix C) builds them.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Lemma 1 and its proof in Appendix C. https://arxiv.org/abs/2011.10036
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.tasks.errors import ConfigError

__all__ = ["equivalent_keys"]


def equivalent_keys(keys: jax.Array, query: jax.Array, new_query: jax.Array) -> jax.Array:
  """Keys that give ``new_query`` the scores ``keys`` give ``query`` (Lemma 1's construction).

  With ``S = qᵀK = [s_1, ..., s_N]`` and ``i`` the first index where
  ``q̃_i ≠ 0``, the ``w``-th new key is ``s_w / q̃_i`` in entry ``i`` and zero
  elsewhere:

  .. math:: \\tilde\\kappa_w = \\frac{s_w}{\\tilde q_i} e_i, \\qquad
     \\tilde q^T \\tilde\\kappa_w = s_w = q^T \\kappa_w

  Under ``jit`` the zero check cannot run; a zero ``new_query`` then gives
  non-finite keys.

  Args:
    keys: ``[N, d']`` keys ``κ_w`` as rows (the paper's ``K`` is their transpose).
    query: ``[d']`` the current query ``q``.
    new_query: ``[d̃']`` any non-zero query ``q̃`` (its dimension may differ
      from ``d'``).

  Returns:
    ``[N, d̃']`` new keys ``K̃ᵀ`` with ``new_keys @ new_query == keys @ query``.

  Raises:
    ConfigError: ``new_query`` is zero, or the shapes do not match.

  References:
    https://arxiv.org/abs/2011.10036 (Appendix C, proof of Lemma 1)
  """
  keys, query, new_query = jnp.asarray(keys), jnp.asarray(query), jnp.asarray(new_query)
  if keys.ndim != 2 or query.shape != keys.shape[-1:] or new_query.ndim != 1:
    raise ConfigError(f"equivalent_keys needs keys [N, d'], query [d'] and new_query [d~']; "
                      f"got {keys.shape}, {query.shape}, {new_query.shape}.")
  if not isinstance(new_query, jax.core.Tracer) and not np.any(np.asarray(new_query) != 0):
    raise ConfigError(f"new_query = {np.asarray(new_query)!r} is not allowed: Lemma 1 needs a "
                      "non-zero query (a zero query gives every word score 0).")
  scores = keys @ query                                   # [N]
  first = jnp.argmax(new_query != 0)                      # first non-zero entry
  column = scores / new_query[first]
  onehot = jax.nn.one_hot(first, new_query.shape[0], dtype=column.dtype)
  return column[:, None] * onehot[None, :]
