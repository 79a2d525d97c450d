"""Figures of the Yang (CoNLL-2000 transformer tagger) experiments.

Each function draws one figure on the Agg backend (no global pyplot state),
saves one PNG and returns its path.

References:
  Yang, "Is Attention Points Out the Only 'Path'? An Analysis on Transformers", Section 5, Fig 1.
  Wiegreffe & Pinter, "Attention is not not Explanation", EMNLP 2019, Fig 5 (JSD vs TVD).
"""
import numpy as np

from attndyn.analysis import figure_io

__all__ = ["f1_curves", "adversary_scatter", "adversary_lambda", "attention_maps"]


def _figure(ncols: int = 1, width: float = 6.0):
  fig, axes = figure_io.grid(1, ncols, width, 4.5)
  return fig, axes[0]


def f1_curves(dev_f1, test_f1, path, title: str = ""):
  """Dev and test chunk F1 per epoch, one line per seed (``[S, E]`` each)."""
  fig, (ax,) = _figure()
  dev_f1, test_f1 = np.atleast_2d(dev_f1), np.atleast_2d(test_f1)
  epochs = np.arange(1, dev_f1.shape[1] + 1)
  for i, (d, t) in enumerate(zip(dev_f1, test_f1)):
    ax.plot(epochs, d, "--", color=f"C{i}", label=f"seed {i} dev")
    ax.plot(epochs, t, "-", color=f"C{i}", label=f"seed {i} test")
  ax.set_xlabel("epoch")
  ax.set_ylabel("chunk F1 (conlleval)")
  ax.legend(fontsize=8)
  ax.set_title(title, fontsize=10)
  return figure_io.save(fig, path, dpi=110)


def adversary_scatter(adv: dict, seeds, uniform, path, title: str = ""):
  """W&P Fig 5 style: attention JSD (x) vs prediction TVD (y) from the original model.

  Args:
    adv: ``{"lambda", "jsd", "tvd"}`` lists, one entry per λ (dotted line).
    seeds: ``(jsd [S-1], tvd [S-1])`` of the other seeds, or ``None``.
    uniform: ``(jsd, tvd)`` of the uniform-attention model.
  """
  fig, (ax,) = _figure()
  ax.plot(adv["jsd"], adv["tvd"], ":o", color="C0", label="adversary (λ)")
  for lam, x, y in zip(adv["lambda"], adv["jsd"], adv["tvd"]):
    ax.annotate(f"λ={lam:g}", (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
  if seeds is not None:
    ax.plot(seeds[0], seeds[1], "^", color="C1", ms=9, label="other random seed")
  ax.plot([uniform[0]], [uniform[1]], "s", color="C2", ms=9, label="uniform attention")
  ax.axvline(np.log(2), color="grey", lw=0.5)
  ax.set_xlabel("attention JSD from the original (per token, head)")
  ax.set_ylabel("prediction TVD from the original (per token)")
  ax.legend(fontsize=8)
  ax.set_title(title, fontsize=10)
  return figure_io.save(fig, path, dpi=110)


def adversary_lambda(adv: dict, orig_f1: float, path, title: str = ""):
  """Test F1 and attention JSD / KL(adv ‖ orig) of the adversary against λ."""
  fig, (a1, a2) = _figure(2, 5.0)
  lam = np.asarray(adv["lambda"])
  a1.plot(lam, adv["f1"], "o-", label="adversary")
  a1.axhline(orig_f1, color="grey", ls="--", label="original")
  a1.set_xlabel("λ")
  a1.set_ylabel("test chunk F1")
  a1.legend(fontsize=8)
  a2.plot(lam, adv["jsd"], "o-", label="JSD")
  a2.plot(lam, adv["tvd"], "s-", label="TVD (predictions)")
  a2.plot(lam, adv["kl_adv_orig"], "^-", label="KL(adv ‖ orig)")
  a2.set_xlabel("λ")
  a2.legend(fontsize=8)
  fig.suptitle(title, fontsize=10)
  return figure_io.save(fig, path, dpi=110)


def attention_maps(maps: dict, words, seg, path, title: str) -> str:
  """One panel per normaliser: the attention map (query rows) of one sentence, gold chunks boxed
  (``seg``: each word's chunk, :func:`analysis.structured_attention.chunk_segments`)."""
  fig, axes = figure_io.grid(1, len(maps), width=3.6, height=3.6)
  n = len(words)
  bounds = [j - 0.5 for j in range(1, n) if seg[j] != seg[j - 1]]
  for ax, (label, att) in zip(axes[0], maps.items()):
    ax.imshow(att[:n, :n], cmap="viridis", vmin=0.0, vmax=max(float(att[:n, :n].max()), 1e-12))
    for b in bounds:
      ax.axhline(b, color="w", lw=0.6)
      ax.axvline(b, color="w", lw=0.6)
    ax.set_xticks(range(n), words, rotation=90, fontsize="x-small")
    ax.set_yticks(range(n), words, fontsize="x-small")
    ax.set_title(label, fontsize="medium")
  return figure_io.finish(fig, axes, len(maps), path, title)
