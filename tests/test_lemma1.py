"""Lemma 1: any non-zero query, with the keys built in its proof, gives the same scores."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn import analysis
from attndyn import tasks
from attndyn.models.lu import apply


@given(seed=st.integers(0, 2**16), n_words=st.integers(1, 12), d_key=st.integers(1, 5),
       new_dim=st.integers(1, 5), n_leading_zeros=st.integers(0, 4))
def test_equivalent_keys_reproduce_every_score(seed, n_words, d_key, new_dim, n_leading_zeros):
  rng = np.random.default_rng(seed)
  keys, query = rng.normal(size=(n_words, d_key)), rng.normal(size=d_key)
  new_query = rng.normal(size=new_dim)
  first = min(n_leading_zeros, new_dim - 1)
  new_query[:first] = 0.0                               # the proof picks the first non-zero entry
  new_keys = np.asarray(analysis.equivalent_keys(keys, query, new_query))
  assert new_keys.shape == (n_words, new_dim)
  np.testing.assert_allclose(new_keys @ new_query, keys @ query, rtol=1e-12, atol=1e-12)
  # The construction: only the first non-zero coordinate of q̃ is used.
  others = np.delete(new_keys, first, axis=1)
  assert np.all(others == 0)
  np.testing.assert_allclose(new_keys[:, first], keys @ query / new_query[first], rtol=1e-12)


def test_equivalent_keys_give_the_model_identical_attention():
  """Swapping (q, K) for (q̃, K̃) leaves the whole forward pass unchanged."""
  rng = np.random.default_rng(0)
  params = {"embeddings": jnp.asarray(rng.normal(size=(6, 3))),
            "keys": jnp.asarray(rng.normal(size=(6, 2))),
            "query": jnp.asarray(rng.normal(size=2)),
            "classifier": {"U": jnp.asarray(rng.normal(size=(3, 2)))}}
  new_query = jnp.asarray([0.0, -0.3, 2.0])
  swapped = dict(params, query=new_query,
                 keys=analysis.equivalent_keys(params["keys"], params["query"], new_query))
  batch = tasks.Batch(jnp.asarray(rng.integers(0, 6, (5, 4)), jnp.int32),
                      jnp.ones((5, 4), bool), jnp.zeros(5, jnp.int32))
  a, b = apply(params, batch), apply(swapped, batch)
  np.testing.assert_allclose(a.attention, b.attention, rtol=1e-12)
  np.testing.assert_allclose(a.logits, b.logits, rtol=1e-12)


@pytest.mark.parametrize("new_query", [np.zeros(3), np.zeros(1), -np.zeros(4)])
def test_zero_query_is_rejected(new_query):
  with pytest.raises(tasks.ConfigError, match="non-zero"):
    analysis.equivalent_keys(np.ones((4, 3)), np.ones(3), new_query)


def test_bad_shapes_are_rejected():
  with pytest.raises(tasks.ConfigError):
    analysis.equivalent_keys(np.ones((4, 3)), np.ones(2), np.ones(3))
