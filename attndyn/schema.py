"""The TOML schema of a run: every section, key and value type, checked before anything runs.

Values are checked for their *type* here (an integer, a number, true/false, a
string, a list); the dataclasses' ``__post_init__`` then check their *range*.
Every failure is one :class:`tasks.ConfigError` naming the field, the value and
what is allowed; an unknown key gets a "did you mean" suggestion.
"""
import contextlib
import difflib
import math
from typing import Any, Mapping

from attndyn.tasks.errors import ConfigError, check, renamed

__all__ = ["SECTIONS", "TOP_LEVEL", "MAX_SEED", "MAX_INT", "DERIVED", "at", "suggest",
           "unknown_key", "is_int", "is_number", "coerce", "check_section"]

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

_KIND_TEXT = {
    "int": "an integer (at most 2**31-1)", "float": "a number", "bool": "true or false",
    "str": "a string", "?int": "an integer (at most 2**31-1), or \"none\" (unset)",
    "?float": "a number, or \"none\" (unset)",
    "strs": "a list of strings, e.g. [\"keys\"]",
    "seeds": "an integer n >= 1 (seeds 0..n-1) or a list of distinct integers in 0..2**32-1",
    "grid": "a table of field name -> list of numbers, e.g. {\"train.lr\" = [0.05, 0.1]}",
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


def suggest(name: str, allowed) -> str:
  """`` did you mean "x"?`` for the closest allowed name, or ``""``."""
  close = difflib.get_close_matches(name, list(allowed), n=1, cutoff=0.6)
  return f' Did you mean "{close[0]}"?' if close else ""


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


def is_number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def _seeds(field: str, value) -> tuple:
  if is_int(value):
    check(1 <= value <= MAX_SEED, field, value, _KIND_TEXT["seeds"])
    return tuple(range(value))
  check(isinstance(value, (list, tuple)) and len(value) >= 1
        and all(is_int(v) and 0 <= v <= MAX_SEED for v in value), field, value,
        _KIND_TEXT["seeds"])
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
  check(isinstance(value, Mapping), field, value, _KIND_TEXT["grid"])
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


def coerce(field: str, value: Any, kind: str, grid_fields=()) -> Any:
  """Check ``value`` has the type ``kind`` wants and return it canonicalised.

  Ints given for numbers become floats, lists become tuples, ``"none"`` (or
  ``None``) unsets an optional key (TOML has no null), an int seed count
  ``n`` becomes ``(0, ..., n-1)``, a grid table becomes ``((field, values), ...)``.

  Raises:
    ConfigError: naming ``field``, ``value`` and the allowed type.
  """
  if hasattr(value, "dtype") and hasattr(value, "tolist") and not isinstance(value, str):
    # NumPy / JAX numbers and arrays from Python (np.int64(3), jnp.arange(4)): as TOML's
    value = value.tolist()
  if kind.startswith("?"):
    if value is None or (isinstance(value, str) and value.lower() == "none"):
      return None
    kind_ = kind[1:]
  else:
    kind_ = kind
  allowed = _KIND_TEXT[kind]
  if kind_ == "int":
    check(is_int(value) and abs(value) <= MAX_INT, field, value, allowed)
    return value
  if kind_ == "float":
    check(is_number(value), field, value, allowed)
    return float(value)
  if kind_ == "bool":
    check(isinstance(value, bool), field, value, allowed)
    return value
  if kind_ == "str":
    check(isinstance(value, str), field, value, allowed)
    return value
  if kind_ == "strs":
    check(isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value),
          field, value, allowed)
    return tuple(value)
  if kind_ == "seeds":
    return _seeds(field, value)
  if kind_ == "grid":
    return _grid(field, value, grid_fields)
  raise AssertionError(kind)


def check_section(section: str, table: Any) -> None:
  """A section must be a TOML table whose keys are all known."""
  check(isinstance(table, Mapping), f"[{section}]", table, "a table of key = value pairs")
  allowed = SECTIONS[section]
  for key in table:
    if key not in allowed:
      raise unknown_key(f"{section}.{key}", allowed)
