"""The headline numbers of runs: a plain-text table for the terminal, report.md for files.

Reads only summary.json documents (:func:`analysis.summary.aggregate` and the
run records), so ``attndyn report DIR`` prints the same table from files as
``attndyn run`` does at the end.
"""
from typing import Mapping, Sequence, Tuple


__all__ = ["label", "table", "theory_lines", "diverged_lines", "ode_failed_lines", "all_odes_failed",
           "md_row", "md_table", "markdown"]

_ODE_SHORT = {"reduced": "red", "extended": "ext", "gradient_flow": "flow"}
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


def _fmt(x, spec: str) -> str:
  return "-" if x is None else format(x, spec)


# The numbers of a table row: (column, key, statistic over runs, format). A run's row shows
# the run's own value (summary.json's run record, or :func:`analysis.summary.run_headline`).
_NUMBERS = (("test acc", "test_acc", "mean", ".3f"),
            ("final loss", "final_train_loss", "mean", ".3g"),
            ("topic score", "mean_final_topic_score", "mean", ".3f"),
            ("SEN err", "max_sen_rel_error", "max", ".2%"),
            ("Q drift", "max_invariant_drift", "max", ".2%"))


def _head(first: list, kinds: list) -> list:
  return first + [column for column, *_ in _NUMBERS] + [
      f"|s_GD-s_{_ODE_SHORT.get(k, k)}|" for k in kinds]


def _numbers(values: Mapping, devs: Mapping, kinds: list) -> list:
  """The formatted numbers of :data:`_NUMBERS` in ``values``, then ``devs[kind]`` per ODE."""
  return ([_fmt(values.get(key), spec) for _, key, _, spec in _NUMBERS]
          + [_fmt(devs.get(k), ".3g") for k in kinds])


def _aggregate_rows(rows: Sequence[Tuple[str, Mapping]]):
  kinds = sorted({k for _, agg in rows for k in agg.get("ode_max_abs_score_dev", {})})
  body = []
  for name, agg in rows:
    values = {key: (agg.get(key) or {}).get(stat) for _, key, stat, _ in _NUMBERS}
    devs = {k: (v or {}).get("max") for k, v in agg.get("ode_max_abs_score_dev", {}).items()}
    body.append([name, str(agg.get("n_runs", "-")), str(agg.get("n_diverged", "-"))]
                + _numbers(values, devs, kinds))
  return _head(["model", "runs", "diverged"], kinds), body


_NOTES = ("SEN err: max over runs and topic words of |‖v_t‖ - Corollary 1| / Corollary 1; "
          "Q drift: max |Q_t(τ) - Q_t(0)| / |s_t growth| (Theorem 1); "
          "|s_GD-s_ODE|: max over runs, recorded steps and topic words; "
          "diverged runs are left out of the means.")


def table(rows: Sequence[Tuple[str, Mapping]]) -> str:
  """Format ``[(label, aggregate), ...]`` as a table, one row per model.

  Columns: runs, diverged runs, mean test accuracy, mean final training loss,
  mean final topic-word score, max Corollary-1 relative error, max Theorem-1
  drift, and for each ODE the max over runs of ``max_{τ,t} |s_GD − s_ODE|``.
  """
  head, body = _aggregate_rows(rows)
  widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
  lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + body]
  return "\n".join(lines) + "\n" + _NOTES + "".join("\n" + f for f in theory_lines(rows))


def theory_lines(rows: Sequence[Tuple[str, Mapping]]) -> list:
  """One line per model whose runs leave the region where Lu et al.'s theory holds (the
  atlas's tolerances, :data:`attndyn.atlas.TOLERANCES`), naming the broken assumption."""
  from attndyn.analysis.atlas import summary_flags
  from attndyn.atlas import TOLERANCES
  out = []
  for name, agg in rows:
    flags = summary_flags(agg, TOLERANCES)
    if flags:
      out.append(f"outside the theory ({name}): " + "; ".join(
          f"{assumption} broken, {measure} = {value:.3g} > {bound:g}" + _cause(measure, agg)
          for assumption, measure, value, bound in flags) + " (see `attndyn atlas`)")
  return out


def _cause(measure: str, agg: Mapping) -> str:
  """What moved, for a broken Lemma 2: the reduced ODE holds the non-topic embeddings fixed,
  and their motion under GD, not their scores', is what separates the two (docs/atlas.md)."""
  moved = (agg.get("nontopic_to_topic_norm_ratio") or {}).get("max")
  if measure != "ode_rel_dev" or moved is None:
    return ""
  return (f" (the non-topic embeddings, which the reduced ODE holds fixed, moved: norm change "
          f"{moved:.3g} of the smallest topic-word norm)")


def _value(v) -> str:
  """A sweep coordinate as written in the report (a float in ``g`` format)."""
  return format(v, "g") if isinstance(v, float) else str(v)


def _point_text(point: Mapping) -> str:
  return ", ".join(f"{k}={_value(v)}" for k, v in point.items())


def diverged_lines(doc: Mapping) -> list:
  """One line per run whose gradient descent diverged (summary.json ``doc``), or ``[]``."""
  lines = []
  for item in doc["aggregate"].get("diverged", []):
    point = doc["points"][item["run"]]
    lines.append(f"diverged: run {item['run']} ({_point_text(point)}) at step "
                 f"{item['failed_at']}; frozen there and left out of the means")
  return lines


# ODE solves named one by one per stage, then counted (a sweep may hold thousands of runs)
_ODE_LINES = 10
# what to change for each of dynamics.trajectory.FAILURE_REASONS
_ODE_REMEDY = {"max_steps": "raise ode.max_steps",
               "step_size_underflow": "lower ode.dtmin or loosen ode.rtol/ode.atol",
               "non_finite": "the state left the finite numbers: lower train.lr or the run's "
                             "length",
               "solver_error": "try another ode.solver"}


def _ode_failures(doc: Mapping, kind: str) -> list:
  """``(run, failed_at, reason)`` of each run whose ``kind`` ODE failed (summary.json ``doc``)."""
  return [(i, r["ode_failed_at"][kind], (r.get("ode_failure_reason") or {}).get(kind))
          for i, r in enumerate(doc["runs"])
          if (r.get("ode_failed_at") or {}).get(kind) is not None]


def ode_failed_lines(doc: Mapping) -> list:
  """One line per ODE solve that failed (summary.json ``doc``; at most :data:`_ODE_LINES` per
  stage, then how many more), as :func:`diverged_lines` does for gradient descent, or ``[]``."""
  lines = []
  kinds = sorted({k for r in doc["runs"] for k in (r.get("ode_failed_at") or {})})
  for kind in kinds:
    failed = _ode_failures(doc, kind)
    for i, t, reason in failed[:_ODE_LINES]:
      lines.append(f"ode failed: {kind} of run {i} ({_point_text(doc['points'][i])}) at "
                   f"t={_fmt(t, 'g')} ({reason or 'unknown reason'}); its deviation from GD "
                   f"is left out")
    if len(failed) > _ODE_LINES:
      lines.append(f"ode failed: {kind} of {len(failed) - _ODE_LINES} more run(s)")
  return lines


def all_odes_failed(doc: Mapping) -> list:
  """The ODE stages every solve of which failed (summary.json ``doc``), each as
  ``(kind, reason of its first run, remedy)``: a run whose ODE columns are all empty."""
  out = []
  n = len(doc["runs"])
  for kind, count in sorted((doc["aggregate"].get("ode_n_failed") or {}).items()):
    if n and count == n:
      reason = (doc["runs"][0].get("ode_failure_reason") or {}).get(kind) or "unknown"
      out.append((kind, reason, _ODE_REMEDY.get(reason, "check the ode section of the config")))
  return out


def md_row(cells: Sequence) -> str:
  """One line of a markdown table: each cell's ``|`` escaped, its newlines made spaces."""
  return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def md_table(head: Sequence, body: Sequence[Sequence]) -> list:
  """A markdown table's lines: ``head``, the rule under it, then one line per row of ``body``
  (report.md, replication.md, the published tables, explain.md)."""
  return [md_row(head), "|" + "---|" * len(head)] + [md_row(row) for row in body]


def _run_rows(doc: Mapping):
  runs = doc["runs"]
  coords = list(doc["points"][0]) if doc["points"] else []
  kinds = sorted({k for r in runs for k in r.get("ode_max_abs_score_dev", {})})
  body = []
  for i, (run, point) in enumerate(zip(runs, doc["points"])):
    status = "ok" if run.get("failed_at") is None else f"diverged at step {run['failed_at']}"
    from attndyn.analysis.summary import run_headline   # not at import: the CLI's parser loads this module
    numbers = _numbers({**run, **run_headline(run)}, run["ode_max_abs_score_dev"], kinds)
    if run.get("failed_at") is not None:  # frozen parameters: the numbers mean nothing
      numbers = ["-"] * len(numbers)
    body.append([str(i)] + [_value(point[c]) for c in coords] + [status] + numbers)
  return _head(["run"] + coords + ["status"], kinds), body


def markdown(doc: Mapping, *, figures: Sequence[str] = (), source: str = "") -> str:
  """report.md: the headline table, every run, diverged runs, ODE deviations, figures.

  Args:
    doc: a summary.json document.
    figures: PNG file names to embed (next to report.md).
    source: the results directory, named in the title.
  """
  name = label(doc["config"])
  agg = doc["aggregate"]
  cfg = doc["config"]
  grid = cfg["sweep"].get("grid", {})
  lr = (f"lr in {{{', '.join(format(v, 'g') for v in grid['train.lr'])}}}"
        if "train.lr" in grid else f"lr {cfg['train']['lr']:g}")
  out = [f"# attndyn report: {name}" + (f" ({source})" if source else ""), "",
         f"{agg.get('n_runs')} runs: {cfg['train']['optimizer']} with {lr} for "
         f"{cfg['train']['steps']} steps, ODE {cfg['ode']['kind']}, {cfg['precision']}; "
         f"J={cfg['task']['n_topics']}, M={cfg['task']['vocab_size']}, "
         f"m={cfg['task']['n_nontopic']}.", "", "## Headline (aggregate over runs)", ""]
  out += md_table(*_aggregate_rows([(name, agg)])) + ["", _NOTES, "", "## Runs", ""]
  out += md_table(*_run_rows(doc)) + ["", "## Diverged runs", ""]
  lines = diverged_lines(doc)
  out += [f"- {line[len('diverged: '):]}" for line in lines] or ["None: every run stayed finite."]
  out += ["", "## ODE deviations from gradient descent", ""]
  devs = agg.get("ode_max_abs_score_dev", {})
  if not devs:
    out.append("No ODE was run (ode.kind = none).")
  for kind, stats in devs.items():
    final = agg.get("ode_final_abs_score_dev", {}).get(kind) or {}
    failed = _ode_failures(doc, kind)
    out.append(f"- {kind}: max over runs of max_(τ,t) |s_GD - s_ODE| = "
               f"{_fmt(stats.get('max'), '.3g')} (mean {_fmt(stats.get('mean'), '.3g')}); "
               f"at the last step, mean {_fmt(final.get('mean'), '.3g')}; "
               f"{len(failed)} ODE run(s) failed"
               + (": " + ", ".join(f"run {i} at t={t}" for i, t, _ in failed) if failed else "")
               + ".")
  if doc.get("errors"):
    out += ["", "## Failed stages", ""]
    out += [f"- {stage}: {message}" for stage, message in doc["errors"].items()]
  if figures:
    out += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
  return "\n".join(out) + "\n"
