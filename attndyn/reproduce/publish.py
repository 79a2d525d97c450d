"""Publish a finished reproduction into the repository: ``docs/replication/PAPER.md`` (+ ``.json``, figures).

``python -m attndyn.reproduce.publish DIR [--to docs/replication] [--note TEXT]``
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
from typing import Dict, List, Optional

from attndyn.reproduce import report, runner
from tasks.errors import ConfigError

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


def _revisions(doc: dict) -> List[str]:
  found = []
  for exp in doc["experiments"]:
    rev = exp.get("revision") or {}
    text = rev.get("commit", "unknown")[:12] + (" + uncommitted changes" if rev.get("dirty") else "")
    if text not in found:
      found.append(text)
  return found


def markdown(doc: dict, note: str = "") -> str:
  """The published page: provenance, per-experiment wall times, then the replication table."""
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
  lines += ["| experiment | mode | wall time | command |", "|---|---|---|---|"]
  for exp in doc["experiments"]:
    secs = exp.get("seconds")
    wall = f"{secs / 60:.1f} min" if secs is not None else "–"
    command = " ".join(exp.get("command") or [])
    lines.append(f"| {exp['name']} | {exp['mode']} | {wall} | `{command}` |")
  lines.append("")
  modules = {m.NAME: m for m in runner.experiment_modules(paper)}
  skipped = [f"`{p}`" for e in doc["experiments"] if e["name"] in modules
             for p in missing(modules[e["name"]], [r["id"] for r in doc["claims"]
                                                  if r.get("experiment") == e["name"]])]
  if skipped:
    lines += ["Claims of these experiments that this mode did not produce (their id patterns): "
              + ", ".join(skipped) + ".", ""]
  body = report.markdown(doc)
  # The table's own title line is replaced by ours; its figure links point at PAPER/.
  body = body.split("\n", 2)[2]
  body = re.sub(r"!\[([^\]]*)\]\(([^)]*)\)",
                lambda m: f"![{m.group(1)}]({paper}/{_flat(m.group(2))})", body)
  return "\n".join(lines) + "\n" + body


def publish(out: Path, to: Path, note: str = "") -> dict:
  """Write ``to/PAPER.md``, ``to/PAPER.json`` and ``to/PAPER/*.png`` from the reproduction in ``out``.

  Raises:
    ConfigError: ``out`` holds no replication.json, or one the code's claim ids disagree with.
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
  drift = id_drift(paper, rows, [e["name"] for e in experiments],
                   complete=doc.get("modes") == ["full"])
  if drift:
    raise ConfigError(f"{str(path)!r} was made by other code than this checkout's: {drift[0]}"
                      + (f" (and {len(drift) - 1} more)" if len(drift) > 1 else "")
                      + ". Rerun the reproduction with this code.")
  to = Path(to)
  for exp in experiments:
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
  page = to / f"{paper}.md"
  tmp = page.with_name(f".{page.name}.tmp")
  tmp.write_text(markdown(doc, note), encoding="utf-8")
  tmp.replace(page)
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
  args = parser.parse_args(argv)
  try:
    doc = publish(Path(args.out), Path(args.to), args.note)
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
