"""The channel-major classifiers are the row-major ones transposed, values and gradients."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attndyn.models.channel_major import apply_classifier_channels, channel_mix, cross_entropy_channels
from attndyn.models.classifiers import apply_classifier, init_classifier
from attndyn.models.objective import cross_entropy

TOL = dict(rtol=1e-10, atol=1e-12)


def _case(seed, kind, scale):
  k_cls, k_ctx, k_lab = jax.random.split(jax.random.PRNGKey(seed), 3)
  params = init_classifier(k_cls, kind, 5, 3, hidden_dim=4, dtype=jnp.float64)
  context = scale * jax.random.normal(k_ctx, (7, 5), jnp.float64)
  labels = jax.random.randint(k_lab, (7,), 0, 3)
  return params, context, labels


@jax.jit
def _both(params, context, labels):
  """Logits, loss and gradients in both layouts (one compile per classifier kind)."""
  def dense(ctx, p):
    return cross_entropy(apply_classifier(p, ctx), labels)

  def channels(ctx_t, p):
    return cross_entropy_channels(apply_classifier_channels(p, ctx_t), labels)

  return ((apply_classifier_channels(params, context.T), apply_classifier(params, context).T),
          (channels(context.T, params), dense(context, params)),
          (jax.grad(channels, argnums=(0, 1))(context.T, params),
           jax.grad(dense, argnums=(0, 1))(context, params)))


@pytest.mark.parametrize("kind", ["fc", "tc", "tl"])
@given(seed=st.integers(0, 2**16), scale=st.sampled_from([1e-3, 1.0, 30.0]))
def test_channel_major_loss_and_gradients_equal_row_major(kind, seed, scale):
  (logits_c, logits_d), (loss_c, loss_d), (g_c, g_d) = _both(*_case(seed, kind, scale))
  np.testing.assert_allclose(logits_c, logits_d, **TOL)
  np.testing.assert_allclose(loss_c, loss_d, **TOL)
  np.testing.assert_allclose(g_c[0], g_d[0].T, **TOL)
  for got, want in zip(jax.tree.leaves(g_c[1]), jax.tree.leaves(g_d[1])):
    np.testing.assert_allclose(got, want, **TOL)


def test_channel_mix_vjp_matches_autodiff_of_the_product(key):
  """The hand-written VJP of ``wᵀx`` is the transpose of the matrix product, also under vmap."""
  kw, kx, kg = jax.random.split(key, 3)
  w = jax.random.normal(kw, (3, 5, 2), jnp.float64)
  x = jax.random.normal(kx, (3, 5, 7), jnp.float64)
  g = jax.random.normal(kg, (3, 2, 7), jnp.float64)
  got = jax.vmap(lambda w_, x_, g_: jax.vjp(channel_mix, w_, x_)[1](g_))(w, x, g)
  want = jax.vmap(lambda w_, x_, g_: jax.vjp(lambda a, b: a.T @ b, w_, x_)[1](g_))(w, x, g)
  for a, b in zip(got, want):
    np.testing.assert_allclose(a, b, **TOL)
