"""``attndyn explain``: the Jain & Wallace checks on a trained Lu model (orchestration only).

Trains the run's model (``--run DIR``: the config in DIR/summary.json, whose
GD is deterministic, so this is the same model; or ``--preset NAME``) per seed
with the chosen normaliser on the one engine (:func:`attndyn.pipeline.run`), then :func:`analysis.jain_wallace.explain_model`
on every test sentence. Writes ``explain.json`` (per-seed means, mean ± 95% CI
over seeds, medians), ``explain.md`` and ``explain.png``.
"""
import argparse
from pathlib import Path

from attndyn.report import md_table
from attndyn.tasks.errors import ConfigError, check

__all__ = ["EPILOG", "add_parser", "main"]

EPILOG = """examples:
  attndyn explain --preset lu2021-text-tc --out results/explain-tc
  attndyn explain --preset quick --out /tmp/explain --normaliser sparsemax --seeds 2
  attndyn explain --run results/quick --out results/quick-explain
"""


def add_parser(sub) -> argparse.ArgumentParser:
  """Register ``explain`` on the main parser's subparsers."""
  p = sub.add_parser("explain", help="attention vs importance (Kendall τ) and adversarial attention",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Train (or retrain, from a run's config) the Lu model and write "
                                 "the Jain & Wallace statistics: Kendall τ-b of attention vs "
                                 "gradient and leave-one-out importance, and the max-JSD "
                                 "adversarial attention at output TVD ≤ ε.")
  src = p.add_mutually_exclusive_group(required=True)
  src.add_argument("--run", metavar="DIR", help="a directory written by `attndyn run`")
  src.add_argument("--preset", metavar="NAME", help="a named preset (see `attndyn presets`)")
  p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
  p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                 help="change one config value, as for `attndyn run` (repeatable)")
  p.add_argument("--normaliser", default="softmax", help="softmax, sparsemax or entmax15")
  p.add_argument("--seeds", type=int, metavar="N", help="use the config's first N seeds")
  p.add_argument("--eps", type=float, default=0.01, help="output TVD budget of the adversary")
  p.add_argument("--adv-steps", type=int, default=100, help="ascent steps per random start")
  p.add_argument("--restarts", type=int, default=4, help="random starts per sentence")
  p.add_argument("--force", action="store_true", help="write into a non-empty DIR")
  return p


def _config(args):
  """The run to explain: its config (``--run`` or ``--preset``, then ``--set``), GD only, with
  ``--normaliser`` and ``--seeds``, validated by the run schema."""
  from attndyn.analysis.results import read_summary
  from attndyn import config, overrides, presets
  if args.run:
    path = Path(args.run) / "summary.json"
    if not path.is_file():
      raise ConfigError(f"--run {args.run!r}: no summary.json there (a directory written by "
                        "`attndyn run` is needed).")
    raw = read_summary(path)["config"]
  else:
    raw = presets.preset(args.preset, what="--preset")
  cfg = config.RunConfig.from_dict(overrides.apply(raw, args.overrides))
  seeds = list(cfg.sweep.seeds)
  if args.seeds is not None:
    check(1 <= args.seeds <= len(seeds), "--seeds", args.seeds,
          f"between 1 and the config's {len(seeds)} seeds")
    seeds = seeds[:args.seeds]
  raw = overrides.apply(cfg.to_dict(), [f"model.normaliser={args.normaliser}", "ode.kind=none"])
  raw["sweep"]["seeds"] = seeds
  return config.RunConfig.from_dict(raw)


def _mean_ci(v: dict) -> str:
  """``mean ± 95% CI`` of a statistic's summary (``n/a`` without a mean)."""
  ci = "" if v["ci95"] is None else f" ± {v['ci95']:.3g}"
  return "n/a" if v["mean"] is None else f"{v['mean']:.4g}{ci}"


def _markdown(summary: dict, meta: dict) -> str:
  num = lambda x: "n/a" if x is None else f"{x:.3g}"
  lines = [f"# attndyn explain: {meta['label']}", "",
           f"Seeds {meta['seeds']}, {meta['n_sentences']} test sentences each, ε = {meta['eps']}; "
           f"final train loss {meta['train_loss']}, test accuracy {meta['test_acc']}.", ""]
  lines += md_table(["statistic", "mean over seeds ± 95% CI", "per-seed means", "pooled median",
                     "undefined"],
                    [[stat, _mean_ci(v), ", ".join(num(x) for x in v["per_seed"]),
                      num(v["median"]), f"{100 * v['undefined']:.0f}%"]
                     for stat, v in summary.items()])
  return "\n".join(lines + ["", "![explain.png](explain.png)", ""])


def main(args) -> int:
  """Run ``attndyn explain``; returns the exit code."""
  import jax
  import numpy as np

  from attndyn import tasks
  from attndyn.analysis import jain_wallace as jw
  from attndyn import atomic, outputs, pipeline
  from attndyn.reproduce.flavours.common import seed_params
  from attndyn.models.normalisers import NAMED_NORMALISERS

  check(args.normaliser in NAMED_NORMALISERS, "--normaliser", args.normaliser,
        f"one of {', '.join(NAMED_NORMALISERS)}")
  check(0 < args.eps < 1, "--eps", args.eps, "a number in (0, 1)")
  check(args.adv_steps >= 1, "--adv-steps", args.adv_steps, "a positive integer")
  check(args.restarts >= 1, "--restarts", args.restarts, "a positive integer")
  cfg = _config(args)
  seeds = list(cfg.sweep.seeds)
  out = outputs.prepare_out_dir(args.out, force=args.force)
  with pipeline.precision_scope(cfg.precision):
    # Trained on the one engine (the fast path for softmax, autodiff for the other normalisers).
    result = pipeline.run(cfg, progress=False)
    params = result.gd.final_params
    loss = np.asarray(result.gd.observables["loss"])[:, -1]
    acc = np.asarray(result.gd.observables["test_acc"])[:, -1]
    data = tasks.make_topic_dataset(jax.random.PRNGKey(cfg.sweep.data_seeds[0]), cfg.task)
    per_seed = [jw.explain_model(seed_params(params, i), data.test, args.normaliser,
                                 jax.random.PRNGKey(1000 + int(seed)), eps=args.eps,
                                 steps=args.adv_steps, restarts=args.restarts)
                for i, seed in enumerate(seeds)]
  summary = jw.summarise(per_seed)
  label = f"Attn-{cfg.model.classifier.upper()}, {args.normaliser}"
  meta = {"label": label, "seeds": seeds, "n_sentences": int(data.test.tokens.shape[0]),
          "eps": args.eps, "train_loss": [round(float(x), 6) for x in loss],
          "test_acc": [round(float(x), 4) for x in acc]}
  atomic.write_json(out / "explain.json", {"config": cfg.to_dict(), "normaliser": args.normaliser,
                                           **meta, "summary": summary})
  atomic.write(out / "explain.png", lambda tmp: jw.explain_figure({label: per_seed}, tmp,
                                                                  eps=args.eps))
  atomic.write_text(out / "explain.md", _markdown(summary, meta))
  for stat, v in summary.items():
    print(f"{stat}: {_mean_ci(v)} over {v['n_seeds']} seeds (median {v['median']})")
  print(f"wrote {out}/: explain.json, explain.md, explain.png")
  return 0
