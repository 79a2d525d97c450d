"""The headline numbers of one or more runs as a short plain-text table.

Reads only the ``aggregate`` block of summary.json
(:func:`analysis.summary.aggregate`), so a later ``attndyn report`` can print
the same table from files.
"""
from typing import Mapping, Sequence, Tuple

_ODE_SHORT = {"reduced": "red", "gradient_flow": "flow"}
_CLASSIFIER = {"fc": "Attn-FC", "tc": "Attn-TC", "tl": "Attn-TL"}


def label(config: Mapping) -> str:
  """``Attn-TC``-style name of a run from its config dict (``-KF``/``-EF``/``-QT`` variants)."""
  model = config["model"]
  name = _CLASSIFIER.get(model["classifier"], model["classifier"])
  freeze = model.get("freeze", [])
  name += "-KF" if "keys" in freeze else ""
  name += "-EF" if "embeddings" in freeze else ""
  name += "-QT" if model.get("train_query") else ""
  return name


def _mean(agg: Mapping, key: str):
  return (agg.get(key) or {}).get("mean")


def _max(agg: Mapping, key: str):
  return (agg.get(key) or {}).get("max")


def _fmt(x, spec: str) -> str:
  return "-" if x is None else format(x, spec)


def table(rows: Sequence[Tuple[str, Mapping]]) -> str:
  """Format ``[(label, aggregate), ...]`` as a table, one row per model.

  Columns: runs, mean test accuracy, mean final training loss, mean final
  topic-word score, max Corollary-1 relative error, max Theorem-1 drift, and
  for each ODE the max over runs of ``max_{τ,t} |s_GD − s_ODE|``.
  """
  kinds = sorted({k for _, agg in rows for k in agg.get("ode_max_abs_score_dev", {})})
  head = ["model", "runs", "test acc", "final loss", "topic score", "SEN err", "Q drift"]
  head += [f"|s_GD-s_{_ODE_SHORT.get(k, k)}|" for k in kinds]
  body = []
  for name, agg in rows:
    cells = [name, str(agg.get("n_runs", "-")), _fmt(_mean(agg, "test_acc"), ".3f"),
             _fmt(_mean(agg, "final_train_loss"), ".3g"),
             _fmt(_mean(agg, "mean_final_topic_score"), ".3f"),
             _fmt(_max(agg, "max_sen_rel_error"), ".2%"),
             _fmt(_max(agg, "max_invariant_drift"), ".2%")]
    devs = agg.get("ode_max_abs_score_dev", {})
    cells += [_fmt((devs.get(k) or {}).get("max"), ".3g") for k in kinds]
    body.append(cells)
  widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
  lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + body]
  notes = ("SEN err: max over runs and topic words of |‖v_t‖ - Corollary 1| / Corollary 1; "
           "Q drift: max |Q_t(τ) - Q_t(0)| / |s_t growth| (Theorem 1); "
           "|s_GD-s_ODE|: max over runs, recorded steps and topic words.")
  return "\n".join(lines) + "\n" + notes
