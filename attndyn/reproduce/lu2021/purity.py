"""Section 5.2: topic purity, the competition of *best* and *powerful* (Fig 5), Figs 6-7.

Reuses the SST-2 runs (masked padding) of :mod:`attndyn.reproduce.lu2021.sst`
when they are in the run's cache, else trains them with the same settings.
The attended word of every training sentence (its word of largest score) is
recorded along training; Figs 6-7 average its topic purity
``δ(w) = |δ⁺(w) − δ⁻(w)|`` and occurrence count over all sentences (Fig 7) and
over the sentences containing each of the five top-scored words (Fig 6).
"""
import dataclasses
from typing import Literal

import numpy as np

from attndyn import settings
from attndyn.analysis import lu2021_figures as figs
from attndyn.analysis import purity as pur
from attndyn.analysis import replication as rep
from attndyn.analysis import sst_words
from attndyn.reproduce import runner
from attndyn.reproduce.lu2021 import sst
from attndyn.reproduce.runner import Outcome
from attndyn.tasks.sst import word_class_counts

__all__ = ["NAME", "USES", "TITLE", "Settings", "PaperCounts", "FULL", "QUICK", "PAIR_REF", "TREND_REF", "SOURCES",
           "run"]

NAME = "purity"
USES = ("sst",)   # the experiments whose runs it reuses: their settings key its job too
TITLE = "Section 5.2: topic purity; best vs powerful (Fig 5); purity of attended words (Figs 6-7)"


@dataclasses.dataclass(frozen=True)
class PaperCounts(settings.Table):
  """Per word: the training sentences containing it and the positive ones (Sec 5.2)."""
  best: tuple[settings.Count, ...]
  powerful: tuple[settings.Count, ...]


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set purity.KEY=VALUE``).

  Attributes:
    dataset: the SST variant (topic purity needs two classes).
    padding: the SST runs' padding (reused from :mod:`attndyn.reproduce.lu2021.sst`).
    variants: the classifiers whose runs are read.
    frequent, pure: the (frequent, pure) pair of Fig 5.
    top_k: Fig 6 averages over each point's ``top_k`` top-scored words.
    paper_counts: the paper's counts of the pair (checked exactly).
  """
  dataset: Literal["sst2"]
  padding: Literal["masked", "pad_word"]
  variants: tuple[str, ...]
  frequent: str
  pure: str
  top_k: settings.Count
  paper_counts: PaperCounts


FULL = Settings(dataset="sst2", padding="masked", variants=("fc", "tc"), frequent="best",
                pure="powerful", top_k=5,
                paper_counts=PaperCounts(best=(128, 103), powerful=(36, 36)))
QUICK = FULL
# Sec 5.2's paragraphs are named by their first words (the paper text has no page breaks).
PAIR_REF = "Sec 5.2, ¶ “Regarding the (powerful, best) pair…”"
TREND_REF = "Sec 5.2, ¶ “The dynamics of topic purity of attended words…”"
SOURCES = {
    "counts": rep.from_paper(PAIR_REF, "best appears in 128 training samples while 103 of them "
                             "are positive … powerful appears in the 36 training samples, and all "
                             "of them are positive") + "; counts are exact, so equal",
    "competition": rep.from_paper(PAIR_REF, "the score of powerful starts to increase … its "
                                  "[best's] score starts to drop eventually"),
    "trend": rep.from_paper(TREND_REF, "the average topic purity of the attended words increases "
                            "while the average occurrence rate drops"),
    "fig6_above_fig7": rep.from_paper(TREND_REF, "the average topic purity is lower than the one "
                                      "presented in Fig 6 when the training is completed"),
}


def run(ctx, s) -> Outcome:
  sst_module = runner.select("lu2021", ["sst"])[0]
  sst_s = runner.settings_for(sst_module, quick=ctx.quick, items=ctx.items)
  sst_s = dataclasses.replace(sst_s, variants=tuple(dict.fromkeys(sst_s.variants + s.variants)))
  r = sst.train_config(ctx, sst_s, s.dataset, s.padding)
  data, batch = r["data"], r["batches"]["train"]
  if s.dataset != "sst2":
    raise ValueError("topic purity is defined on SST-2 (two classes)")
  cls_counts = np.asarray(word_class_counts(batch, data.n_words, 2))
  purity = pur.topic_purity(cls_counts)
  occurrence = pur.occurrence_counts(cls_counts)
  steps = r["steps"]
  q = ctx.quick
  claims, notes, figures = [], [], []
  fw, pw = data.word_id(s.frequent), data.word_id(s.pure)
  for w, wid in ((s.frequent, fw), (s.pure, pw)):
    n_sent, n_pos = s.paper_counts[w]
    ours = cls_counts[wid]
    claims.append(rep.claim(
        f"{NAME}.counts.{w}", f"'{w}': training sentences containing it / positive ones",
        paper=f"{n_sent} / {n_pos}", ours=rep.mean_ci([float(ours.sum() == n_sent and ours[1] == n_pos)]),
        tolerance=rep.Tolerance("all_true", text="both counts equal", source=SOURCES["counts"]),
        figure="Fig 5", paper_ref=PAIR_REF,
        note=f"ours {int(ours.sum())} / {int(ours[1])}, purity δ = {float(purity[wid]):.3f}"))
  m_word = sst_words.mean_sentence_length(batch, data.n_words) - 1
  shared = sst_words.shared_sentence(batch, fw, pw)
  fig5_panels, fig6, fig7 = [], [], []
  for v in s.variants:
    idx = sst._sel(r, v)
    label = sst.LABELS[v]
    sc, nm = r["obs"]["score"], r["obs"]["norm"]
    comp = [sst_words.competition(steps, sc[p, :, fw], sc[p, :, pw], r["best_step"][p]) for p in idx]
    ok = [c["frequent_leads_early"] and c["pure_leads_at_end"] and c["frequent_falls_from_peak"]
          for c in comp]
    claims.append(rep.claim(
        f"{NAME}.{v}.competition", f"{label}: '{s.frequent}' (frequent, δ = "
        f"{float(purity[fw]):.2f}) leads '{s.pure}' (rare, δ = {float(purity[pw]):.2f}) early, "
        f"'{s.pure}' leads at the best epoch, and '{s.frequent}''s score falls from its peak",
        paper="best rises first, then drops; powerful overtakes (Fig 5)", ours=rep.mean_ci(ok),
        tolerance=rep.Tolerance("all_true", source=SOURCES["competition"]), figure="Fig 5",
        comparable=False, quick=q,
        note="per seed: " + "; ".join(
            f"early lead {c['frequent_leads_early']}, pure at end {c['pure_leads_at_end']}, "
            f"falls {c['frequent_falls_from_peak']}, overtake epoch {c['overtake_step']:g}"
            for c in comp)))
    top = [sst_words.top_words(r["final_score"][p], s.top_k, exclude=[0]) for p in idx]
    curves = pur.purity_curves(r["obs"]["attended"], batch, purity, occurrence, idx, top)
    early, last = 1, -1
    trend = pur.purity_trends(curves, early, last)
    claims += [
        rep.claim(f"{NAME}.{v}.fig7_trend", f"{label}, all training sentences: the attended "
                  f"words' mean purity rises and their mean occurrence falls (epoch {steps[early]} "
                  "→ end)", paper="purity ↑, occurrence ↓ (Fig 7)",
                  ours=rep.mean_ci(trend["all"]),
                  tolerance=rep.Tolerance("all_true", source=SOURCES["trend"]), figure="Fig 7",
                  comparable=False, quick=q,
                  note=f"purity {curves['all_purity'][:, early].mean():.3f} → "
                       f"{curves['all_purity'][:, last].mean():.3f}, occurrence "
                       f"{curves['all_occ'][:, early].mean():.0f} → {curves['all_occ'][:, last].mean():.0f}"),
        rep.claim(f"{NAME}.{v}.fig6_trend", f"{label}, sentences containing a top-{s.top_k} "
                  "word: the same trend", paper="purity ↑ to ≈ 1, occurrence ↓ (Fig 6)",
                  ours=rep.mean_ci(trend["word"]),
                  tolerance=rep.Tolerance("all_true", source=SOURCES["trend"]),
                  figure="Fig 6",
                  comparable=False, quick=q,
                  note=f"purity {curves['word_purity'][:, early].mean():.3f} → "
                       f"{curves['word_purity'][:, last].mean():.3f}"),
        rep.claim(f"{NAME}.{v}.fig6_above_fig7", f"{label}: final purity of the attended words "
                  f"higher for top-{s.top_k}-word sentences (Fig 6) than for all (Fig 7)",
                  paper="Fig 7's purity ends lower than Fig 6's",
                  ours=rep.mean_ci(trend["word_above_all"]),
                  tolerance=rep.Tolerance("all_true", source=SOURCES["fig6_above_fig7"]),
                  figure="Figs 6-7", comparable=False,
                  quick=q),
    ]
    fig6.append({"title": f"{label}: sentences with a top-{s.top_k} word", "x": steps,
                 "left": ("mean purity δ", curves["word_purity"]),
                 "right": ("mean occurrence", curves["word_occ"])})
    fig7.append({"title": f"{label}: all training sentences", "x": steps,
                 "left": ("mean purity δ", curves["all_purity"]),
                 "right": ("mean occurrence", curves["all_occ"])})
    fig5_panels += figs.fig5_panels(label, steps, sc[idx[0]], nm[idx[0]],
                                    ((s.frequent, fw), (s.pure, pw)), m_word, batch, shared)
  if shared is not None:
    toks = np.asarray(batch.tokens[shared])[np.asarray(batch.mask[shared])]
    notes.append(f"Shared sentence {shared}: \"{' '.join(data.vocab[t] for t in toks)}\".")
  figs.curve_panels(fig5_panels, ctx.path("fig5_best_powerful.png"), ncols=len(fig5_panels) // max(
      len(s.variants), 1), title=f"Fig 5: '{s.frequent}' vs '{s.pure}' on SST-2 (seed 0)")
  figs.twin_panels(fig6, ctx.path("fig6_purity_top5.png"), title="Fig 6: purity (red) and "
                   f"occurrence (blue) of attended words, sentences with a top-{s.top_k} word")
  figs.twin_panels(fig7, ctx.path("fig7_purity_all.png"), title="Fig 7: purity (red) and "
                   "occurrence (blue) of attended words, all training sentences")
  figures += ["fig5_best_powerful.png", "fig6_purity_top5.png", "fig7_purity_all.png"]
  notes.append("Runs: the sst experiment's SST-2 masked runs (same settings); attended word = the "
               "largest score in the sentence, ties broken at random; 'early' is the first "
               f"recorded epoch after 0 ({steps[1]}), 'end' the last record (the best dev-loss "
               "parameters once a seed has stopped).")
  return Outcome(claims, figures, {"notes": notes})
