"""``replication.md`` and ``replication.json``: one row per claim, from ``DIR/experiments/*.json``.

Columns: the claim, its figure or equation, the paper's number (with the page
or table it is printed on), ours (mean ± 95% CI over seeds and n; a proportion
with its Wilson interval; a paired difference), the tolerance it is judged by,
the tolerance's source (the paper's words, or ``ours:`` and why), and the result:
``pass`` (the whole 95% interval meets the tolerance), ``FAIL`` (none of it
does), ``inconclusive`` (it straddles the bound; with the n that would decide
it), ``info`` (reported, not judged) or ``quick`` (the quick mode's budget cannot
reach the paper's regime; the verdict the numbers would get is shown next to it).
"""
import datetime
import importlib
from pathlib import Path
from typing import List, Optional, Sequence

from attndyn import atomic
from attndyn.report import md_row, md_table
from attndyn.analysis import results
from attndyn.reproduce import PAPERS, runner
from attndyn.tasks.errors import ConfigError

__all__ = ["COLUMNS", "VERDICTS", "collect", "format_ours", "format_paper", "format_result",
           "format_source", "counts", "summary", "paper_title", "build", "markdown", "write"]

MARKDOWN, JSON = "replication.md", "replication.json"
COLUMNS = ("id", "claim", "figure", "paper", "ours (95% interval, n)", "tolerance",
           "tolerance source", "result")
VERDICTS = ("pass", "fail", "inconclusive", "quick", "info")
_TITLES = {"lu2021": 'Lu, Mao & Nayak (ICLR 2021), "On the Dynamics of Training Attention Models"'}


def collect(paper: str, out: Path) -> List[dict]:
  """The experiment documents present in ``out/experiments``, in the paper's order."""
  folder = Path(out) / runner.EXPERIMENTS_DIR
  order = {m.NAME: i for i, m in enumerate(runner.experiment_modules(paper))}
  docs = []
  for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
    doc = _read(path)
    if doc.get("name") in order:
      _check_renders(paper, doc, path)
      docs.append(doc)
  return sorted(docs, key=lambda d: order[d["name"]])


def _rerun(path: Path) -> str:
  return f": delete it, or rerun that experiment (--only {path.stem} --force)"


def _damaged(path: Path, why: str) -> ConfigError:
  return ConfigError(f"{str(path)!r} {why}{_rerun(path)}.")


def _read(path: Path) -> dict:
  """An experiment file: a JSON object (a damaged file is one ConfigError naming it)."""
  doc = results.read_json(path, repr(str(path)), then=_rerun(path))
  if not isinstance(doc, dict) or not isinstance(doc.get("name", ""), str):
    raise _damaged(path, "is not an attndyn experiment file (a JSON object with a name)")
  return doc


def _check_renders(paper: str, doc: dict, path: Path) -> None:
  """The report can be built from ``doc`` alone (every entry it reads is there)."""
  try:
    markdown(_document(paper, [doc]))
  except (KeyError, TypeError, ValueError, AttributeError) as err:
    raise _damaged(path, f"is damaged ({type(err).__name__}: {err})") from None


def _num(x, unit: str = "") -> str:
  if x is None:
    return "–"
  if unit == "%":
    return f"{x:.2f}"
  if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3):
    return f"{x:.2e}"
  return f"{x:.4g}"


def format_ours(row: dict) -> str:
  """``mean ± ci (n=…)``; ``k/n runs`` for an all-true claim; ``k/n = p̂ [lo, hi]`` for a
  proportion (Wilson); ``Δ = mean ± ci (paired, n=…)`` for a paired difference; ``Δ = d [lo, hi]``
  for paired 0/1 outcomes (Newcombe), and for two independent groups' fractions."""
  ours, unit = row["ours"], row.get("unit", "")
  n = ours.get("n", 0)
  if n == 0:
    return "no value"
  k = sum(1 for v in ours["values"] if v == 1.0)
  if row["tolerance"]["kind"] == "all_true":
    return f"{k}/{n} runs"
  if ours.get("kind") == "proportion":
    return (f"{k}/{n} = {ours['mean']:.3g} [{ours['lo']:.3g}, {ours['hi']:.3g}] "
            f"(Wilson, n={n})")
  if ours.get("kind") == "paired_proportion":
    return (f"Δ = {ours['mean']:.3g} [{ours['lo']:.3g}, {ours['hi']:.3g}] "
            f"(paired 0/1, Newcombe, n={n})")
  if ours.get("kind") == "proportion_difference":
    ka, na, kb, nb = ours["cells"]
    return (f"Δ = {ka}/{na} − {kb}/{nb} = {ours['mean']:.3g} [{ours['lo']:.3g}, "
            f"{ours['hi']:.3g}] (independent, Newcombe)")
  text = _num(ours["mean"], unit)
  if ours.get("ci95") is not None:
    text += f" ± {_num(ours['ci95'], unit)}"
  if ours.get("kind") == "paired":
    return f"Δ = {text}{' %' if unit == '%' else ''} (paired, n={n})"
  return f"{text}{' %' if unit == '%' else ''} (n={n})"


def format_paper(row: dict) -> str:
  """The paper's number or words, and where they are printed (``(Table 1, p. 7)``)."""
  paper = row["paper"]
  if isinstance(paper, (int, float)) and not isinstance(paper, bool):
    text = f"{_num(paper, row.get('unit', ''))}{' %' if row.get('unit') == '%' else ''}"
  else:
    text = str(paper)
  return text + (f" ({row['paper_ref']})" if row.get("paper_ref") else "")


def _inconclusive(row: dict) -> str:
  n_needed, n = row.get("n_needed"), row["ours"].get("n", 0)
  if n_needed is not None:
    return f"inconclusive (n too small: n ≈ {n_needed} would decide at this mean and spread)"
  if row["ours"].get("kind", "mean") != "proportion" and n < 2:
    return "inconclusive (n too small: one value has no interval; n ≥ 2 needed)"
  return "inconclusive (the estimate sits on the bound)"


def format_result(row: dict) -> str:
  status = row["status"]
  if status == "quick":
    would = row["would_be"]
    return f"quick: not comparable (would {'be ' + _inconclusive(row) if would == 'inconclusive' else would})"
  if status == "inconclusive":
    return _inconclusive(row)
  return {"pass": "pass", "fail": "**FAIL**", "info": "info"}.get(status, status)


def format_source(row: dict) -> str:
  """The tolerance's source; a judged row without one says so."""
  tol = row["tolerance"]
  if tol.get("source"):
    return tol["source"]
  return "–" if tol["kind"] == "info" else "**not given**"


def counts(rows: Sequence[dict]) -> dict:
  out = dict.fromkeys(VERDICTS, 0)
  for row in rows:
    out[row["status"]] = out.get(row["status"], 0) + 1
  return out


def summary(c: dict) -> str:
  """``3 pass, 1 fail, 2 inconclusive, 0 quick (not comparable), 4 info``."""
  return (f"{c.get('pass', 0)} pass, {c.get('fail', 0)} fail, "
          f"{c.get('inconclusive', 0)} inconclusive (n too small), "
          f"{c.get('quick', 0)} quick (not comparable), {c.get('info', 0)} info")


def paper_title(paper: str) -> str:
  """The paper's title: its package's ``TITLE`` (or the table above, or the name)."""
  try:
    package = importlib.import_module(PAPERS[paper])
  except (KeyError, ImportError):
    package = None
  return getattr(package, "TITLE", None) or _TITLES.get(paper, paper)


def build(paper: str, out: Path, *, command: Optional[Sequence[str]] = None,
          environment: Optional[dict] = None) -> dict:
  """The replication.json document from the experiment files in ``out``."""
  return _document(paper, collect(paper, out), command=command, environment=environment)


def _document(paper: str, docs: List[dict], *, command: Optional[Sequence[str]] = None,
              environment: Optional[dict] = None) -> dict:
  rows = [dict(row, experiment=d["name"]) for d in docs for row in d["claims"]]
  modes = sorted({d["mode"] for d in docs})
  return {
      "paper": paper,
      "title": paper_title(paper),
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "command": list(command) if command else None,
      "modes": modes,
      "environment": environment,
      "columns": list(COLUMNS),
      "counts": counts(rows),
      "claims": rows,
      "experiments": [{k: d.get(k) for k in ("name", "title", "mode", "partial", "command", "seconds",
                                             "finished", "error", "figures", "settings",
                                             "details", "revision", "machine")}
                      for d in docs],
  }


def markdown(doc: dict) -> str:
  """The replication.md text of a replication.json document."""
  lines = head(doc) + [table_row(row) for row in doc["claims"]] + [""]
  for exp in doc["experiments"]:
    lines += [section(exp), ""]
  return "\n".join(lines)


def head(doc: dict) -> List[str]:
  """The lines of replication.md above the table's rows: title, commands, mode, counts, header."""
  c = doc["counts"]
  lines = [f"# Replication: {doc['title']}", ""]
  commands = []
  for exp in doc["experiments"]:
    if exp.get("command") and exp["command"] not in commands:
      commands.append(exp["command"])
  if not commands and doc.get("command"):
    commands = [doc["command"]]
  if commands:
    lines += ["Produced by: " + "; ".join(f"`{' '.join(c)}`" for c in commands), ""]
  modes = ", ".join(doc["modes"]) or "none"
  lines += [f"Mode: {modes}. " + (
      "Quick mode uses fewer seeds, epochs and smaller sizes so that it finishes in minutes on "
      "two CPU cores; rows whose paper regime that budget cannot reach are marked "
      "`quick: not comparable` (with the verdict their numbers would get), and the full mode "
      f"(`attndyn reproduce {doc['paper']} --out DIR` without `--quick`) is the real reproduction."
      if "quick" in doc["modes"] else "Full mode: each experiment's full settings (the paper's "
      "sizes, seeds and epochs where it states them), changed only by the command's --set items."),
      ""]
  env = doc.get("environment") or {}
  if env:
    versions = env.get("versions", {})
    lines += [f"Environment: JAX {versions.get('jax')} on {env.get('backend')} "
              f"({', '.join(env.get('devices', []))}), Python {versions.get('python')}.", ""]
  lines += [f"**{summary(c)}.** Ours is the mean over seeds (runs) ± the 95% Student-t "
            f"confidence half-width (exact quantile), with n the number of seeds; a proportion "
            f"shows its 95% Wilson interval, a paired comparison the interval of the per-seed "
            f"differences. A row passes when its whole interval meets the tolerance, fails when "
            f"none of it does, and is inconclusive when the interval straddles the bound (with "
            f"the n that would decide it if the mean and spread stayed as they are). A rule that "
            f"must hold for every run passes only when it holds in all of them (one run where it "
            f"fails is a counterexample). The tolerance source says where each rule comes from: "
            f"the paper's words with their section, table or figure, or `ours:` and the reason.",
            ""]
  return lines + md_table(COLUMNS, [])


def table_row(row: dict) -> str:
  """The claim's line of the replication table (it starts ``| ID |``)."""
  text = row["text"] + (f" — {row['note']}" if row.get("note") else "")
  cells = [row["id"], text, row.get("figure") or "", format_paper(row), format_ours(row),
           row["tolerance"]["text"], format_source(row), format_result(row)]
  return md_row(cells)


def section(exp: dict) -> str:
  """The experiment's section under the table (it starts ``## NAME:``): mode, notes, figures."""
  seconds = exp.get("seconds")
  mode = f"Mode {exp['mode']}" + (f", {seconds:.0f} s" if seconds is not None else "")
  lines = [f"## {exp['name']}: {exp['title']}", "",
           mode + (f", by `{' '.join(exp['command'])}`." if exp.get("command") else ".")]
  if exp.get("partial"):
    lines += ["", "**Unfinished:** this experiment was still running when its results so far "
              "were saved; its remaining claims are missing."]
  if exp.get("error"):
    lines += ["", f"**Error:** `{exp['error']}` (its claims are missing)."]
  notes = (exp.get("details") or {}).get("notes", [])
  if notes:
    lines += [""] + [f"- {n}" for n in notes]
  if exp.get("figures"):
    lines += [""] + [f"![{f}]({f})" for f in exp["figures"]]
  return "\n".join(lines)


def write(paper: str, out: Path, *, command=None, environment=None) -> dict:
  """Write ``replication.json`` and ``replication.md`` into ``out``; returns the JSON document."""
  doc = build(paper, out, command=command, environment=environment)
  runner.write_json(Path(out) / JSON, doc)
  atomic.write_text(Path(out) / MARKDOWN, markdown(doc))
  return doc
