"""The FC/TC/TL classifiers and their cross-entropy on channel-major contexts ``[d, n]``.

The same maps as :func:`models.classifiers.apply_classifier` and
:func:`models.objective.cross_entropy`, laid out with the sample axis last.
Under ``jax.vmap`` over seeds (every seed its own classifier), the row-major
form ``context @ U`` becomes a batch of tiny ``[n, d] × [d, J]`` matrix
products, which XLA:CPU runs one seed at a time; here every operation is an
elementwise sum of ``[S, n]`` rows or a sum over the last (sample) axis, which
it vectorises. Used by the reduced ODE's vector field, which runs hundreds of
times per solve for every seed of a sweep.

:func:`channel_mix` carries its own VJP so that autodiff of these forms stays
in the same layout (the transpose of a sum of outer products is again one).
"""
import functools

import jax
import jax.numpy as jnp

__all__ = ["channel_mix", "apply_classifier_channels", "cross_entropy_channels"]


def _mix(w: jax.Array, x: jax.Array) -> jax.Array:
  rows = [w[a][:, None] * x[a][None, :] for a in range(w.shape[0])]
  return functools.reduce(jnp.add, rows)


@jax.custom_vjp
def channel_mix(w: jax.Array, x: jax.Array) -> jax.Array:
  """``[K, n]``: ``out[k, i] = Σ_a w[a, k] x[a, i]`` (i.e. ``wᵀx``), an unrolled sum over ``a``.

  Args:
    w: ``[A, K]`` weights.
    x: ``[A, n]`` channel-major inputs.
  """
  return _mix(w, x)


def _mix_fwd(w, x):
  return _mix(w, x), (w, x)


def _mix_bwd(res, g):
  w, x = res
  return jnp.einsum("an,kn->ak", x, g), _mix(w.T, g)


channel_mix.defvjp(_mix_fwd, _mix_bwd)


def apply_classifier_channels(params: dict, context: jax.Array) -> jax.Array:
  """Logits ``[J, n]`` of channel-major contexts ``[d, n]``; equals ``apply_classifier(params, context.T).T``.

  ``U ᵀν̄`` for FC/TC; ``U₂ᵀ ReLU(U₁ᵀν̄ + b₁) + b₂`` for TL (Lu et al. 2021, Section 5).
  """
  if "U" in params:
    return channel_mix(params["U"], context)
  hidden = jax.nn.relu(channel_mix(params["U1"], context) + params["b1"][:, None])
  return channel_mix(params["U2"], hidden) + params["b2"][:, None]


def cross_entropy_channels(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean over samples of ``−log softmax(logits[:, i])[labels[i]]`` for logits ``[J, n]``.

  The log-sum-exp over the ``J`` classes is an unrolled sum of rows.
  """
  rows = [logits[j] for j in range(logits.shape[0])]
  top = jax.lax.stop_gradient(functools.reduce(jnp.maximum, rows))
  lse = top + jnp.log(functools.reduce(jnp.add, [jnp.exp(r - top) for r in rows]))
  picked = functools.reduce(jnp.add, [jnp.where(labels == j, r, 0.0) for j, r in enumerate(rows)])
  return jnp.mean(lse - picked)
