"""The three classifiers of Lu et al. (2021), Section 5: FC, TC and TL.

* ``fc``: fixed linear, logits ``Uᵀν̄``; ``U`` with orthonormal columns (paper
  text, Theorem 2) or standard normal with a unit diagonal (authors' code).
* ``tc``: trainable linear, logits ``Uᵀν̄`` (no bias).
* ``tl``: ``U₂ᵀ ReLU(U₁ᵀν̄ + b₁) + b₂``.

Trainable weights start as PyTorch's ``nn.Linear`` does, uniform in
``±1/sqrt(fan_in)``, which is what the paper's PyTorch experiments used.
"""
import jax
import jax.numpy as jnp

from attndyn.models.orthogonal import qr

__all__ = ["CLASSIFIERS", "LINEAR_CLASSIFIERS", "FC_INITS", "init_classifier", "apply_classifier"]

CLASSIFIERS = ("fc", "tc", "tl")
# The linear ones (logits Uᵀν̄): the reduced ODE compiles them with other XLA options, and
# the reproductions apply them with the closed-form linear head.
LINEAR_CLASSIFIERS = ("fc", "tc")
FC_INITS = ("orthonormal", "randn_unit_diag")


def _uniform(key, shape, fan_in, dtype):
  bound = 1.0 / jnp.sqrt(fan_in)
  return jax.random.uniform(key, shape, dtype, -bound, bound)


def init_classifier(key: jax.Array, kind: str, in_dim: int, n_classes: int, *,
                    hidden_dim: int = 10, fc_init: str = "orthonormal",
                    dtype=jnp.float32) -> dict:
  """Initial classifier parameters.

  Args:
    key: PRNG key.
    kind: ``"fc"``, ``"tc"`` or ``"tl"``.
    in_dim: context dimension d.
    n_classes: number of topics J.
    hidden_dim: TL hidden width (the paper: 10).
    fc_init: ``"orthonormal"`` or ``"randn_unit_diag"`` (FC only).
    dtype: parameter dtype.

  Returns:
    ``{"U": [d, J]}`` for fc/tc; ``{"U1": [d, H], "b1": [H], "U2": [H, J], "b2": [J]}`` for tl.
  """
  if kind == "fc":
    if fc_init == "orthonormal":
      # Orthonormal columns (needs J <= d); QR of a Gaussian matrix.
      q, r = qr(jax.random.normal(key, (in_dim, n_classes), dtype))
      return {"U": q * jnp.sign(jnp.diagonal(r))[None, :]}
    u = jax.random.normal(key, (in_dim, n_classes), dtype)
    diag = jnp.arange(min(in_dim, n_classes))
    return {"U": u.at[diag, diag].set(1.0)}
  if kind == "tc":
    return {"U": _uniform(key, (in_dim, n_classes), in_dim, dtype)}
  if kind == "tl":
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return {
        "U1": _uniform(k1, (in_dim, hidden_dim), in_dim, dtype),
        "b1": _uniform(k2, (hidden_dim,), in_dim, dtype),
        "U2": _uniform(k3, (hidden_dim, n_classes), hidden_dim, dtype),
        "b2": _uniform(k4, (n_classes,), hidden_dim, dtype),
    }
  raise ValueError(f"unknown classifier {kind!r}; allowed: {CLASSIFIERS}")


def apply_classifier(params: dict, context: jax.Array) -> jax.Array:
  """Logits ``[..., J]`` of the context ``[..., d]`` (structure of ``params`` picks the form)."""
  if "U" in params:
    return context @ params["U"]
  hidden = jax.nn.relu(context @ params["U1"] + params["b1"])
  return hidden @ params["U2"] + params["b2"]
