"""Kendall τ-b, gradient / leave-one-out importance, adversarial attention, `attndyn explain`.

The successful `attndyn explain` path trains a model (tens of CPU seconds); it is exercised by
`attndyn explain --preset quick ...` (see the README section), not here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from attndyn import models
from attndyn.analysis.adversarial_search import adversarial_attention
from attndyn.analysis.divergences import jsd, tvd
from attndyn.analysis.importance import gradient_importance, leave_one_out_importance, lu_forward
from attndyn.analysis.kendall import kendall_tau_b
from attndyn import cli
from attndyn.tasks.batch import Batch


def _tau_b_by_definition(x, y):
  """τ-b from its definition, pair by pair (the test oracle)."""
  n = len(x)
  nc = nd = tx = ty = 0
  for i in range(n):
    for j in range(i + 1, n):
      a, b = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
      nc += a * b > 0
      nd += a * b < 0
      tx += a == 0
      ty += b == 0
  n0 = n * (n - 1) / 2
  return (nc - nd) / np.sqrt((n0 - tx) * (n0 - ty))


def test_kendall_tau_b_with_ties_masks_and_degenerate_rows():
  x = np.array([1, 2, 2, 3, 5.0])
  y = np.array([2, 1, 3, 3, 4.0])
  np.testing.assert_allclose(kendall_tau_b(x, y), 2 / 3)              # 6 − 2 over √(9·9)
  np.testing.assert_allclose(kendall_tau_b(x, y), _tau_b_by_definition(x, y))
  rng = np.random.default_rng(0)
  xs, ys = rng.integers(0, 4, (20, 7)).astype(float), rng.integers(0, 3, (20, 7)).astype(float)
  got = kendall_tau_b(xs, ys)
  want = [_tau_b_by_definition(a, b) if np.ptp(a) and np.ptp(b) else np.nan for a, b in zip(xs, ys)]
  np.testing.assert_allclose(got, want)
  mask = np.array([True, True, False, True, True])
  np.testing.assert_allclose(kendall_tau_b(x, y, mask), _tau_b_by_definition(x[mask], y[mask]))
  np.testing.assert_allclose(kendall_tau_b(x, -x), -1.0)
  assert np.isnan(kendall_tau_b(np.ones(4), np.arange(4.0)))
  np.testing.assert_allclose(kendall_tau_b(xs[0], ys[0]), scipy.stats.kendalltau(xs[0], ys[0])[0])


@pytest.fixture(scope="module")
def model():
  cfg = models.LuModelConfig(n_words=12, n_classes=3, embed_dim=4, key_dim=3, embed_std=1.0,
                             key_std=1.0)
  params = models.lu.init(jax.random.PRNGKey(0), cfg, jnp.float64)
  params["classifier"] = jax.tree.map(lambda x: 3 * x, params["classifier"])
  tokens = jax.random.randint(jax.random.PRNGKey(1), (4, 5), 0, 12)
  mask = jnp.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
  return params, Batch(tokens, mask, jnp.zeros(4, jnp.int32))


@pytest.mark.parametrize("normaliser", ["softmax", "sparsemax"])
def test_gradient_importance_is_the_derivative_along_each_one_hot_input(model, normaliser):
  params, batch = model
  grad = jax.jit(gradient_importance, static_argnums=2)(params, batch, normaliser)
  probs, attn = lu_forward(params, batch.tokens, batch.mask, normaliser)
  pred = jnp.argmax(probs, -1)
  emb = params["embeddings"][batch.tokens]

  def prob_with(scale):   # [n, L] scales of each position's embedding, attention held fixed
    ctx = jnp.einsum("nl,nld->nd", attn, emb * scale[..., None])
    p = jax.nn.softmax(models.apply_classifier(params["classifier"], ctx))
    return jnp.take_along_axis(p, pred[:, None], axis=-1)[:, 0]

  eye = jnp.eye(5)
  plus = jax.vmap(lambda e: prob_with(1 + 1e-6 * e))(eye)       # [pos, n]
  minus = jax.vmap(lambda e: prob_with(1 - 1e-6 * e))(eye)
  fd = jnp.abs((plus - minus) / 2e-6).T
  np.testing.assert_allclose(grad, jnp.where(batch.mask, fd, 0.0), atol=1e-8)
  assert float(grad.max()) > 1e-3


@pytest.mark.parametrize("normaliser", ["softmax", "entmax15"])
def test_leave_one_out_equals_recomputing_without_the_word(model, normaliser):
  params, batch = model
  loo = jax.jit(leave_one_out_importance, static_argnums=2)(params, batch, normaliser)
  full, _ = lu_forward(params, batch.tokens, batch.mask, normaliser)
  i = 2                                               # 4 real words
  for pos in range(4):
    keep = [p for p in range(4) if p != pos]
    shorter, _ = lu_forward(params, batch.tokens[i:i + 1, keep], jnp.ones((1, 3), bool), normaliser)
    np.testing.assert_allclose(loo[i, pos], tvd(shorter[0], full[i]), atol=1e-12)
  assert float(loo[i, 4]) == 0.0 and float(loo[3, 2]) == 0.0


def test_adversarial_search_stays_feasible_and_finds_free_directions(model):
  params, batch = model
  _, attn = lu_forward(params, batch.tokens, batch.mask)
  emb = params["embeddings"][batch.tokens]
  search = jax.jit(adversarial_attention, static_argnames=("eps", "steps", "restarts"))
  res = search(params["classifier"], emb, batch.mask, attn, jax.random.PRNGKey(2), eps=0.01,
               steps=30, restarts=2)
  assert bool(jnp.all(res.tvd <= 0.01 + 1e-12))
  assert bool(jnp.all((res.jsd >= 0) & (res.jsd <= np.log(2))))
  np.testing.assert_allclose(res.jsd, jsd(res.attention, attn), atol=1e-9)
  assert bool(jnp.all(jnp.where(batch.mask, True, res.attention == 0)))
  # The output cannot see the attention when every word has the same embedding: the adversary is
  # then free, and moves the attention far (towards a corner of the simplex).
  same = jnp.broadcast_to(emb[:, :1], emb.shape)
  free = search(params["classifier"], same, batch.mask, attn, jax.random.PRNGKey(3), eps=0.01,
                steps=30, restarts=2)
  assert float(jnp.min(free.jsd)) > 0.25
  assert float(jnp.min(free.jsd)) > float(jnp.max(res.jsd))


def test_explain_cli_rejects_bad_input(tmp_path, capsys):
  assert cli.main(["explain", "--preset", "quick", "--out", str(tmp_path / "a"),
                   "--normaliser", "sparsemaxx"]) == 2
  assert "--normaliser = 'sparsemaxx'" in capsys.readouterr().err
  assert cli.main(["explain", "--run", str(tmp_path), "--out", str(tmp_path / "b")]) == 2
  assert "no summary.json" in capsys.readouterr().err
  for text, expected in (('{"schema', "is not valid JSON"), ("[]", "has no schema_version")):
    (tmp_path / "summary.json").write_text(text)
    assert cli.main(["explain", "--run", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
  for flag in ("--restarts", "--adv-steps"):
    assert cli.main(["explain", "--preset", "quick", "--out", str(tmp_path / "d"), flag, "0"]) == 2
    assert f"{flag} = 0 is not allowed: a positive integer" in capsys.readouterr().err
