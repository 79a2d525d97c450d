"""``--set section.key=value`` overrides applied to a TOML-shaped config dict.

The value is read as a TOML value (``0.05``, ``true``, ``["keys"]``,
``{"train.lr" = [0.05, 0.1]}``); a bare word that is not TOML (``fc``,
``float64``) is taken as a string; the string ``none`` unsets an optional key
(``--set model.query_norm=none``, see :func:`attndyn.schema.coerce`). Paths may go deeper than one
level into tables: ``--set sweep.grid.train.lr=[0.05,0.1]`` adds one grid axis.
"""
import copy
import re
import tomllib

from attndyn.tasks.errors import ConfigError, digits_error, too_many_digits

__all__ = ["parse_value", "parse", "apply"]

_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_SYNTAX = "section.key=value, e.g. --set train.lr=0.05 or --set model.freeze='[\"keys\"]'"


def parse_value(text: str, where: str):
  """A ``--set`` value: TOML, else a bare-word string."""
  try:
    return tomllib.loads(f"v = {text}")["v"]
  except tomllib.TOMLDecodeError:
    if _BARE.match(text.strip()):
      return text.strip()
    raise ConfigError(f"--set {where!r}: the value {text!r} is not a TOML value "
                      f"(a number, true/false, a \"string\", a [list] or an {{inline = table}}) "
                      f"nor a bare word.") from None
  except ValueError as err:
    if too_many_digits(err):
      raise digits_error(f"--set {where[:60]!r}{'...' if len(where) > 60 else ''}") from None
    raise


def parse(item: str):
  """``"train.lr=0.05"`` -> ``(["train", "lr"], 0.05)``.

  Raises:
    ConfigError: no ``=``, an empty or malformed path, or a value that is not TOML.
  """
  path, sep, text = item.partition("=")
  path = path.strip()
  if not sep or not _PATH.match(path):
    raise ConfigError(f"--set {item!r} is not allowed: {_SYNTAX}.")
  if not text.strip():
    raise ConfigError(f"--set {item!r} has no value: {_SYNTAX}.")
  return path.split("."), parse_value(text, item)


def apply(raw: dict, items) -> dict:
  """A copy of ``raw`` with every ``--set`` item applied in order (unknown keys are caught later).

  Raises:
    ConfigError: bad syntax, or a path through something that is not a table.
  """
  out = copy.deepcopy(raw)
  for item in items:
    keys, value = parse(item)
    node = out
    for depth, key in enumerate(keys[:-1]):
      child = node.setdefault(key, {})
      if not isinstance(child, dict):
        where = ".".join(keys[:depth + 1])
        raise ConfigError(f"--set {item!r}: {where} = {child!r} is a value, not a table, so it "
                          f"has no key {keys[depth + 1]!r}.")
      node = child
    node[keys[-1]] = value
  return out
