"""The Jain & Wallace (2019) checks for a trained Lu model: τ statistics and adversarial attention.

For every test sentence: Kendall τ-b of attention vs gradient importance and
vs leave-one-out importance (:mod:`analysis.importance`), and the largest JSD
from the model's attention of an attention that changes the output by at most
``ε`` in TVD (:mod:`analysis.adversarial_search`). One call per trained model
(seed); :func:`summarise` pools seeds (per-seed means, then mean ± 95% CI over
seeds, :func:`analysis.replication.mean_ci`).

References:
  Jain & Wallace, "Attention is not Explanation", NAACL 2019. https://arxiv.org/abs/1902.10186
"""
from typing import Dict, Sequence

import jax
import numpy as np

from attndyn.analysis.adversarial_search import adversarial_attention
from attndyn.analysis.importance import attention_importance_tau, lu_forward
from attndyn.analysis.replication import mean_ci
from attndyn.tasks.batch import Batch

__all__ = ["STATS", "explain_model", "summarise", "explain_figure"]

STATS = ("tau_grad", "tau_loo", "adv_jsd", "adv_tvd")


def explain_model(params: dict, batch: Batch, normaliser: str, key: jax.Array, *,
                  eps: float = 0.01, steps: int = 100, restarts: int = 4) -> Dict[str, np.ndarray]:
  """Per-sentence ``tau_grad``, ``tau_loo``, ``adv_jsd``, ``adv_tvd`` ``[n]`` and ``attention [n, L]``."""
  taus = attention_importance_tau(params, batch, normaliser)
  _, attention = lu_forward(params, batch.tokens, batch.mask, normaliser)
  adv = jax.jit(lambda k: adversarial_attention(
      params["classifier"], params["embeddings"][batch.tokens], batch.mask, attention, k,
      eps=eps, steps=steps, restarts=restarts))(key)
  return {"tau_grad": taus.tau_grad, "tau_loo": taus.tau_loo, "adv_jsd": np.asarray(adv.jsd),
          "adv_tvd": np.asarray(adv.tvd), "attention": np.asarray(attention)}


def summarise(per_seed: Sequence[Dict[str, np.ndarray]]) -> Dict[str, dict]:
  """For each statistic: per-seed means over sentences, their mean ± 95% CI, and the pooled median.

  Returns:
    ``{stat: {"per_seed": [...], "mean": m, "ci95": h, "n_seeds": k, "median": med,
    "undefined": fraction of NaN sentences}}``.
  """
  out = {}
  for stat in STATS:
    values = [np.asarray(r[stat], np.float64) for r in per_seed]
    seed_means = [float(np.nanmean(v)) if np.isfinite(v).any() else float("nan") for v in values]
    pooled = np.concatenate(values)
    est = mean_ci(seed_means)
    out[stat] = {"per_seed": [m if np.isfinite(m) else None for m in seed_means], "mean": est.mean, "ci95": est.ci95, "n_seeds": est.n,
                 "median": float(np.nanmedian(pooled)) if np.isfinite(pooled).any() else None,
                 "undefined": float(np.mean(~np.isfinite(pooled)))}
  return out


def explain_figure(results: Dict[str, Sequence[Dict[str, np.ndarray]]], path, *, eps: float) -> None:
  """Histograms of τ (gradient, LOO) and of the adversarial JSD, one row per model label."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  labels = list(results)
  fig, axes = plt.subplots(len(labels), 3, figsize=(11, 2.8 * len(labels)), squeeze=False)
  for row, label in enumerate(labels):
    pooled = {s: np.concatenate([np.asarray(r[s], float) for r in results[label]]) for s in STATS}
    for col, (stat, title, bins) in enumerate((
        ("tau_grad", "Kendall τ-b: attention vs gradient", np.linspace(-1, 1, 41)),
        ("tau_loo", "Kendall τ-b: attention vs leave-one-out", np.linspace(-1, 1, 41)),
        ("adv_jsd", f"max JSD(adversarial, attention), output TVD ≤ {eps:g}",
         np.linspace(0, np.log(2), 36)))):
      ax = axes[row, col]
      v = pooled[stat][np.isfinite(pooled[stat])]
      ax.hist(v, bins=bins, color="C%d" % col)
      ax.set_title(f"{label}\n{title}", fontsize=8)
      ax.set_ylabel("sentences" if col == 0 else "")
      if v.size:
        ax.axvline(np.mean(v), color="k", lw=1, ls="--")
  fig.tight_layout()
  fig.savefig(path, dpi=110, format="png")
  plt.close(fig)
