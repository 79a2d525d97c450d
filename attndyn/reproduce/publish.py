"""Publish a finished reproduction into the repository: ``docs/replication/PAPER.md`` (+ ``.json``, figures).

``python -m attndyn.reproduce.publish DIR [--to docs/replication] [--note TEXT] [--merge]``
reads ``DIR/replication.json`` (written by ``attndyn reproduce PAPER --out DIR``)
and writes, under ``--to``:

* ``PAPER.md``: when and where it ran (date, the commit of each experiment's
  code, the command, the machine), each experiment's wall time, the counts
  pass / fail / inconclusive / quick / info, and the table with its figures;
* ``PAPER.json``: the rows (id, verdict, ours with its interval, tolerance
  and its source) that ``tests/test_published.py`` compares with the claim ids
  the code defines (:func:`claim_patterns`), so the documents cannot silently
  drift from the code;
* ``PAPER/*.png``: the figures, downscaled and palette-quantised (a few
  hundred kB each at most).

With ``--merge`` the run republishes only its own experiments: their entries
and rows replace the same-named ones of the published ``PAPER.json``, every
other experiment keeps its entry (with its own revision and wall time), rows,
table lines and section of the published ``PAPER.md`` as they are, the counts
are recomputed, and the earlier note follows the new one. Nothing is computed
here: every row comes from a run.

Claim ids are read from the code without running it: every
``rep.claim(ID, ...)`` call of an experiment module, ``ID`` an f-string whose
``{NAME}`` is the experiment's name and whose other fields match any text.
"""
import argparse
import ast
import datetime
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from attndyn import atomic
from attndyn.report import md_table
from attndyn.reproduce import report, runner
from attndyn.tasks.errors import ConfigError

__all__ = ["MAX_WIDTH", "COLOURS", "claim_patterns", "id_drift", "missing", "markdown", "publish",
           "main"]

MAX_WIDTH = 1400   # pixels; the figures are read on a screen, not printed
COLOURS = 128      # palette size of the published PNGs


def _id_pattern(node: ast.AST, name: str, assigned: Dict[str, ast.AST]) -> Optional[str]:
  """The regex of a claim id expression (a string, an f-string, or a name bound to one)."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return re.escape(node.value)
  if isinstance(node, ast.Name) and node.id in assigned:
    return _id_pattern(assigned[node.id], name, {})
  if isinstance(node, ast.JoinedStr):
    parts = []
    for value in node.values:
      if isinstance(value, ast.Constant):
        parts.append(re.escape(value.value))
      elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) \
          and value.value.id == "NAME":
        parts.append(re.escape(name))
      else:
        parts.append(r"[^\s]+")
    return "".join(parts)
  return None


def claim_patterns(module) -> List[str]:
  """The regexes of the claim ids an experiment module can produce (read from its source).

  Raises:
    ValueError: a ``claim(...)`` call whose id is neither a string, an
      f-string, nor a name assigned one of those in the same module.
  """
  path = Path(module.__file__)
  tree = ast.parse(path.read_text(encoding="utf-8"))
  assigned = {node.targets[0].id: node.value for node in ast.walk(tree)
              if isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, (ast.Constant, ast.JoinedStr))}
  patterns = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and node.args and \
        getattr(node.func, "attr", getattr(node.func, "id", None)) == "claim":
      pattern = _id_pattern(node.args[0], module.NAME, assigned)
      if pattern is None:
        raise ValueError(f"{path.name}:{node.lineno}: claim id {ast.unparse(node.args[0])} is "
                         "not a string or f-string the publisher can read")
      if pattern not in patterns:
        patterns.append(pattern)
  return patterns


def id_drift(paper: str, rows: List[dict], experiments: List[str], *,
             complete: bool = True) -> List[str]:
  """How published rows and the code's claim ids differ, one line per difference (empty: none).

  A row whose id no ``claim(...)`` of its experiment can produce is drift; with
  ``complete`` (full mode, where every claim runs) so is a ``claim(...)`` of a
  published experiment that no row matches. Quick mode skips some claims
  (e.g. settings lists left empty), and :func:`missing` names them instead.
  """
  modules = {m.NAME: m for m in runner.experiment_modules(paper)}
  problems = []
  for name in experiments:
    if name not in modules:
      problems.append(f"{paper}: experiment {name!r} is published but the code has none")
      continue
    patterns = claim_patterns(modules[name])
    ids = [r["id"] for r in rows if r.get("experiment") == name]
    for cid in ids:
      if not any(re.fullmatch(p, cid) for p in patterns):
        problems.append(f"{paper}.{name}: published row {cid!r} is not a claim of the code")
    if complete:
      problems += [f"{paper}.{name}: the code's claim /{p}/ has no published row"
                   for p in missing(modules[name], ids)]
  return problems


def missing(module, ids: List[str]) -> List[str]:
  """The claim-id patterns of ``module`` that none of ``ids`` matches."""
  return [p for p in claim_patterns(module) if not any(re.fullmatch(p, cid) for cid in ids)]


def _flat(name: str) -> str:
  return name.replace("/", "-")


def _shrink_png(src: Path, dst: Path) -> None:
  """Downscale ``src`` to at most ``MAX_WIDTH`` pixels wide and palette-quantise it into ``dst``."""
  from PIL import Image
  with Image.open(src) as img:
    img = img.convert("RGB")
    if img.width > MAX_WIDTH:
      img = img.resize((MAX_WIDTH, round(img.height * MAX_WIDTH / img.width)), Image.LANCZOS)
    img = img.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    img.save(tmp, format="PNG", optimize=True)
    tmp.replace(dst)


def _code(exp: dict, dirty: str) -> str:
  """The commit an experiment ran (its first 12 digits), ``dirty`` appended if uncommitted
  changes ran with it."""
  rev = exp.get("revision") or {}
  return rev.get("commit", "unknown")[:12] + (dirty if rev.get("dirty") else "")


def _revisions(doc: dict) -> List[str]:
  found = []
  for exp in doc["experiments"]:
    text = _code(exp, " + uncommitted changes")
    if text not in found:
      found.append(text)
  return found


def _page_parts(page: str) -> Tuple[Dict[str, str], Dict[str, str]]:
  """A published page's table lines by their first cell and its experiment sections by name."""
  lines = {}
  for line in page.split("\n"):
    if line.startswith("| "):
      lines.setdefault(line[2:].split(" | ", 1)[0], line)
  sections = {}
  for chunk in re.split(r"\n(?=## )", page)[1:]:
    sections[chunk[3:].split(":", 1)[0]] = chunk.rstrip("\n")
  return lines, sections


def markdown(doc: dict, note: str = "",
             kept: Tuple[Dict[str, str], Dict[str, str]] = ({}, {})) -> str:
  """The published page: provenance, per-experiment wall times, then the replication table.

  ``kept``: the table lines (by claim id) and sections (by experiment name)
  taken as they are from the page of the table merged into (``--merge``).
  """
  paper = doc["paper"]
  finished = sorted(e["finished"] for e in doc["experiments"] if e.get("finished"))
  machine = next((e.get("machine") for e in doc["experiments"] if e.get("machine")), None) or {}
  env = doc.get("environment") or {}
  accelerator = ("no accelerator" if env.get("backend") == "cpu"
                 else f"{', '.join(env.get('devices') or ['?'])} ({env.get('backend')})")
  lines = [f"# {paper}: replication table", ""]
  lines += [f"- Ran: {finished[0][:10] if finished else 'unknown'}"
            + (f" to {finished[-1][:10]}" if finished and finished[-1][:10] != finished[0][:10]
               else ""),
            f"- Code: commit {', '.join(_revisions(doc))}",
            f"- Machine: {machine.get('cpus', '?')} CPU cores, "
            f"{machine.get('memory_gb', '?')} GB memory, {accelerator}",
            f"- Mode: {', '.join(doc['modes'])}", ""]
  if note:
    lines += [note, ""]
  wall = lambda secs: f"{secs / 60:.1f} min" if secs is not None else "–"
  lines += md_table(["experiment", "mode", "wall time", "code", "finished", "command"],
                    [[exp["name"], exp["mode"], wall(exp.get("seconds")),
                      _code(exp, " + uncommitted"), (exp.get("finished") or "–")[:16],
                      f"`{' '.join(exp.get('command') or [])}`"] for exp in doc["experiments"]])
  lines.append("")
  modules = {m.NAME: m for m in runner.experiment_modules(paper)}
  skipped = [f"`{p}`" for e in doc["experiments"] if e["name"] in modules
             for p in missing(modules[e["name"]], [r["id"] for r in doc["claims"]
                                                  if r.get("experiment") == e["name"]])]
  if skipped:
    lines += ["Claims of these experiments that this mode did not produce (their id patterns): "
              + ", ".join(skipped) + ".", ""]
  def linked(text: str) -> str:   # figure links point at PAPER/
    return re.sub(r"!\[([^\]]*)\]\(([^)]*)\)",
                  lambda m: f"![{m.group(1)}]({paper}/{_flat(m.group(2))})", text)
  kept_lines, kept_sections = kept
  # The table's own title line is replaced by ours.
  body = report.head(doc)[2:]
  body += [kept_lines.get(r["id"]) or linked(report.table_row(r)) for r in doc["claims"]] + [""]
  for exp in doc["experiments"]:
    body += [kept_sections.get(exp["name"]) or linked(report.section(exp)), ""]
  return "\n".join(lines) + "\n" + "\n".join(body)


def merge(doc: dict, to: Path, note: str):
  """``doc`` (a run's replication.json) merged into the table published in ``to``.

  Returns ``(merged, note, kept)``: the document whose experiments and rows
  are the published ones with ``doc``'s experiments in their place (new ones
  last), the note followed by the published one, and the page's lines and
  sections of the experiments kept (see :func:`markdown`).

  Raises:
    ConfigError: no table to merge into, one of another mode, or a page that
      lacks a line or section its PAPER.json publishes.
  """
  paper = doc["paper"]
  path, page = Path(to) / f"{paper}.json", Path(to) / f"{paper}.md"
  if not path.is_file() or not page.is_file():
    raise ConfigError(f"--merge: {str(to)!r} holds no {paper}.json and {paper}.md to merge into; "
                      "publish without --merge first.")
  try:
    old = json.loads(path.read_text(encoding="utf-8"))
    old_rows, old_experiments = old["claims"], old["experiments"]
    lines, sections = _page_parts(page.read_text(encoding="utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
    raise ConfigError(f"--merge: {str(path)!r} is not a table this publisher wrote ({err}).") \
        from None
  if old.get("modes") != doc["modes"]:
    raise ConfigError(f"--merge: the run is {', '.join(doc['modes'])} mode but {str(path)!r} is "
                      f"{', '.join(old.get('modes') or ['?'])}: one table holds one mode.")
  new = {e["name"]: e for e in doc["experiments"]}
  kept = [e for e in old_experiments if e["name"] not in new]
  kept_rows = [r for r in old_rows if r["experiment"] not in new]
  lacking = [r["id"] for r in kept_rows if r["id"] not in lines] + \
      [e["name"] for e in kept if e["name"] not in sections]
  if lacking:
    raise ConfigError(f"--merge: {str(page)!r} lacks the line or section of {lacking[0]!r} "
                      f"that {str(path)!r} publishes; republish the whole table.")
  order = [e["name"] for e in old_experiments] + [n for n in new if n not in
                                                  {e["name"] for e in old_experiments}]
  experiments = [new.get(n) or next(e for e in kept if e["name"] == n) for n in order]
  rows = [r for n in order for r in (doc["claims"] if n in new else kept_rows)
          if r["experiment"] == n]
  merged = dict(doc, claims=rows, experiments=experiments, counts=report.counts(rows))
  earlier = (f"Kept from the table published {str(old.get('published'))[:10]}: "
             f"{', '.join(e['name'] for e in kept) or 'no experiment'}; its note: "
             f"{old.get('note') or '(none)'}")
  return merged, (note + "\n\n" if note else "") + earlier, \
      ({r["id"]: lines[r["id"]] for r in kept_rows}, {e["name"]: sections[e["name"]] for e in kept})


def publish(out: Path, to: Path, note: str = "", *, merge_into: bool = False) -> dict:
  """Write ``to/PAPER.md``, ``to/PAPER.json`` and ``to/PAPER/*.png`` from the reproduction in ``out``.

  With ``merge_into`` only the run's experiments replace theirs in the table
  already in ``to`` (:func:`merge`); the figures of the others stay.

  Raises:
    ConfigError: ``out`` holds no replication.json, or one the code's claim ids disagree with
      (after merging: those of the whole table), or one :func:`merge` refuses.
  """
  path = Path(out) / report.JSON
  if not path.is_file():
    raise ConfigError(f"{str(out)!r} holds no {report.JSON}: run `attndyn reproduce PAPER --out "
                      f"{out}` first (or `--report-only` to rebuild it).")
  try:
    doc = json.loads(path.read_text(encoding="utf-8"))
    paper = doc["paper"]
    rows, experiments = doc["claims"], doc["experiments"]
  except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
    raise ConfigError(f"{str(path)!r} is not a replication.json attndyn wrote ({err}); rebuild "
                      f"it with `attndyn reproduce PAPER --out {out} --report-only`.") from None
  runner.paper_module(paper)
  kept = ({}, {})
  if merge_into:
    doc, note, kept = merge(doc, to, note)
    rows, experiments = doc["claims"], doc["experiments"]
  drift = id_drift(paper, rows, [e["name"] for e in experiments],
                   complete=doc.get("modes") == ["full"])
  if drift:
    made = (f"{str(path)!r} merged into {str(Path(to) / f'{paper}.json')!r}" if merge_into
            else repr(str(path)))
    raise ConfigError(f"{made} was made by other code than this checkout's: {drift[0]}"
                      + (f" (and {len(drift) - 1} more)" if len(drift) > 1 else "")
                      + ". Rerun the reproduction with this code"
                      + (" (every experiment whose claims changed)." if merge_into else "."))
  to = Path(to)
  for exp in experiments:   # a kept experiment's entry has no figures: its own stay
    for fig in exp.get("figures") or []:
      src = Path(out) / fig
      if src.is_file():
        _shrink_png(src, to / paper / _flat(fig))
  published = {k: doc.get(k) for k in ("paper", "title", "modes", "environment", "counts")}
  published["published"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  published["note"] = note
  published["experiments"] = [{k: e.get(k) for k in ("name", "mode", "command", "seconds",
                                                     "finished", "revision", "machine", "error")}
                              for e in experiments]
  published["claims"] = [{k: r.get(k) for k in ("id", "experiment", "status", "would_be",
                                                "n_needed", "paper", "paper_ref", "ours",
                                                "tolerance", "unit")} for r in rows]
  to.mkdir(parents=True, exist_ok=True)
  runner.write_json(to / f"{paper}.json", published)
  atomic.write_text(to / f"{paper}.md", markdown(doc, note, kept))
  return published


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m attndyn.reproduce.publish",
      description="Copy a finished reproduction (DIR/replication.json and its figures) into "
                  "docs/replication/PAPER.md, PAPER.json and PAPER/*.png.")
  parser.add_argument("out", metavar="DIR", help="the --out of `attndyn reproduce PAPER`")
  parser.add_argument("--to", default="docs/replication", metavar="FOLDER")
  parser.add_argument("--note", default="", help="a paragraph shown under the provenance, e.g. "
                                                  "why full mode was not run")
  parser.add_argument("--merge", action="store_true",
                      help="republish only DIR's experiments: they replace theirs in the table "
                           "already in FOLDER, the others stay as published")
  args = parser.parse_args(argv)
  try:
    doc = publish(Path(args.out), Path(args.to), args.note, merge_into=args.merge)
  except ConfigError as err:
    print(f"attndyn: error: {err}", file=sys.stderr)
    return 2
  except OSError as err:
    print(f"attndyn: error: could not write under {args.to!r}: {err.strerror or err}",
          file=sys.stderr)
    return 2
  print(f"wrote {args.to}/{doc['paper']}.md: {report.summary(doc['counts'])}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
