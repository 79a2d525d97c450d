"""Section 5.2: multi-head attention rescues copying on permutations by improving learning dynamics.

A single head can express copying, yet on permutations it often fails. K heads
(their own ``W_a^k``) read the same encoder states into one output layer, so
whichever head first leans toward the right position teaches the shared
output layer KTIW, which then pulls every head. Two models (``model`` setting):

* ``authors`` (the default): the authors' ``multihead.py`` protocol and model
  (:mod:`attndyn.reproduce.snell.multihead_authors`: GRUs, separate embeddings, one
  body, single heads labelled good / bad on three data orders, then 8 bad heads,
  7 bad + 1 good and 8 random heads, 50 of each). Reads ``heads``, ``candidates``,
  ``orders``, ``pool``, ``random_heads``, ``combos``, ``eval_size`` (the fixed
  validation set), ``good_above``, ``bad_below``, ``body_seed``, ``head_seed``.
* ``ours`` (presets ``ours*``, ``cpu20*``; "ours: no EOS, Glorot", the earlier
  variant): seed s single-head vs seed s with K heads (head 0 is seed s's own head,
  the others the heads of seeds ``1000·k + s``), success rates paired by seed; then
  2-head models of a bad seed's body and head plus the head of another bad or of a
  good seed. Reads ``seeds``, ``success_metric``, ``success_at`` besides the shared
  settings. Single-head runs are reused from the ``copying`` experiment of the same
  run when its settings match, else trained here.
"""
import dataclasses
from typing import Literal

import numpy as np

from attndyn import settings
from attndyn.analysis import copying_stats as cs
from attndyn.analysis import replication as rep
from attndyn.analysis import snell_figures as figs
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce.snell import common
from attndyn.reproduce.snell import multihead_authors as authors
from attndyn.tasks.errors import check

__all__ = ["NAME", "TITLE", "MODELS", "OURS", "PRESETS", "Settings", "FULL", "QUICK", "SOURCE",
           "SAME", "validate", "run", "AUTHORS_SOURCE"]

NAME = "multihead"
TITLE = "Section 5.2: K heads succeed more often than one on permutations"
MODELS = ("authors", "ours")
# "ours": the earlier variant's settings (4 heads, 10 2-head combinations, 64 fixed
# evaluation sequences); "cpu" the authors' protocol at hidden 64.
OURS = {"model": "ours", "heads": 4, "combos": 10, "eval_size": 64}
PRESETS = {"authors": {}, "cpu": {"hidden": 64},
           "ours": OURS, "ours-cpu": {**OURS, "hidden": 64},
           "cpu20": {**OURS, "hidden": 64, "n_tokens": 20, "steps": 150,
                     "success_metric": "attn_acc", "success_at": 0.5, "good_above": 0.8,
                     "bad_below": 0.3},
           "cpu20b32": {**OURS, "hidden": 64, "n_tokens": 20, "batch": 32, "steps": 200,
                        "eval_size": 32, "success_metric": "attn_acc", "success_at": 0.5,
                        "good_above": 0.8, "bad_below": 0.3},
           "quick": {}}


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set multihead.KEY=VALUE``).

  Attributes:
    preset: a name of :data:`PRESETS`, whose values are laid over the others before the run.
    model: ``authors`` (the authors' ``multihead.py`` protocol) or ``ours`` (the earlier variant).
    n_tokens: permutations of ``n_tokens`` words (the sequence length too).
    hidden: the recurrent cells' hidden size.
    steps: Adam updates per run (a fresh batch each).
    batch: sequences per batch.
    lr: Adam's learning rate.
    record_every: steps between logged evaluations.
    eval_size: sequences per evaluation (``authors``: the fixed validation set).
    heads: K, the heads of a multi-head model (at least 2).
    candidates: ``authors``: single heads labelled good / bad.
    orders: ``authors``: data orders each candidate is trained on.
    pool: ``authors``: good and bad heads kept (the first, in draw order).
    random_heads: ``authors``: fresh heads the random combinations draw from.
    combos: combinations of each kind (``ours``: 2-head combinations).
    good_above: a run is good when its token accuracy (``ours``: ``success_metric``) exceeds this.
    bad_below: a run is bad when its last one is below this.
    body_seed: ``authors``: the seed of the one body every run starts from.
    head_seed: ``authors``: the seed the candidate heads are drawn from.
    seeds: ``ours``: seeds of the single-head and K-head runs.
    success_metric: ``ours``: the accuracy whose last logged value judges a run.
    success_at: ``ours``: a run succeeds when that value reaches this.
    chunk: runs per compiled call and checkpoint (0: all at once).
  """
  preset: Literal[tuple(PRESETS)]
  model: Literal[MODELS]
  n_tokens: settings.Count
  hidden: settings.Count
  steps: settings.Count
  batch: settings.Count
  lr: settings.Number
  record_every: settings.Count
  eval_size: settings.Count
  heads: settings.Count
  candidates: settings.Count
  orders: settings.Count
  pool: settings.Count
  random_heads: settings.Count
  combos: settings.Count
  good_above: settings.Number
  bad_below: settings.Number
  body_seed: settings.Index
  head_seed: settings.Index
  seeds: settings.Count
  success_metric: Literal[common.SUCCESS_METRICS]
  success_at: settings.Number
  chunk: settings.Index


# The authors' multihead.py: hidden 256, 200 steps, batch 128, Adam 1e-3, evaluation
# before every 10th update on 400 fixed sequences, 8 heads, pools of 20 good / 20 bad
# heads and 30 random ones, 50 combinations of each kind, good > 0.95, bad < 0.6.
# candidates (heads labelled; theirs draws until both pools are full) is ours.
FULL = Settings(preset="authors", model="authors", n_tokens=40, hidden=256, steps=200,
                batch=128, lr=1e-3, record_every=10, eval_size=400, heads=8, candidates=256,
                orders=3, pool=20, random_heads=30, combos=50, good_above=0.95, bad_below=0.6,
                body_seed=0, head_seed=0, seeds=20, success_metric="token_acc",
                success_at=0.9, chunk=0)
# Quick: short runs of a small model never pass 0.95, so good / bad are > 0.8 / < 0.5 there.
QUICK = dataclasses.replace(FULL, preset="quick", n_tokens=10, hidden=32, steps=150,
                            eval_size=100, heads=3, candidates=16, pool=5, random_heads=6,
                            combos=4, good_above=0.8, bad_below=0.5, seeds=4,
                            success_metric="attn_acc", success_at=0.5)
SOURCE = (rep.from_paper("Snell et al. 2022, abstract", "a multi-head attention model can overcome "
                         "the above hard training distribution by improving learning dynamics")
          + "; ‘overcome’ as at least one seed in ten more succeeding (gain ≥ 0.1) is ours")
SAME = ("n_tokens", "hidden", "steps", "batch", "lr", "record_every", "eval_size",
        "success_metric", "success_at")


def _single(ctx, s, task, seeds):
  cached = ctx.cache.get("snell.copying")
  other = cached["settings"] if cached else None    # copying's, its preset laid over them
  if other is not None and other.model == "ours" \
      and all(getattr(other, k) == getattr(s, k) for k in SAME) \
      and other.seeds >= len(seeds) and "permutation" in cached["runs"]:
    ctx.log(f"{NAME}: reusing the single-head permutation runs of copying")
    return {k: (v[:len(seeds)] if k != "t" else v) for k, v in cached["runs"]["permutation"].items()}
  ctx.log(f"{NAME}: single head x {len(seeds)} seeds")
  return common.copy_sweep(task, s, seeds, ctx=ctx, name=f"{NAME}-single")


def validate(s: Settings) -> Settings:
  """The settings with their preset laid over them; fewer than two heads is a ConfigError
  (the runner calls this before anything runs; the settings' kinds refuse a bad preset or
  model)."""
  s = common.merge_preset(s, PRESETS, NAME)
  check(s.heads >= 2, "multihead.heads", s.heads, "an integer ≥ 2")
  return s


def run(ctx, s) -> Outcome:
  s = validate(s)
  return _run_authors(ctx, s) if s.model == "authors" else _run_ours(ctx, s)


AUTHORS_SOURCE = ("the authors' code, SequenceCopying/multihead.py: 8 bad heads, 7 bad + 1 good "
                  "and 8 random heads are its three combinations (the paper's Section 5.2 text "
                  "is not in docs/; no number is claimed for them)")


def _run_authors(ctx, s) -> Outcome:
  """The authors' protocol (:mod:`attndyn.reproduce.snell.multihead_authors`)."""
  task = common.task_config({"distribution": "permutation", "n_tokens": s.n_tokens,
                             "length": s.n_tokens}, "authors")
  k = s.heads
  ctx.log(f"{NAME}: the authors' protocol: {s.candidates} heads x {s.orders} data "
          f"orders, then {s.combos} combinations of {k} heads of each kind "
          f"(hidden {s.hidden}, {s.steps} steps)")
  res = authors.protocol(ctx, task, s)
  good = s.good_above
  succeeded = {name: v > good for name, v in res["finals"].items()}
  single = res["single_final"] > good
  labels = res["labels"]
  setting = (f"the authors' multihead.py protocol on permutations of [0, {s.n_tokens}), "
             f"hidden {s.hidden}, {s.steps} steps; success = final token accuracy > "
             f"{good} (their 'good')")
  n_heads = s.candidates
  claims = [
      rep.claim(f"{NAME}.authors.single_labels", f"single heads labelled good (> {good} on all "
                f"{s.orders} data orders) / bad (< {s.bad_below} at the end on all) of "
                f"{n_heads} ({setting})", paper="—",
                ours=rep.proportion_ci(np.isin(np.arange(n_heads), labels["good"])),
                tolerance=rep.Tolerance("info"), figure="Section 5.2", quick=ctx.quick,
                note=f"good {len(labels['good'])}, bad {len(labels['bad'])}, neither "
                     f"{n_heads - len(labels['good']) - len(labels['bad'])} of {n_heads}"),
      rep.claim(f"{NAME}.authors.single.success_rate", f"1 head: fraction of runs that succeed "
                f"(every candidate on every data order; {setting})", paper="often fails",
                ours=rep.proportion_ci(single), tolerance=rep.Tolerance("info"),
                figure="Section 5.2", quick=ctx.quick, note=cs.rate_text(single)),
  ]
  for name in authors.COMBOS:
    if name in succeeded:
      what = {"bad": f"{k} bad heads", "bad+good": f"{k - 1} bad heads + 1 good head",
              "random": f"{k} random heads"}[name]
      claims.append(rep.claim(
          f"{NAME}.authors.{name}.success_rate", f"{what}: fraction of combinations that "
          f"succeed ({setting})", paper="—", ours=rep.proportion_ci(succeeded[name]),
          tolerance=rep.Tolerance("info", source=AUTHORS_SOURCE), figure="Section 5.2",
          quick=ctx.quick, note=cs.rate_text(succeeded[name])))
  if "random" in succeeded:
    claims.append(rep.claim(
        f"{NAME}.authors.gain", f"success rate of {k} random heads minus that of 1 head "
        f"(independent groups; {setting})", paper="> 0",
        ours=rep.proportion_difference_ci(succeeded["random"], single),
        tolerance=rep.Tolerance("at_least", 0.1, "gain ≥ 0.1 (Newcombe)", source=SOURCE),
        paper_ref="Snell et al. 2022, abstract", figure="Section 5.2", quick=ctx.quick,
        comparable=not ctx.quick,
        note=f"1 head {cs.rate_text(single)}; {k} random heads "
             f"{cs.rate_text(succeeded['random'])}"))
  if "bad" in succeeded and "bad+good" in succeeded:
    claims.append(rep.claim(
        f"{NAME}.authors.good_head_rescues", f"success rate of {k - 1} bad + 1 good head minus "
        f"that of {k} bad heads (independent groups; {setting})", paper="—",
        ours=rep.proportion_difference_ci(succeeded["bad+good"], succeeded["bad"]),
        tolerance=rep.Tolerance("info", source=AUTHORS_SOURCE), figure="Section 5.2",
        quick=ctx.quick))
  labels_txt = ["1 head"] + [{"bad": f"{k} bad", "bad+good": f"{k - 1} bad + 1 good",
                              "random": f"{k} random"}[n] for n in succeeded]
  flags = [single] + list(succeeded.values())
  fig = figs.rate_bars(labels_txt, [f.mean() for f in flags],
                       [cs.wilson_interval(int(f.sum()), f.size) for f in flags],
                       ctx.path("multihead_success.png"),
                       title=f"Copying permutations: success rate (Wilson 95%), {setting}",
                       ylabel="success rate")
  details = {"good_heads": labels["good"].tolist(), "bad_heads": labels["bad"].tolist(),
             "pools": res["pools"], "combinations": res["lists"], "skipped": res["skipped"],
             "final_token_acc": {n: v.tolist() for n, v in res["finals"].items()},
             "single_final_token_acc": res["single_final"].tolist(),
             "notes": [f"Setting: preset {s.preset!r}: {setting}. Model: GRU encoder and "
                       f"decoder, separate embeddings, per-head attn_proj / enc_proj, the mean "
                       f"of the heads' projected contexts, [c; d] readout (multihead.py). "
                       f"{s.candidates} candidate heads (theirs: drawn until 20 good and "
                       f"20 bad)." + (f" Skipped for too small a pool: "
                                      f"{', '.join(res['skipped'])}." if res["skipped"] else "")]}
  return Outcome(claims, [fig.rsplit("/", 1)[-1]], details)


def _run_ours(ctx, s) -> Outcome:
  """The earlier variant ("ours: no EOS, Glorot")."""
  s = dataclasses.replace(s, chunk=s.chunk or None)
  task = common.task_config({"distribution": "permutation", "n_tokens": s.n_tokens,
                             "length": s.n_tokens})
  seeds = np.arange(s.seeds)
  k = s.heads
  single = _single(ctx, s, task, seeds)
  heads = np.stack([seeds] + [1000 * j + seeds for j in range(1, k)], 1)
  ctx.log(f"{NAME}: {k} heads x {len(seeds)} seeds")
  multi = common.copy_sweep(task, s, seeds, heads, ctx=ctx, name=f"{NAME}-{k}heads")
  ok1, okk = common.success(single, s), common.success(multi, s)
  crit = f"final {s.success_metric} ≥ {s.success_at}"
  setting = (f"permutations of [1, {s.n_tokens}], hidden {s.hidden}, {s.steps} steps, "
             f"{len(seeds)} seeds; success = {crit}")
  claims = [
      rep.claim(f"{NAME}.single.success_rate", f"1 head: fraction of seeds that succeed ({setting})",
                paper="often fails (≈ half)", ours=rep.proportion_ci(ok1),
                tolerance=rep.Tolerance("info"), figure="Section 5.2", quick=ctx.quick,
                note=cs.rate_text(ok1)),
      rep.claim(f"{NAME}.multi.success_rate", f"{k} heads: fraction of seeds that succeed "
                f"({setting})", paper="higher than one head", ours=rep.proportion_ci(okk),
                tolerance=rep.Tolerance("info"), figure="Section 5.2", quick=ctx.quick,
                note=cs.rate_text(okk)),
      rep.claim(f"{NAME}.gain", f"success rate of {k} heads minus that of 1 head (paired by seed)",
                paper="> 0", ours=rep.paired_proportion_ci(okk, ok1),
                tolerance=rep.Tolerance("at_least", 0.1, "gain ≥ 0.1 (paired)", source=SOURCE),
                paper_ref="Snell et al. 2022, abstract", figure="Section 5.2",
                quick=ctx.quick, comparable=not ctx.quick,
                note=f"1 head {cs.rate_text(ok1)}; {k} heads {cs.rate_text(okk)}"),
  ]
  details = {"single_final": single["token_acc"][:, -1].tolist(),
             "multi_final": multi["token_acc"][:, -1].tolist(),
             "single_attn_final": single["attn_acc"][:, -1].tolist(),
             "multi_attn_final": multi["attn_acc"][:, -1].tolist()}
  ctx.partial(Outcome(claims, [], details))
  # The good / bad head protocol.
  final = single[s.success_metric][:, -1]
  good, bad = seeds[final > s.good_above], seeds[final < s.bad_below]
  details["good_seeds"], details["bad_seeds"] = good.tolist(), bad.tolist()
  labels, rates, cis = ["1 head", f"{k} heads"], [ok1.mean(), okk.mean()], [
      cs.wilson_interval(int(ok1.sum()), ok1.size), cs.wilson_interval(int(okk.sum()), okk.size)]
  if s.combos > 0 and len(bad) >= 2:
    n = min(s.combos, len(bad))
    body = bad[:n]
    combos = {"bad+bad": np.stack([body, np.roll(bad, -1)[:n]], 1)}
    if len(good):
      combos["bad+good"] = np.stack([body, good[np.arange(n) % len(good)]], 1)
    for name, hs in combos.items():
      ctx.log(f"{NAME}: protocol {name} x {n}")
      o = common.copy_sweep(task, s, body, hs, ctx=ctx, name=f"{NAME}-{name.replace('+', '-')}")
      ok = common.success(o, s)
      details[f"protocol_{name}"] = {"heads": hs.tolist(),
                                     "final": o[s.success_metric][:, -1].tolist()}
      labels.append(f"2 heads: {name}")
      rates.append(ok.mean())
      cis.append(cs.wilson_interval(int(ok.sum()), ok.size))
      claims.append(rep.claim(
          f"{NAME}.protocol.{name}", f"2 heads, body and head of a bad seed + the head of a "
          f"{name.split('+')[1]} seed: fraction that succeed", paper="bad+good > bad+bad",
          ours=rep.proportion_ci(ok), tolerance=rep.Tolerance("info"),
          figure="Section 5.2", quick=ctx.quick, note=cs.rate_text(ok)))
  else:
    details["protocol_skipped"] = f"combos = {s.combos}, {len(bad)} bad seeds"
  fig = figs.rate_bars(labels, rates, cis, ctx.path("multihead_success.png"),
                       title=f"Copying permutations: success rate (Wilson 95%), {setting}",
                       ylabel="success rate")
  t = single["t"]
  fig2 = figs.curve_panels(
      [{"title": "1 head", "t": t, "curves": {"token acc": single["token_acc"],
                                               "attention acc": single["attn_acc"]}},
       {"title": f"{k} heads (best head)", "t": t,
        "curves": {"token acc": multi["token_acc"], "attention acc": multi["attn_acc"]}}],
      ctx.path("multihead_curves.png"), per_seed=True, title=setting)
  details["notes"] = [f"Setting: preset {s.preset!r}: {setting}. Multi-head: K heads with "
                      "their own W_a, contexts concatenated into W_c; attention accuracy of the "
                      "best head."]
  return Outcome(claims, [fig.rsplit("/", 1)[-1], fig2.rsplit("/", 1)[-1]], details)
