"""Per-instance adversarial attention (Jain & Wallace 2019, Section 4.2, Algorithm 2).

For one sentence with attention ``a`` and output ``ŷ(a)``, search an attention
``ã`` as different from ``a`` as possible while the output barely changes:

.. math:: \\max_{ã ∈ Δ} \\mathrm{JSD}(ã, a) \\quad \\text{s.t.} \\quad
   \\mathrm{TVD}(ŷ(ã), ŷ(a)) ≤ ε,

with everything but the attention held fixed (``ŷ(ã) = softmax(f(Σ_w ã_w ν_w))``).
``ã = softmax(z)`` over the real words (the adversary may use any point of the
simplex's interior whatever the model's normaliser). The search is projected
gradient ascent on ``z`` from a few random starts around ``log a``:

1. ascent direction ``g = ∇_z JSD(ã, a)``; when the constraint is nearly
   active (``TVD > ε/2``) and ``g`` points out of the feasible set, ``g`` is
   projected onto the tangent plane of ``TVD = const`` (``g − (g·n)n/‖n‖²``,
   ``n = ∇_z TVD``);
2. a normalised step ``z' = z + η g/‖g‖``;
3. feasibility by bisection on the segment ``[z, z']``: the largest fraction
   of the step with ``TVD ≤ ε`` is taken (the current ``z`` is feasible).

Every iterate is feasible; the best JSD seen is returned. J&W instead
maximise a penalised objective with Adam; the feasible-iterate search here
gives a certified lower bound on the constrained maximum.

The *global* adversary of Wiegreffe & Pinter, as Yang trains it for the transformer tagger,
is a whole model trained against the original instead: :func:`adversary_loss`.

References:
  Jain & Wallace, "Attention is not Explanation", NAACL 2019. https://arxiv.org/abs/1902.10186
  Wiegreffe & Pinter, "Attention is not not Explanation", EMNLP 2019, Section 4.
  Yang, "Is Attention Points Out the Only 'Path'? An Analysis on Transformers", Section 4.2.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attndyn.analysis.divergences import jsd, kl, tvd
from attndyn.models import transformer_tagger as tt
from attndyn.models.attention import softmax_attention
from attndyn.models.classifiers import apply_classifier
from attndyn.tasks.errors import check

__all__ = ["AdversarialResult", "adversarial_attention", "adversary_loss"]


class AdversarialResult(NamedTuple):
  """Per sentence: ``jsd [n]`` (best), ``tvd [n]`` (its output change ≤ ε), ``attention [n, L]``."""
  jsd: jax.Array
  tvd: jax.Array
  attention: jax.Array


def _one_sentence(classifier, emb, mask, a, key, *, eps, steps, step_size, restarts,
                  bisections, init_noise):
  """Best feasible adversarial attention of one sentence (``emb [L, d]``, ``a [L]``)."""
  def probs_of(weights):
    return jax.nn.softmax(apply_classifier(classifier, weights @ emb))

  y0 = probs_of(a)
  z_base = jnp.where(mask, jnp.log(jnp.maximum(a, 1e-6)), 0.0)

  def attn(z):
    return softmax_attention(z, mask)

  def out_tvd(z):
    return tvd(probs_of(attn(z)), y0)

  def div(z):
    return jsd(attn(z), a)

  def feasible_point(start, end):
    """``start + t(end − start)`` for the largest feasible ``t`` found by bisection (start feasible)."""
    def body(_, bounds):
      lo, hi = bounds
      mid = 0.5 * (lo + hi)
      ok = out_tvd(start + mid * (end - start)) <= eps
      return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)
    ok_full = out_tvd(end) <= eps
    lo, _ = jax.lax.fori_loop(0, bisections, body, (jnp.zeros((), start.dtype),
                                                        jnp.ones((), start.dtype)))
    return jnp.where(ok_full, end, start + lo * (end - start))

  def search(key):
    noise = init_noise * jax.random.normal(key, z_base.shape, z_base.dtype)
    z0 = feasible_point(z_base, z_base + jnp.where(mask, noise, 0.0))

    def step(carry, _):
      z, best_z, best = carry
      g = jnp.where(mask, jax.grad(div)(z), 0.0)
      n = jnp.where(mask, jax.grad(out_tvd)(z), 0.0)
      active = (out_tvd(z) > 0.5 * eps) & (jnp.dot(g, n) > 0)
      g = jnp.where(active, g - jnp.dot(g, n) / jnp.maximum(jnp.dot(n, n), 1e-30) * n, g)
      g = g / jnp.maximum(jnp.linalg.norm(g), 1e-30)
      z = feasible_point(z, z + step_size * g)
      d = div(z)
      better = d > best
      return (z, jnp.where(better, z, best_z), jnp.where(better, d, best)), None

    (_, best_z, best), _ = jax.lax.scan(step, (z0, z0, div(z0)), None, length=steps)
    return best, out_tvd(best_z), attn(best_z)

  best, t, att = jax.vmap(search)(jax.random.split(key, restarts))
  i = jnp.argmax(best)
  return best[i], t[i], att[i]


def adversarial_attention(classifier: dict, embeddings: jax.Array, mask: jax.Array,
                          attention: jax.Array, key: jax.Array, *, eps: float = 0.01,
                          steps: int = 100, step_size: float = 0.5, restarts: int = 4,
                          bisections: int = 20, init_noise: float = 1.0) -> AdversarialResult:
  """Maximum-JSD attention at output TVD ≤ ``eps`` for every sentence (vmapped).

  Args:
    classifier: the classifier parameters (``models.classifiers``).
    embeddings: ``[n, L, d]`` the embeddings of each sentence's words.
    mask: ``[n, L]`` real words.
    attention: ``[n, L]`` the model's attention.
    key: PRNG key of the random starts.
    eps: the output-change budget (J&W: 0.01).
    steps: ascent steps per start.
    step_size: ``η``, the length of a step in ``z``.
    restarts: random starts per sentence.
    bisections: bisection steps of the feasibility search.
    init_noise: standard deviation of the random start around ``log a``.

  Returns:
    An :class:`AdversarialResult`.
  """
  check(0 < eps < 1, "eps", eps, "a number in (0, 1)")
  keys = jax.random.split(key, embeddings.shape[0])
  fn = lambda e, m, a, k: _one_sentence(classifier, e, m, a, k, eps=eps, steps=steps,
                                        step_size=step_size, restarts=restarts,
                                        bisections=bisections, init_noise=init_noise)
  best, t, att = jax.vmap(fn)(embeddings, mask, attention, keys)
  return AdversarialResult(best, t, att)


def adversary_loss(cfg: tt.TaggerConfig, lam, orig_params, match: str):
  """``loss(params, batch, dropout_key) -> scalar``: prediction match minus λ·KL(adversary ‖ original).

  .. math:: \\mathcal L = \\mathrm{fit}(y_{adv}, y_{orig}) - λ\\,\\overline{\\mathrm{KL}}(α_{adv} \\,\\|\\, α_{orig})

  ``fit``: with ``match="nll"`` the NLL of the original's argmax tags (Yang's
  "NLLoss(y1, y2)"), else the mean TVD of the two output distributions; the KL of each
  token's attention row is averaged over real tokens and heads. The original (``orig_params``,
  frozen) is recomputed on every batch.
  """
  def loss(params, b, dropout_key):
    orig = tt.apply(orig_params, b, cfg)
    orig = jax.tree.map(jax.lax.stop_gradient, orig)
    adv = tt.apply(params, b, cfg, key=dropout_key)
    m = b.mask.astype(adv.logits.dtype)
    if match == "nll":
      fit = tt.token_nll(adv.logits, jnp.argmax(orig.logits, -1), b.mask)
    else:
      tv = tvd(jax.nn.softmax(adv.logits, -1), jax.nn.softmax(orig.logits, -1))
      fit = jnp.sum(tv * m) / jnp.maximum(jnp.sum(m), 1.0)
    kl_rows = kl(adv.attention, orig.attention)                         # [B, H, L]
    kl_mean = jnp.sum(kl_rows * m[:, None, :]) / jnp.maximum(jnp.sum(m) * cfg.n_heads, 1.0)
    return fit - lam * kl_mean
  return loss
