"""The config reference of docs/usage.md, generated from the schema so the two cannot drift.

One row per key the schema accepts (:data:`attndyn.schema.TOP_LEVEL`, then each
section of :data:`attndyn.schema.SECTIONS` in order):

* the **default** is what an empty config gives, ``RunConfig.from_dict({}).to_dict()``,
  written as TOML (``unset`` where it is ``None``);
* the **meaning** is the field's entry in its dataclass's ``Attributes:`` docstring
  (``RunConfig``, ``TopicTaskConfig``, ``LuModelConfig``, ``TrainConfig``,
  ``SweepConfig``, ``ODEConfig``), followed by the allowed values where the code
  holds them as a tuple (``CLASSIFIERS``, ``OPTIMIZERS``, ...), unless the
  docstring already names them all.

So a field's meaning lives in one place, its docstring; edit it there and run

    python -m attndyn.config_reference --write

which replaces the table between the markers in docs/usage.md
(``tests/test_config_reference.py`` fails while they differ).
"""
import argparse
import inspect
import re
import sys
from pathlib import Path

from attndyn import config, schema, tomlwrite
from attndyn.dynamics.ode import SOLVERS
from attndyn.dynamics.optimizers import OPTIMIZERS
from attndyn.dynamics.reduced_ode import FORMS
from attndyn.dynamics.train import SAMPLING, TrainConfig
from attndyn.models.classifiers import CLASSIFIERS, FC_INITS
from attndyn.models.lu import PARAM_GROUPS, LuModelConfig
from attndyn.models.normalisers import NAMED_NORMALISERS
from attndyn.tasks.topic import TopicTaskConfig

__all__ = ["REFERENCE", "BEGIN", "END", "CLASSES", "NOT_A_FIELD", "ALLOWED", "attributes",
           "meaning", "keys", "markdown_table", "block", "readme_block", "write", "main"]

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "usage.md"
BEGIN = ("<!-- config-reference: generated from the schema by "
         "`python -m attndyn.config_reference --write`; edit the docstrings, not this table -->")
END = "<!-- /config-reference -->"

# Where each section's meanings live ("" is the top level).
CLASSES = {"": config.RunConfig, "task": TopicTaskConfig, "model": LuModelConfig,
           "train": TrainConfig, "sweep": config.SweepConfig, "ode": config.ODEConfig}
# The one key that is no dataclass field: from_dict reads it and picks the task.
NOT_A_FIELD = {"task.kind": "which task: ``topic`` (the synthetic topic-word task of Section 3)."}
# Keys whose values come from a fixed set in the code.
ALLOWED = {
    "precision": config.PRECISIONS, "gd_path": config.GD_PATHS, "task.kind": config.TASK_KINDS,
    "model.classifier": CLASSIFIERS, "model.fc_init": FC_INITS, "model.freeze": PARAM_GROUPS,
    "model.normaliser": NAMED_NORMALISERS, "train.optimizer": OPTIMIZERS,
    "train.sampling": SAMPLING, "sweep.grid": config.GRID_FIELDS, "ode.kind": config.ODE_KINDS,
    "ode.form": FORMS, "ode.solver": tuple(SOLVERS),
}
_ALLOWED_WORD = {"model.freeze": "Any of", "sweep.grid": "Allowed fields"}


def attributes(cls) -> dict:
  """``{field: text}`` from the ``Attributes:`` section of ``cls``'s Google-style docstring."""
  lines = inspect.getdoc(cls).splitlines()
  start = lines.index("Attributes:") + 1
  out, name = {}, None
  for line in lines[start:]:
    if not line.strip():
      break
    match = re.match(r"  (\w+): (.*)", line)
    if match:
      name = match.group(1)
      out[name] = match.group(2)
    elif line.startswith("    ") and name:
      out[name] += " " + line.strip()
    else:
      break
  return out


def _markdown(text: str) -> str:
  """Docstring reST to a Markdown table cell: ````x```` and ``:func:`x``` become `` `x` ``."""
  text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
  text = text.replace("``", "`")
  text = text.replace("|", r"\|")
  if re.match(r"[a-z]{3,}\b", text):   # a word, not a symbol such as d or d'
    text = text[:1].upper() + text[1:]
  return text if text.endswith(".") else text + "."


def meaning(key: str) -> str:
  """The Markdown meaning of a dotted key (``"model.embed_std"``, ``"precision"``)."""
  section, _, name = key.rpartition(".")
  text = NOT_A_FIELD.get(key) or attributes(CLASSES[section])[name]
  text = _markdown(text)
  named = set(re.findall(r'`"?([\w.]+)"?`', text))
  if key in ALLOWED and not set(ALLOWED[key]) <= named:
    values = ", ".join(f"`{v}`" for v in ALLOWED[key])
    text += f" {_ALLOWED_WORD.get(key, 'One of')}: {values}."
  return text


def _default(value) -> str:
  if value is None:
    return "unset"
  return f"`{tomlwrite._value(value)}`"


def keys() -> list:
  """Every dotted key the schema accepts, in table order."""
  return list(schema.TOP_LEVEL) + [f"{s}.{k}" for s, table in schema.SECTIONS.items()
                                   for k in table]


def markdown_table() -> str:
  """The config reference: a Markdown table of every key, its default and its meaning."""
  defaults = config.RunConfig.from_dict({}).to_dict()
  rows = ["| key | default | meaning |", "|---|---|---|"]
  rows += [f"| `{k}` | {_default(defaults[k])} | {meaning(k)} |" for k in schema.TOP_LEVEL]
  sections = attributes(config.RunConfig)
  for section, table in schema.SECTIONS.items():
    rows.append(f"| **[{section}]** | | {_markdown(sections[section])} |")
    rows += [f"| `{k}` | {_default(defaults[section][k])} | {meaning(f'{section}.{k}')} |"
             for k in table]
  return "\n".join(rows) + "\n"


def block() -> str:
  """The table between its markers, as it stands in docs/usage.md."""
  return f"{BEGIN}\n\n{markdown_table()}\n{END}"   # blank lines: the table is its own block


def readme_block(text: str) -> str:
  """The marked block of the text, or ``""`` if the markers are missing."""
  match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, flags=re.S)
  return match.group(0) if match else ""


def write(path=REFERENCE) -> bool:
  """Replace the marked block of ``path`` by the generated one; True if it changed."""
  path = Path(path)
  text = path.read_text(encoding="utf-8")
  old = readme_block(text)
  if not old:
    raise SystemExit(f"{path}: the markers {BEGIN!r} ... {END!r} are missing")
  new_text = text.replace(old, block(), 1)
  if new_text != text:
    path.write_text(new_text, encoding="utf-8")
  return new_text != text


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--write", action="store_true",
                      help="replace the table in docs/usage.md (otherwise print it)")
  parser.add_argument("--check", action="store_true",
                      help="exit 1 if docs/usage.md's table differs from the generated one")
  args = parser.parse_args(argv)
  if args.write:
    print("docs/usage.md updated" if write() else "docs/usage.md already up to date")
  elif args.check:
    same = readme_block(REFERENCE.read_text(encoding="utf-8")) == block()
    print("docs/usage.md is up to date" if same else
          "docs/usage.md's config reference is stale: python -m attndyn.config_reference --write")
    return 0 if same else 1
  else:
    sys.stdout.write(markdown_table())
  return 0


if __name__ == "__main__":
  sys.exit(main())
