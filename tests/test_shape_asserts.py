"""chex at the public boundaries: ``models.lu.apply``'s batch shapes, ``dynamics.run_sweep``'s
sweep axis and its one trace for all chunks."""
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn import dynamics
from attndyn.dynamics import sweep
from attndyn.models import lu
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import ConfigError


def _params(n_words=5, d=2):
  return {"embeddings": jnp.ones((n_words, d)), "keys": jnp.zeros((n_words, d)),
          "query": jnp.ones(d), "classifier": {"U": jnp.eye(d)}}


def test_apply_checks_the_batch_shapes():
  tokens = jnp.array([[0, 1, 2], [3, 4, 0]], jnp.int32)
  out = lu.apply(_params(), Batch(tokens, jnp.ones((2, 3), bool), jnp.zeros(2, jnp.int32)))
  assert out.logits.shape == (2, 2) and out.attention.shape == (2, 3)
  with pytest.raises(AssertionError):                       # mask of another length
    lu.apply(_params(), Batch(tokens, jnp.ones((2, 4), bool), jnp.zeros(2, jnp.int32)))
  with pytest.raises(AssertionError):                       # one sentence without its batch axis
    lu.apply(_params(), Batch(tokens[0], jnp.ones(3, bool), jnp.zeros((), jnp.int32)))


def test_run_sweep_checks_the_sweep_axis():
  with pytest.raises(ConfigError, match="leaves that share the first"):
    dynamics.run_sweep(lambda p: p["a"] + p["b"].sum(), {"a": jnp.zeros(3), "b": jnp.zeros((4, 2))})


def test_run_sweep_traces_once_for_every_chunk(monkeypatch):
  fn = lambda p: 2.0 * p["x"]
  inputs = {"x": jnp.arange(5.0)}
  out = dynamics.run_sweep(fn, inputs, chunk_size=2)        # chunks 2, 2 and a padded 1
  np.testing.assert_array_equal(out, 2.0 * np.arange(5.0))
  # The guard is live: without the padding the last chunk has another shape, a second trace.
  monkeypatch.setattr(sweep, "_pad", lambda tree, size: tree)
  with pytest.raises(AssertionError, match="trace"):
    dynamics.run_sweep(fn, inputs, chunk_size=2)
