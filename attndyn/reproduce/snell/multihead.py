"""Section 5.2: multi-head attention rescues copying on permutations by improving learning dynamics.

A single head can express copying, yet on permutations it often fails. K heads
(their own ``W_a^k``) read the same encoder states into one output layer, so
whichever head first leans toward the right position teaches the shared
output layer KTIW, which then pulls every head. Two comparisons, on the
permutation distribution of :mod:`attndyn.reproduce.snell.copying`:

* ``fresh``: seed s single-head vs seed s with K heads (head 0 is seed s's own
  head, the others the heads of seeds ``1000·k + s``): success rates.
* ``protocol``: single-head seeds are *good* (final accuracy > 0.95; the
  success metric, token accuracy in the paper's setting) or *bad* (< 0.6); a 2-head model keeps bad seed b's body and head and adds the
  head of another bad seed, or of a good seed. (If no seed is good, only the
  bad + bad combination is run.)

Single-head runs are reused from the ``copying`` experiment of the same run
when its settings match, else trained here.
"""
import numpy as np

from analysis import copying_stats as cs
from analysis import replication as rep
from analysis import snell_figures as figs
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce.snell import common

NAME = "multihead"
TITLE = "Section 5.2: K heads succeed more often than one on permutations"
FULL = {"preset": "authors", "n_tokens": 40, "hidden": 256, "steps": 200, "batch": 128,
        "lr": 1e-3, "record_every": 10, "eval_size": 64, "seeds": 20, "heads": 4,
        "combos": 10, "good_above": 0.95, "bad_below": 0.6,
        "success_metric": "token_acc", "success_at": 0.9, "chunk": 0}
PRESETS = {"authors": {}, "cpu": {"hidden": 64},
           "cpu20": {"hidden": 64, "n_tokens": 20, "steps": 150, "success_metric": "attn_acc",
                     "success_at": 0.5, "good_above": 0.8, "bad_below": 0.3},
           "cpu20b32": {"hidden": 64, "n_tokens": 20, "batch": 32, "steps": 200, "eval_size": 32,
                        "success_metric": "attn_acc", "success_at": 0.5, "good_above": 0.8,
                        "bad_below": 0.3},
           "quick": {}}
QUICK = {**FULL, "preset": "quick", "n_tokens": 10, "hidden": 32, "steps": 150, "seeds": 4,
         "combos": 3, "success_metric": "attn_acc", "success_at": 0.5}
# The kind of every setting (attndyn.schema.SETTING_KINDS): `--set` is checked against it.
KINDS = {"preset": "str", "n_tokens": "count", "hidden": "count", "steps": "count",
         "batch": "count", "lr": "number", "record_every": "count", "eval_size": "count",
         "seeds": "count", "heads": "count", "combos": "count", "good_above": "number",
         "bad_below": "number", "success_metric": "str", "success_at": "number", "chunk": "index"}
SOURCE = (rep.from_paper("Snell et al. 2022, abstract", "a multi-head attention model can overcome "
                         "the above hard training distribution by improving learning dynamics")
          + "; ‘overcome’ as at least one seed in ten more succeeding (gain ≥ 0.1) is ours")
SAME = ("n_tokens", "hidden", "steps", "batch", "lr", "record_every", "eval_size",
        "success_metric", "success_at")


def _single(ctx, s, task, seeds):
  cached = ctx.cache.get("snell.copying")
  if cached and cached["settings"].get("model") == "ours" \
      and all(cached["settings"].get(k) == s[k] for k in SAME) \
      and cached["settings"]["seeds"] >= len(seeds) and "permutation" in cached["runs"]:
    ctx.log(f"{NAME}: reusing the single-head permutation runs of copying")
    return {k: (v[:len(seeds)] if k != "t" else v) for k, v in cached["runs"]["permutation"].items()}
  ctx.log(f"{NAME}: single head x {len(seeds)} seeds")
  return common.copy_sweep(task, s, seeds, ctx=ctx, name=f"{NAME}-single")


def run(ctx, s) -> Outcome:
  s = common.merge_preset(s, PRESETS)
  s["chunk"] = s["chunk"] or None
  task = common.task_config({"distribution": "permutation", "n_tokens": s["n_tokens"],
                             "length": s["n_tokens"]})
  seeds = np.arange(s["seeds"])
  k = s["heads"]
  single = _single(ctx, s, task, seeds)
  heads = np.stack([seeds] + [1000 * j + seeds for j in range(1, k)], 1)
  ctx.log(f"{NAME}: {k} heads x {len(seeds)} seeds")
  multi = common.copy_sweep(task, s, seeds, heads, ctx=ctx, name=f"{NAME}-{k}heads")
  ok1, okk = common.success(single, s), common.success(multi, s)
  crit = f"final {s['success_metric']} ≥ {s['success_at']}"
  setting = (f"permutations of [1, {s['n_tokens']}], hidden {s['hidden']}, {s['steps']} steps, "
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
  final = single[s["success_metric"]][:, -1]
  good, bad = seeds[final > s["good_above"]], seeds[final < s["bad_below"]]
  details["good_seeds"], details["bad_seeds"] = good.tolist(), bad.tolist()
  labels, rates, cis = ["1 head", f"{k} heads"], [ok1.mean(), okk.mean()], [
      cs.wilson_interval(int(ok1.sum()), ok1.size), cs.wilson_interval(int(okk.sum()), okk.size)]
  if s["combos"] > 0 and len(bad) >= 2:
    n = min(s["combos"], len(bad))
    body = bad[:n]
    combos = {"bad+bad": np.stack([body, np.roll(bad, -1)[:n]], 1)}
    if len(good):
      combos["bad+good"] = np.stack([body, good[np.arange(n) % len(good)]], 1)
    for name, hs in combos.items():
      ctx.log(f"{NAME}: protocol {name} x {n}")
      o = common.copy_sweep(task, s, body, hs, ctx=ctx, name=f"{NAME}-{name.replace('+', '-')}")
      ok = common.success(o, s)
      details[f"protocol_{name}"] = {"heads": hs.tolist(),
                                     "final": o[s["success_metric"]][:, -1].tolist()}
      labels.append(f"2 heads: {name}")
      rates.append(ok.mean())
      cis.append(cs.wilson_interval(int(ok.sum()), ok.size))
      claims.append(rep.claim(
          f"{NAME}.protocol.{name}", f"2 heads, body and head of a bad seed + the head of a "
          f"{name.split('+')[1]} seed: fraction that succeed", paper="bad+good > bad+bad",
          ours=rep.proportion_ci(ok), tolerance=rep.Tolerance("info"),
          figure="Section 5.2", quick=ctx.quick, note=cs.rate_text(ok)))
  else:
    details["protocol_skipped"] = f"combos = {s['combos']}, {len(bad)} bad seeds"
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
  details["notes"] = [f"Setting: preset {s['preset']!r}: {setting}. Multi-head: K heads with "
                      "their own W_a, contexts concatenated into W_c; attention accuracy of the "
                      "best head."]
  return Outcome(claims, [fig.rsplit("/", 1)[-1], fig2.rsplit("/", 1)[-1]], details)
