"""Laws of the model and of the training program: bag of words, softmax, vmap = loop,
determinism, no recompilation, and t=0 of a Trajectory is the initial state."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn import models
from attndyn import tasks

# Fixed shapes (V, d, d', n, L, J): the jitted forward pass compiles once per classifier.
V, D, DK, N, L, J = 9, 3, 2, 6, 5, 3


def _random_params(rng, classifier):
  if classifier == "tl":
    cls = {"U1": rng.normal(size=(D, 4)), "b1": rng.normal(size=4),
           "U2": rng.normal(size=(4, J)), "b2": rng.normal(size=J)}
  else:
    cls = {"U": rng.normal(size=(D, J))}
  return jax.tree.map(jnp.asarray, {
      "embeddings": rng.normal(size=(V, D)), "keys": rng.normal(size=(V, DK)),
      "query": rng.normal(size=DK), "classifier": cls})


_apply = jax.jit(models.lu.apply)


@given(seed=st.integers(0, 2**16), classifier=st.sampled_from(["tc", "tl"]),
       padding=st.sampled_from([0.0, 0.5]))
def test_bag_of_words_and_softmax_laws(seed, classifier, padding):
  rng = np.random.default_rng(seed)
  params = _random_params(rng, classifier)
  tokens = rng.integers(0, V, size=(N, L))
  mask = rng.random((N, L)) >= padding
  mask[:, 0] = True
  batch = tasks.Batch(jnp.asarray(tokens, jnp.int32), jnp.asarray(mask), jnp.zeros(N, jnp.int32))
  out = _apply(params, batch)
  attention = np.asarray(out.attention)
  # Softmax over the real words: rows sum to 1, padding gets exactly 0, real words > 0.
  np.testing.assert_allclose(attention.sum(axis=1), 1.0, rtol=1e-12)
  assert np.all(attention[~mask] == 0.0)
  assert np.all(attention[mask] > 0.0)
  # Permuting each sentence's words (with their mask) changes nothing but the attention order.
  order = np.stack([rng.permutation(L) for _ in range(N)])
  shuffled = batch._replace(tokens=jnp.asarray(np.take_along_axis(tokens, order, 1), jnp.int32),
                            mask=jnp.asarray(np.take_along_axis(mask, order, 1)))
  out2 = _apply(params, shuffled)
  np.testing.assert_allclose(out2.logits, out.logits, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(out2.context, out.context, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(out2.attention, np.take_along_axis(attention, order, 1), rtol=1e-12)


_score_grads = jax.jit(jax.grad(
    lambda s, p, b: models.make_loss(models.lu.apply)(
        {**p, "keys": p["keys"] + jnp.outer(s, p["query"]) / jnp.dot(p["query"], p["query"])},
        b)[0]))


@given(seed=st.integers(0, 2**16), classifier=st.sampled_from(["tc", "tl"]))
def test_score_gradients_sum_to_zero_over_the_vocabulary(seed, classifier):
  # Σ_w ∂L/∂s_w = Σ_i Σ_p a_ip (v_ip − v̄_i)ᵀh_i = 0: with a fixed query GD moves the
  # scores along a plane, Σ_w Δs_w = 0, which fixes the non-topic mean |Δs| (Assumption 1).
  rng = np.random.default_rng(seed)
  params = _random_params(rng, classifier)
  tokens = rng.integers(0, V, size=(N, L))
  mask = rng.random((N, L)) >= 0.3
  mask[:, 0] = True
  labels = rng.integers(0, J, size=N)
  batch = tasks.Batch(jnp.asarray(tokens, jnp.int32), jnp.asarray(mask), jnp.asarray(labels, jnp.int32))
  g = np.asarray(_score_grads(jnp.zeros(V), params, batch))
  assert np.max(np.abs(g)) > 1e-6
  np.testing.assert_allclose(g.sum(), 0.0, atol=1e-13 * np.abs(g).sum())


@pytest.fixture(scope="module")
def single(tiny_run):
  """One sweep point, jitted; ``assert_max_traces`` inside jit makes a retrace raise."""
  return jax.jit(chex.assert_max_traces(tiny_run.run, n=1))


def _point(tiny_run, i):
  return jax.tree.map(lambda x: x[i], tiny_run.points)


def test_vmapped_sweep_equals_separate_runs(tiny_run, single):
  swept = tiny_run.sweep                                 # dynamics.run_sweep: jit(vmap(run))
  n_records = tiny_run.train_cfg.n_records
  assert swept.observables["score"].shape == (3, n_records, 4)
  assert swept.t.shape == (3, n_records)
  for i in range(3):
    alone = single(_point(tiny_run, i))
    for a, b in zip(jax.tree.leaves(swept), jax.tree.leaves(alone)):
      np.testing.assert_allclose(a[i], b, rtol=1e-10, atol=1e-13)
  # The runs differ from each other (different seeds and learning rates).
  assert not np.allclose(swept.observables["loss"][0], swept.observables["loss"][1])


def test_a_new_point_does_not_recompile(tiny_run, single):
  """Another seed key and learning rate reuse the compiled run (``assert_max_traces``) and
  give another trajectory. (Calling it twice on one point and comparing would compare a
  value with itself; the runs' values are pinned by the sweep test above.)"""
  point = _point(tiny_run, 0)
  first = single(point)
  other = single(_point(tiny_run, 1))                    # would raise if it retraced
  assert not np.array_equal(np.asarray(other.observables["loss"]),
                            np.asarray(first.observables["loss"]))
  # The guard is live: a new input signature (float32 lr) forces a second trace.
  with pytest.raises(AssertionError):
    single(dict(point, lr=jnp.float32(0.5)))


def test_trajectory_at_t0_is_the_initial_state(tiny_run, single):
  model, record = tiny_run.model, tiny_run.record
  point = _point(tiny_run, 0)
  traj = single(point)
  np.testing.assert_array_equal(traj.t, tiny_run.train_cfg.record_steps())
  expected = jax.jit(lambda k: record(model.init(k), model.init(k)))(point["key"])
  for name, value in expected.items():
    np.testing.assert_allclose(traj.observables[name][0], value, rtol=1e-12, atol=1e-15,
                               err_msg=name)
  assert float(traj.observables["nontopic_max_abs_score_change"][0]) == 0.0
  # ... and later records have moved away from it.
  assert float(traj.observables["loss"][-1]) < float(traj.observables["loss"][0])
