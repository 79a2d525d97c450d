"""Corollary 1 (the SEN relation) of Lu et al. (2021) under sparsemax and 1.5-entmax attention.

With the derived eq (8) analogue ``ṡ_t = (1/F(s_t)) (v_t − ⟨v̄∖t⟩)ᵀ v̇_t``
(:mod:`dynamics.sparsemax_ode`, ``docs/sparsemax_sen.md``), the quantity

.. math:: Q_t = Φ(s_t) − ½\\|v_t − ⟨\\bar v(χ∖t)⟩_{Ψ_t}\\|^2, \\qquad Φ(s) = \\int_0^s F

is conserved, and from ``s_t(0) = 0``, ``v_t(0) ≈ 0`` the SEN relation is
``‖v_t‖ = √(2Φ(s_t))``:

* softmax: ``Φ = s + (e^s − 1)/m`` (eq 10);
* sparsemax: ``Φ = s²/2 + s/m`` for ``0 ≤ s ≤ 1``; at ``s = 1`` the topic word
  holds all the attention and its score gradient is exactly 0, so ``s`` stops
  while ``‖v_t‖`` keeps growing: the relation holds only up to ``s = 1``;
* 1.5-entmax: with ``x = s/2``,
  ``Φ = 2[x²/2 − ln(1 − x)/m + ∫_0^x du/(1 + √(m+1−mu²))]`` for ``0 ≤ x < 1``;
  ``Φ → ∞`` as ``s → 2``: the score approaches 2 but never reaches it.
"""
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.analysis.theorem1 import psi_mean
from attndyn.analysis.observables import topic_observables
from attndyn.analysis.sen import sen_norm
from attndyn.dynamics.sparsemax_ode import sparse_sen_ode
from attndyn.dynamics.train import TrainConfig, make_train
from attndyn.models import lu
from attndyn.models.lu import word_scores
from attndyn.models.objective import make_loss
from attndyn.tasks.errors import check
from attndyn.tasks.topic import TopicDataset

__all__ = ["FLAVOURS", "sen_potential", "sen_norm_flavour", "flavour_invariant",
           "flavour_observables", "sparse_sen_figure", "in_sen_phase", "sen_phase_error",
           "phase_invariant_drift", "gd_and_ode_point"]

FLAVOURS = ("softmax", "sparsemax", "entmax15")
_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


def sen_potential(score: jax.Array, m, normaliser: str) -> jax.Array:
  """``Φ(s) = ∫_0^s F``: ``½‖v_t‖²`` predicted from the score (see the module docstring).

  sparsemax: clipped to ``s ≤ 1`` (the score freezes there); 1.5-entmax:
  ``inf`` for ``s ≥ 2``. Negative scores give negative values (no SEN start).
  """
  check(normaliser in FLAVOURS, "normaliser", normaliser, f"one of {', '.join(FLAVOURS)}")
  s = jnp.asarray(score)
  if normaliser == "softmax":
    return s + jnp.expm1(s) / m
  if normaliser == "sparsemax":
    s = jnp.minimum(s, 1.0)
    return 0.5 * s**2 + s / m
  x = jnp.minimum(s / 2.0, 1.0)
  xs = jnp.minimum(x, 1.0 - 1e-12)
  u = 0.5 * xs[..., None] * (jnp.asarray(_GL_X, s.dtype) + 1.0)             # Gauss–Legendre on [0, x]
  integral = 0.5 * xs * jnp.sum(jnp.asarray(_GL_W, s.dtype) / (1.0 + jnp.sqrt(m + 1.0 - m * u**2)),
                                axis=-1)
  phi = 2.0 * (0.5 * xs**2 - jnp.log1p(-xs) / m + integral)
  return jnp.where(x >= 1.0, jnp.inf, phi)


def sen_norm_flavour(score: jax.Array, m, normaliser: str) -> jax.Array:
  """Predicted ``‖v_t‖ = √(2Φ(s_t))`` (clipped at 0), the Corollary 1 analogue."""
  if normaliser == "softmax":
    return sen_norm(score, m)
  return jnp.sqrt(jnp.maximum(2.0 * sen_potential(score, m, normaliser), 0.0))


def flavour_invariant(params: dict, dataset: TopicDataset, normaliser: str) -> jax.Array:
  """``[T]`` ``Q_t = Φ(s_t) − ½‖v_t − ⟨v̄(χ∖t)⟩‖²`` with ``v̄(χ∖t)`` the plain non-topic mean.

  The plain mean is the weighted one of every normaliser while the non-topic
  scores are equal (the paper's start, keys 0).
  """
  batch = dataset.train
  m = batch.tokens.shape[-1] - 1
  rest = (batch.mask & (batch.tokens != dataset.train_topic_word[:, None])).astype(
      params["embeddings"].dtype)
  qnorm = jnp.linalg.norm(params["query"])
  vbar = qnorm * jnp.einsum("nl,nld->nd", rest, params["embeddings"][batch.tokens]) / jnp.maximum(
      rest.sum(1), 1.0)[:, None]
  topic = jnp.arange(dataset.n_topic_words)
  s = word_scores(params)[topic]
  v = qnorm * params["embeddings"][topic]
  return sen_potential(s, m, normaliser) - 0.5 * jnp.sum((v - psi_mean(vbar, dataset)) ** 2, -1)


def flavour_observables(apply_fn, dataset: TopicDataset, normaliser: str):
  """:func:`analysis.topic_observables` with ``sen_norm`` and ``invariant`` of this normaliser."""
  base = topic_observables(apply_fn, dataset)
  m = dataset.train.tokens.shape[-1] - 1

  def record(params, params0):
    out = base(params, params0)
    out["sen_norm"] = sen_norm_flavour(out["score"], m, normaliser)
    out["invariant"] = flavour_invariant(params, dataset, normaliser)
    return out

  return record


def sparse_sen_figure(panels: dict, path, *, title: str = "") -> None:
  """One row per normaliser: ``‖v_t‖`` vs ``s_t`` (GD runs, the ODE, the derived relation), and
  ``s_t(t)``, ``‖v_t(t)‖`` for GD (solid) and the ODE (dashed).

  Args:
    panels: label -> dict with ``normaliser``, ``m``, ``steps [K]``, ``gd_score``,
      ``gd_norm``, ``ode_score``, ``ode_norm`` (each ``[R, K]``, one topic word per run).
    path: PNG to write.
  """
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(len(panels), 2, figsize=(10, 3.3 * len(panels)), squeeze=False)
  for row, (label, p) in enumerate(panels.items()):
    ax, bx = axes[row]
    gs, gn = np.asarray(p["gd_score"], float), np.asarray(p["gd_norm"], float)
    os_, on = np.asarray(p["ode_score"], float), np.asarray(p["ode_norm"], float)
    for r in range(gs.shape[0]):
      ax.plot(gs[r], gn[r], "-", color="C0", lw=1, alpha=0.7, label="GD" if r == 0 else None)
      ax.plot(os_[r], on[r], "--", color="C1", lw=1, alpha=0.9, label="ODE (eqs 7-8 analogue)"
              if r == 0 else None)
    hi = float(np.nanmax(gs))
    if p["normaliser"] == "entmax15":
      hi = min(hi, 1.999)
    grid = np.linspace(0.0, max(hi, 1e-3), 200)
    ax.plot(grid, np.asarray(sen_norm_flavour(grid, p["m"], p["normaliser"])), ":", color="k",
            lw=1.5, label="derived SEN relation")
    ax.set_xlabel("score $s_t$")
    ax.set_ylabel("$\\|v_t\\|$")
    ax.set_title(f"{label}: SEN", fontsize="medium")
    ax.legend(fontsize="x-small")
    steps = np.asarray(p["steps"], float)
    for r in range(gs.shape[0]):
      bx.plot(steps, gs[r], "-", color="C0", lw=1, label="$s_t$ GD" if r == 0 else None)
      bx.plot(steps, os_[r], "--", color="C1", lw=1, label="$s_t$ ODE" if r == 0 else None)
      bx.plot(steps, gn[r], "-", color="C2", lw=1, label="$\\|v_t\\|$ GD" if r == 0 else None)
      bx.plot(steps, on[r], "--", color="C3", lw=1, label="$\\|v_t\\|$ ODE" if r == 0 else None)
    bx.set_xlabel("epoch")
    bx.set_title(f"{label}: GD vs ODE", fontsize="medium")
    bx.legend(fontsize="x-small")
  if title:
    fig.suptitle(title, fontsize="medium")
  fig.tight_layout()
  fig.savefig(path, dpi=110, format="png")
  plt.close(fig)


def _phase_end(normaliser: str) -> float:
  """The score where the topic word takes all the attention (sparsemax 1, 1.5-entmax 2)."""
  return {"softmax": np.inf, "sparsemax": 1.0, "entmax15": 2.0}[normaliser]


def in_sen_phase(score, normaliser: str, *, lo: float = 0.2, margin: float = 0.05) -> np.ndarray:
  """Records where the derived relation is tested: ``lo ≤ s ≤ (1 − margin)·s_end``.

  ``lo`` skips the start, where ``‖v_t(0)‖ ≠ 0`` dominates the relative error;
  ``s_end`` is where the support becomes ``{t}``.
  """
  s = np.asarray(score, np.float64)
  return (s >= lo) & (s <= (1.0 - margin) * _phase_end(normaliser))


def sen_phase_error(score, emb_norm, m, normaliser: str, **kw) -> np.ndarray:
  """``[..., W]`` largest ``|‖v‖ − √(2Φ(s))|/√(2Φ(s))`` over the recorded times in the SEN phase.

  Args:
    score, emb_norm: ``[..., K, W]`` (time, then words); NaN where a word never enters the phase.
  """
  s = np.asarray(score, np.float64)
  pred = np.asarray(sen_norm_flavour(s, m, normaliser), np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    err = np.abs(np.asarray(emb_norm, np.float64) - pred) / pred
  err = np.where(in_sen_phase(s, normaliser, **kw), err, -np.inf)
  out = err.max(axis=-2)
  return np.where(np.isfinite(out), out, np.nan)


def phase_invariant_drift(q, score, normaliser: str, *, margin: float = 0.05) -> np.ndarray:
  """``[..., W]`` ``max |Q_t − Q_t(0)|`` over the records with ``s_t ≤ (1 − margin)·s_end``.

  The margin keeps out records interpolated from a solver step that crossed
  the support change (where ``Q`` is not conserved).
  """
  q = np.asarray(q, np.float64)
  inside = np.asarray(score, np.float64) <= (1.0 - margin) * _phase_end(normaliser)
  return np.max(np.where(inside, np.abs(q - q[..., :1, :]), 0.0), axis=-2)


def gd_and_ode_point(cfg: lu.LuModelConfig, dataset: TopicDataset, topic_words, normaliser: str,
                     train_cfg: TrainConfig, lr: float):
  """``one({"seed": s}) -> {"gd", "ode", "ode_failed_at"}``: from ``init(PRNGKey(s), cfg)``,
  full-batch GD (``train_cfg``) and the derived eqs (7)-(8) analogue
  (:func:`dynamics.sparsemax_ode.sparse_sen_ode`, ``form="sen"``, rate ``lr``, at GD's record
  steps), both recording :func:`flavour_observables` of ``topic_words``."""
  apply = lu.apply_for(cfg)
  record = flavour_observables(apply, dataset, normaliser)
  train = make_train(make_loss(apply), dataset.train, record, train_cfg, cfg.trainable())

  def one(inp):
    key = jax.random.PRNGKey(inp["seed"])
    params0 = lu.init(key, cfg)
    gd = train(params0, key).observables
    ode = sparse_sen_ode(params0, dataset.train, dataset.train_topic_word, topic_words, record,
                         lr=lr, ts=train_cfg.record_steps(), trainable=cfg.trainable(),
                         normaliser=normaliser, form="sen")
    return {"gd": gd, "ode": ode.observables, "ode_failed_at": ode.failed_at}

  return one
