"""Eqs (1)-(4) of Lu et al. (2021): the closed-form gradient-descent update of every word.

One full-batch gradient-descent step ``θ ← θ − τ∇L`` on the mean cross-entropy
``L = (1/|Ψ|) Σ_{(χ,y)∈Ψ} l(χ, y)`` moves the embedding and the key of a word
``w`` only through the sentences that contain it. Writing
``h(χ) = ∇_{ν̄(χ)} l(χ, y)`` (the classifier's gradient at the context vector;
the paper's ``h(v̄(χ); y)``) and ``a_w(χ) = e^{s_w}/Z(χ)`` (the attention on
``w``), the step is a sum over sentences of ``h`` weighted by attention.

Sign convention: the paper writes eqs (1)-(4) without a minus sign (its ``Δ``
is read as the amount subtracted); here ``Δ`` is the actual change
``θ_{n+1} − θ_n``, so every update carries ``−τ``. The relation between
``Δs_w`` and ``Δv_w`` (the core of Lemma 2 and Theorem 1) is the same under
either convention because both sides flip sign together.

The formulas hold for every word, not only topic words: for a word that occurs
``c`` times in a sentence each occurrence contributes, i.e. the sum is
weighted by the number of occurrences. Masked (padding) positions have
attention 0 and contribute nothing.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Section 4, eqs (1)-(4). https://arxiv.org/abs/2011.10036
"""
import jax
import jax.numpy as jnp
import optax

from attndyn.models.classifiers import apply_classifier
from attndyn.models.lu import apply
from attndyn.tasks.batch import Batch

__all__ = ["context_gradients", "closed_form_updates"]


def context_gradients(classifier: dict, context: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-sentence ``h(χ) = ∇_{ν̄(χ)} l(χ, y)`` of the cross-entropy, by ``jax.grad``.

  .. math:: h(\\bar v(\\chi); y) = \\nabla_{\\bar\\nu(\\chi)}
     \\left[-\\log \\mathrm{softmax}\\big(c(\\bar\\nu(\\chi))\\big)_y\\right]

  This is the classifier's part of the model (FC, TC or TL alike), not part of
  the closed form; it is the per-sample loss ``l``, not the batch mean.

  Args:
    classifier: classifier parameters (``params["classifier"]``).
    context: ``[n, d]`` context vectors ``ν̄(χ)``.
    labels: ``[n]`` int labels.

  Returns:
    ``[n, d]`` gradients ``h(χ)``.
  """
  def sample_loss(c, y):
    return optax.softmax_cross_entropy_with_integer_labels(apply_classifier(classifier, c), y)
  return jax.vmap(jax.grad(sample_loss))(context, labels)


def closed_form_updates(params: dict, batch: Batch, lr) -> dict:
  """One gradient-descent step of every word's embedding and key, eqs (1)-(4).

  With ``Δ`` the actual change (descent sign; the paper omits the minus),
  ``η = τ‖q‖``, ``v = ‖q‖ν`` and ``s_w = qᵀκ_w``:

  .. math::
     \\Delta\\nu_w &= -\\frac{\\tau}{|\\Psi|}\\sum_{(\\chi,y)\\in\\Psi_w}
        h(\\chi)\\,\\frac{e^{s_w}}{Z(\\chi)} && (1) \\\\
     \\Delta\\kappa_w &= -\\frac{\\tau}{|\\Psi|}\\sum_{(\\chi,y)\\in\\Psi_w}
        q\\,(\\nu_w - \\bar\\nu(\\chi))^T h(\\chi)\\,\\frac{e^{s_w}}{Z(\\chi)} && (2) \\\\
     \\Delta v_w &= -\\frac{\\eta}{|\\Psi|}\\sum_{(\\chi,y)\\in\\Psi_w}
        h(\\chi)\\,\\frac{e^{s_w}}{Z(\\chi)} && (3) \\\\
     \\Delta s_w &= -\\frac{\\eta}{|\\Psi|}\\sum_{(\\chi,y)\\in\\Psi_w}
        (v_w - \\bar v(\\chi))^T h(\\chi)\\,\\frac{e^{s_w}}{Z(\\chi)} && (4)

  where ``Ψ_w`` are the sentences containing ``w`` (a sentence with ``c``
  copies of ``w`` counts ``c`` times). With a fixed query, one GD step
  changes ``v_w`` and ``s_w`` by exactly ``Δv_w`` and ``Δs_w`` (both are linear
  in ``ν_w`` and ``κ_w``). The updates are those of the unconstrained gradient:
  for a frozen group GD applies zero instead.

  Args:
    params: Lu-model parameters ``{"embeddings": [V, d], "keys": [V, d'],
      "query": [d'], "classifier": {...}}``.
    batch: the full training set Ψ (``tokens [n, L]``, ``mask``, ``labels``).
    lr: learning rate τ (float or traced scalar).

  Returns:
    ``{"embeddings": [V, d] Δν, "keys": [V, d'] Δκ, "v": [V, d] Δv, "s": [V] Δs}``.

  References:
    https://arxiv.org/abs/2011.10036 (Section 4, eqs 1-4)
  """
  n_words = params["embeddings"].shape[0]
  query = params["query"]
  out = apply(params, batch)
  h = context_gradients(params["classifier"], out.context, batch.labels)   # [n, d]
  weight = out.attention                                                   # [n, L] e^{s_w}/Z(χ)
  coef = -lr / batch.tokens.shape[0]                                       # −τ/|Ψ|
  tokens = batch.tokens.reshape(-1)
  # (1): scatter each occurrence's h(χ) e^{s_w}/Z(χ) onto its word.
  per_position = weight[..., None] * h[:, None, :]                         # [n, L, d]
  delta_emb = coef * jax.ops.segment_sum(
      per_position.reshape(-1, per_position.shape[-1]), tokens, num_segments=n_words)
  # (2): the scalar (ν_w − ν̄(χ))ᵀ h(χ) e^{s_w}/Z(χ) per occurrence, times q.
  offset = params["embeddings"][batch.tokens] - out.context[:, None, :]    # [n, L, d]
  per_position_score = weight * jnp.einsum("nld,nd->nl", offset, h)        # [n, L]
  delta_key_coef = coef * jax.ops.segment_sum(per_position_score.reshape(-1), tokens,
                                              num_segments=n_words)        # [V]
  qnorm = jnp.linalg.norm(query)
  return {
      "embeddings": delta_emb,
      "keys": delta_key_coef[:, None] * query[None, :],
      # (3): Δv = ‖q‖Δν, i.e. η = τ‖q‖ in front of the same sum.
      "v": qnorm * delta_emb,
      # (4): Δs = qᵀΔκ; ‖q‖²(ν_w − ν̄)ᵀh = ‖q‖ (v_w − v̄)ᵀh, so the prefactor is η.
      "s": qnorm ** 2 * delta_key_coef,
  }
