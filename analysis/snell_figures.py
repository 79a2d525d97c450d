"""The figures of ``attndyn reproduce snell`` (Snell et al.): training curves and bar charts.

Each function draws one PNG on the Agg backend (``matplotlib.figure.Figure`` with
``FigureCanvasAgg``; pyplot's global state is left alone) and returns its path.
"""
from typing import Optional, Sequence

import numpy as np

from attndyn.analysis import figure_io
from attndyn.analysis.ktiw import probe_alignment

__all__ = ["COLORS", "curve_panels", "rate_bars", "heatmaps", "alignment_example",
           "copying_figures", "relevance_figure"]

COLORS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6")


def _grid(nrows: int, ncols: int, width: float = 4.2, height: float = 3.2):
  return figure_io.grid(nrows, ncols, width, height)


def _save(fig, path) -> str:
  return figure_io.save(fig, path, dpi=110)


def curve_panels(panels: Sequence[dict], path, *, title: str = "", ncols: Optional[int] = None,
                 per_seed: bool = False) -> str:
  """One axis per panel ``{"title", "t", "curves": {label: [S, R]}, "ylabel", "vlines": [...]}``.

  Curves are drawn per seed (thin lines) when ``per_seed``, else as the mean
  over seeds with a min–max band. ``vlines`` (optional) are marked dashed.
  """
  ncols = ncols or len(panels)
  nrows = -(-len(panels) // ncols)
  fig, axes = _grid(nrows, ncols)
  for ax, p in zip(axes.ravel(), panels):
    t = np.asarray(p["t"])
    for c, (label, runs) in zip(COLORS, p["curves"].items()):
      runs = np.atleast_2d(np.asarray(runs, float))
      if per_seed:
        for i, r in enumerate(runs):
          ax.plot(t, r, color=c, lw=0.8, alpha=0.6, label=label if i == 0 else None)
      else:
        ax.fill_between(t, runs.min(0), runs.max(0), color=c, alpha=0.15, lw=0)
        ax.plot(t, runs.mean(0), color=c, lw=1.6, label=f"{label} (mean, min–max)")
    for v in p.get("vlines", ()):
      ax.axvline(v, color="k", ls="--", lw=0.8)
    ax.set_title(p["title"], fontsize=9)
    ax.set_xlabel(p.get("xlabel", "step"))
    ax.set_ylabel(p.get("ylabel", ""))
    ax.legend(fontsize=7)
  for ax in axes.ravel()[len(panels):]:
    ax.set_visible(False)
  if title:
    fig.suptitle(title, fontsize=10)
  return _save(fig, path)


def rate_bars(labels: Sequence[str], rates: Sequence[float], intervals: Sequence[tuple], path, *,
              title: str = "", ylabel: str = "rate") -> str:
  """Bars of proportions with (asymmetric) interval error bars."""
  fig, axes = _grid(1, 1, width=max(4.0, 1.1 * len(labels)), height=3.4)
  ax = axes[0, 0]
  r = np.asarray(rates, float)
  # a Wilson bound equals p̂ at 0/n and n/n up to rounding: clip so that the bars stay ≥ 0
  lo = np.maximum(r - np.asarray([i[0] for i in intervals]), 0.0)
  hi = np.maximum(np.asarray([i[1] for i in intervals]) - r, 0.0)
  ax.bar(range(len(r)), r, color=[COLORS[i % len(COLORS)] for i in range(len(r))],
         yerr=[lo, hi], capsize=4)
  ax.set_xticks(range(len(r)), labels, fontsize=8, rotation=15)
  ax.set_ylim(0, 1.05)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  return _save(fig, path)


def heatmaps(maps: Sequence[tuple], path, *, title: str = "", xticks=None, yticks=None) -> str:
  """Side-by-side heatmaps ``[(name, [T, L]), ...]`` of one sentence pair."""
  fig, axes = _grid(1, len(maps), width=3.6, height=3.4)
  for ax, (name, m) in zip(axes.ravel(), maps):
    ax.imshow(np.asarray(m, float), cmap="Greys", aspect="auto")
    ax.set_title(name, fontsize=9)
    if xticks is not None:
      ax.set_xticks(range(len(xticks)), xticks, rotation=90, fontsize=6)
    if yticks is not None:
      ax.set_yticks(range(len(yticks)), yticks, fontsize=6)
  if title:
    fig.suptitle(title, fontsize=10)
  return _save(fig, path)


def alignment_example(seed: dict, fixed: dict, src, src_mask, tgt, src_words, tgt_words,
                      path) -> str:
  """Section 3.2's four alignments of the first held-out pair with at least 6 target words:
  the attention of ``seed`` (one seed's ``attention``, ``beta_uniform``), the α of the β of
  the uniform-attention model and of the BoW proxy (``fixed["beta_proxy"]``), and IBM-1's
  posterior (``fixed["ibm1"]``), each ``[N, T, L]``; ``src, src_mask, tgt``: the pairs."""
  j = int(np.argmax((tgt > 0).sum(1) >= 6))
  L, T = int(src_mask[j].sum()), int((tgt[j] > 0).sum())
  return heatmaps(
      [("attention (standard)", seed["attention"][j, :T, :L]),
       ("α from β (uniform attention)", probe_alignment(seed["beta_uniform"], src_mask)[j, :T, :L]),
       ("α from β (BoW proxy)", probe_alignment(fixed["beta_proxy"], src_mask)[j, :T, :L]),
       ("IBM-1 posterior", fixed["ibm1"][j, :T, :L])],
      path, xticks=[src_words[w] for w in src[j, :L]],
      yticks=[tgt_words[w] for w in tgt[j, :T]], title="A held-out Multi30k pair (seed 0)")


def copying_figures(runs: dict, word: str, t, seeds_path, two_stage_path, *,
                    title: str) -> list:
  """Section 3.3's two figures of the copying runs ``{label: records}`` (each ``[S, R]`` at
  steps ``t``): every seed's token and attention accuracy (``seeds_path``), and the two
  stages, β-probe accuracy before the attention accuracy named ``word`` (``two_stage_path``).
  Returns the two paths."""
  return [
      curve_panels(
          [{"title": label, "t": t, "curves": {"token acc": o["token_acc"],
                                               "attention acc": o["attn_acc"]},
            "ylabel": "accuracy"} for label, o in runs.items()],
          seeds_path, per_seed=True, title=title),
      curve_panels(
          [{"title": f"{label} ({o['attn_acc'].shape[0]} seeds)", "t": t,
            "curves": {"β probe acc": o["beta_acc"], "attention acc": o[word],
                       "token acc": o["token_acc"]},
            "ylabel": "accuracy", "vlines": []} for label, o in runs.items()],
          two_stage_path,
          title="Two stages: β-probe accuracy (KTIW) rises before attention accuracy"),
  ]


def relevance_figure(uniform: dict, standard: dict, t, early: float, path) -> str:
  """The slides' output relevance on Lu et al.'s topic task (records of
  :func:`analysis.relevance.relevance_record`, ``[S, R]`` at epochs ``t``): ρ at the topic and
  the other words under uniform attention (a line at epoch ``early``), and in standard
  training ρ and the topic words' score and attention."""
  return curve_panels(
      [{"title": "uniform attention (keys frozen)", "t": t, "ylabel": "mean ρ",
        "curves": {"ρ topic words": uniform["rho_topic"], "ρ other words": uniform["rho_other"]},
        "vlines": [early]},
       {"title": "standard training: relevance", "t": t, "ylabel": "mean ρ",
        "curves": {"ρ topic words": standard["rho_topic"], "ρ other words": standard["rho_other"]}},
       {"title": "standard training: attention", "t": t, "ylabel": "score / attention",
        "curves": {"score of topic words": standard["score_topic"],
                   "attention on topic word": standard["topic_attention"]}}],
      path, title="Output relevance ρ = ‖centred Uᵀν_w‖ (Lu et al.'s topic task, Attn-TC)")
