"""The one config schema: every kind of value a config holds, each checked by one :func:`typed`.

Two tables use it: the TOML schema of a run (:data:`SECTIONS`: every section,
key and value kind, checked before anything runs) and the studies' typed
settings (:mod:`attndyn.settings` reads their kinds from the annotations). Values
are checked for their *kind* here (an integer, a number, true/false, a string, a
list, ...); the dataclasses' ``__post_init__`` then check their *range*. Every
failure is one :class:`tasks.ConfigError` naming the field, the value and what
is allowed; an unknown key gets a "did you mean" suggestion (:func:`suggest`).
"""
import contextlib
import dataclasses
import difflib
import math
from typing import Any, Mapping

from attndyn.tasks.errors import ConfigError, check, renamed
from attndyn.tasks.errors import is_concrete_number as is_number

__all__ = ["SECTIONS", "TOP_LEVEL", "MAX_SEED", "MAX_INT", "DERIVED", "TEXT", "at", "suggest",
           "unknown_key", "is_int", "is_number", "kind_text", "fits", "typed", "coerce",
           "check_section"]

# Section -> key -> kind. Kinds: int, float, bool, str, ?int / ?float (may be
# unset), strs (list of strings), seeds (an int n for 0..n-1, or a list of
# ints), grid (a table of dotted field names -> lists of numbers).
SECTIONS = {
    "task": {"kind": "str", "n_topics": "int", "words_per_topic": "int", "vocab_size": "int",
             "n_nontopic": "int", "n_train": "int", "n_test": "int"},
    "model": {"classifier": "str", "fc_init": "str", "embed_dim": "int", "key_dim": "int",
              "hidden_dim": "int", "embed_std": "float", "key_std": "float", "query_std": "float",
              "query_norm": "?float", "query_seed": "?int", "train_query": "bool", "freeze": "strs",
              "normaliser": "str"},
    "train": {"optimizer": "str", "lr": "float", "steps": "int", "record_every": "int",
              "batch_size": "?int", "sampling": "str", "flow_time": "?float"},
    "sweep": {"seeds": "seeds", "data_seeds": "seeds", "grid": "grid", "chunk_size": "?int",
              "checkpoint_every": "int"},
    "ode": {"kind": "str", "form": "str", "solver": "str", "rtol": "float", "atol": "float",
            "max_steps": "int", "dtmin": "?float"},
}
TOP_LEVEL = {"precision": "str", "gd_path": "str"}
MAX_SEED = 2**32 - 1  # PRNG seeds are uint32
MAX_INT = 2**31 - 1   # sizes and counts become int32 in the compiled programs

# Keys that look like config but are derived, with the reason.
DERIVED = {
    "model.n_words": "it is derived from the task (n_topics*words_per_topic + vocab_size)",
    "model.n_classes": "it is derived from the task (n_topics)",
}

# Kind -> what it allows, in words: the run schema's kinds (above; the studies have bool and
# str too), then the studies' (attndyn.settings: Count, Index, Number, NumbersByName,
# RunTable). Composite kinds are tuples: ("literal", values), ("tuple", element kind),
# ("section", name): a table of the keys of one section above.
TEXT = {
    "int": "an integer (at most 2**31-1)", "float": "a number", "bool": "true or false",
    "str": "a string",
    "strs": "a list of strings, e.g. [\"keys\"]",
    "seeds": "an integer n >= 1 (seeds 0..n-1) or a list of distinct integers in 0..2**32-1",
    "grid": "a table of field name -> list of numbers, e.g. {\"train.lr\" = [0.05, 0.1]}",
    "count": "an integer >= 1", "index": "an integer >= 0",
    "number": "a finite number >= 0", "numbers_by_name": "a table of name = finite number >= 0",
    "run": "a table of run settings",
}


@contextlib.contextmanager
def at(path: str):
  """Within it, a lower layer's error about one of its arguments names the TOML path instead.

  The layers below the config speak of their own arguments (``TrainConfig(lr=-1)``:
  ``lr = -1 is not allowed``); the config layer builds them under the path the values
  came from (``with at("train"): TrainConfig(**table)``: ``train.lr = -1 is not
  allowed``), so this is the one place TOML paths are attached.
  """
  try:
    yield
  except ConfigError as err:
    new = renamed(err, path)
    if new is err:
      raise
    raise new from None


def suggest(name: str, allowed, *, as_repr: bool = False) -> str:
  """`` Did you mean "x"?`` for the closest allowed name, or ``""``; ``as_repr``: the name as
  Python writes it (`` Did you mean 'x'?``), as the studies' and experiments' errors do."""
  close = difflib.get_close_matches(name, list(allowed), n=1, cutoff=0.6)
  if not close:
    return ""
  return f" Did you mean {close[0]!r}?" if as_repr else f' Did you mean "{close[0]}"?'


def unknown_key(field: str, allowed) -> ConfigError:
  """The error for a key that is not in the schema (with a suggestion)."""
  if field in DERIVED:
    return ConfigError(f'"{field}" cannot be set: {DERIVED[field]}.')
  section, _, key = field.rpartition(".")
  where = f"[{section}]" if section else "the top level"
  return ConfigError(f'unknown key "{field}" in {where}.{suggest(key, allowed)} '
                     f"Allowed: {', '.join(sorted(allowed))}.")


def is_int(x) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def kind_text(kind, optional: bool = False) -> str:
  """What a value of ``kind`` allows, in words."""
  if isinstance(kind, tuple) and kind[0] == "literal":
    text = "one of " + ", ".join(repr(v) for v in kind[1])
  elif isinstance(kind, tuple) and kind[0] == "tuple" and isinstance(kind[1], tuple) \
      and kind[1][0] == "literal":
    text = "a list drawn from " + ", ".join(repr(v) for v in kind[1][1])
  elif isinstance(kind, tuple) and kind[0] == "tuple":
    text = "a list of " + kind_text(kind[1]).replace("an integer", "integers").replace(
        "a finite number", "finite numbers").replace("a string", "strings").replace(
        "true or false", "true/false values")
  elif isinstance(kind, tuple) and kind[0] == "section":
    text = f"a table of [{kind[1]}] run settings"
  elif dataclasses.is_dataclass(kind):
    text = "a table of " + ", ".join(f.name for f in dataclasses.fields(kind))
  else:
    text = TEXT[kind]
  return text + (', or "none" (unset)' if optional else "")


def fits(value, kind) -> bool:
  """Whether ``value`` is of ``kind`` (a key of :data:`TEXT` but seeds and grid, or a tuple)."""
  if kind == "int":
    return is_int(value) and abs(value) <= MAX_INT
  if kind == "float":
    return is_number(value)
  if kind == "count":
    return is_int(value) and 1 <= value <= MAX_INT
  if kind == "index":
    return is_int(value) and 0 <= value <= MAX_INT
  if kind == "number":
    return is_number(value) and math.isfinite(value) and value >= 0
  if kind == "bool":
    return isinstance(value, bool)
  if kind == "str":
    return isinstance(value, str)
  if kind == "strs":
    return fits(value, ("tuple", "str"))
  if kind == "numbers_by_name":
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and fits(v, "number") for k, v in value.items())
  if kind == "run" or kind[0] == "section":
    return isinstance(value, Mapping)
  if kind[0] == "literal":
    return isinstance(value, (str, int, float)) and value in kind[1] \
        and type(value) is not bool
  if kind[0] == "tuple":
    return isinstance(value, (list, tuple)) and all(fits(v, kind[1]) for v in value)
  raise AssertionError(kind)


def _seeds(field: str, value) -> tuple:
  if is_int(value):
    check(1 <= value <= MAX_SEED, field, value, TEXT["seeds"])
    return tuple(range(value))
  check(isinstance(value, (list, tuple)) and len(value) >= 1
        and all(is_int(v) and 0 <= v <= MAX_SEED for v in value), field, value,
        TEXT["seeds"])
  check(len(set(value)) == len(value), field, value, "a list of distinct integers (no repeats)")
  return tuple(value)


def _flatten(table: Mapping, prefix: str = "") -> dict:
  """``{"train": {"lr": [..]}}`` -> ``{"train.lr": [..]}`` (TOML dotted keys nest)."""
  flat = {}
  for key, value in table.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping):
      flat.update(_flatten(value, name + "."))
    else:
      flat[name] = value
  return flat


def _grid(field: str, value, allowed_fields) -> tuple:
  if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                              for p in value):
    value = dict(value)  # the dataclass form: ((name, values), ...)
  check(isinstance(value, Mapping), field, value, TEXT["grid"])
  pairs = []
  for name, values in _flatten(value).items():
    if name not in allowed_fields:
      raise ConfigError(f'{field} field "{name}" is not allowed.{suggest(name, allowed_fields)} '
                        f"Allowed: {', '.join(allowed_fields)}.")
    where = f'{field}["{name}"]'
    check(isinstance(values, (list, tuple)) and len(values) >= 1, where, values,
          "a non-empty list of numbers")
    for v in values:
      check(is_number(v) and math.isfinite(v), where, values, "a list of finite numbers")
    pairs.append((name, tuple(float(v) for v in values)))
  return tuple(pairs)


def typed(field: str, value: Any, kind, optional: bool = False, grid_fields=()) -> Any:
  """``value`` checked to be of ``kind`` and in its stored form: ``None`` or ``"none"`` unsets
  an ``optional`` value (TOML has no null); lists become tuples, tables dicts, a ``float``
  a float; a seed count ``n`` becomes ``(0, ..., n-1)``, a grid table ``((field, values),
  ...)`` of ``grid_fields``; a ``("section", name)`` table has its keys checked by ``[name]``.

  Raises:
    ConfigError: naming ``field``, ``value`` and what ``kind`` allows.
  """
  if optional and (value is None or value == "none"):
    return None
  if kind == "seeds":
    return _seeds(field, value)
  if kind == "grid":
    return _grid(field, value, grid_fields)
  check(fits(value, kind), field, value, kind_text(kind, optional))
  if isinstance(kind, tuple) and kind[0] == "section":
    check_section(kind[1], value)
    for key, v in value.items():
      coerce(f"{field}.{key}", v, SECTIONS[kind[1]][key])
  if kind == "float":
    return float(value)
  if kind == "number":
    return float(value) if not isinstance(value, int) else value
  if kind == "strs" or (isinstance(kind, tuple) and kind[0] == "tuple"):
    return tuple(value)
  if kind in ("run", "numbers_by_name") or (isinstance(kind, tuple) and kind[0] == "section"):
    return dict(value)
  return value


def coerce(field: str, value: Any, kind: str, grid_fields=()) -> Any:
  """A value of the run schema (:data:`SECTIONS`) checked by :func:`typed`: ``kind`` has
  ``?`` in front for a key that may be unset (``"none"`` in any case unsets it).

  Raises:
    ConfigError: naming ``field``, ``value`` and the allowed type.
  """
  if hasattr(value, "dtype") and hasattr(value, "tolist") and not isinstance(value, str):
    # NumPy / JAX numbers and arrays from Python (np.int64(3), jnp.arange(4)): as TOML's
    value = value.tolist()
  optional = kind.startswith("?")
  if optional and isinstance(value, str) and value.lower() == "none":
    return None
  return typed(field, value, kind.removeprefix("?"), optional, grid_fields)


def check_section(section: str, table: Any) -> None:
  """A section must be a TOML table whose keys are all known."""
  check(isinstance(table, Mapping), f"[{section}]", table, "a table of key = value pairs")
  allowed = SECTIONS[section]
  for key in table:
    if key not in allowed:
      raise unknown_key(f"{section}.{key}", allowed)
