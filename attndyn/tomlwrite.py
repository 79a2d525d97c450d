"""Write a config dict back as TOML (the stdlib reads TOML but cannot write it).

Only what a config holds: top-level scalars, then one ``[section]`` per table
with strings, booleans, numbers, lists of those, and one level of inline table
(``sweep.grid``). Unset (``None``) values are left out, which TOML reads as unset.
"""
import json
import math

__all__ = ["dumps"]


def _value(v) -> str:
  if isinstance(v, bool):
    return "true" if v else "false"
  if isinstance(v, int):
    return str(v)
  if isinstance(v, float):
    if math.isnan(v):
      return "nan"
    if math.isinf(v):
      return "inf" if v > 0 else "-inf"
    return repr(v)
  if isinstance(v, str):
    return json.dumps(v)  # a TOML basic string
  if isinstance(v, (list, tuple)):
    return "[" + ", ".join(_value(x) for x in v) + "]"
  if isinstance(v, dict):
    return "{" + ", ".join(f"{json.dumps(str(k))} = {_value(x)}" for k, x in v.items()
                           if x is not None) + "}"
  raise TypeError(f"cannot write {type(v).__name__} {v!r} as TOML")


def dumps(config: dict) -> str:
  """TOML text of a config dict (``tomllib.loads(dumps(d))`` gives ``d`` back, minus ``None``s)."""
  lines = [f"{k} = {_value(v)}" for k, v in config.items()
           if v is not None and not isinstance(v, dict)]
  for section, table in config.items():
    if isinstance(table, dict):
      lines += ["", f"[{section}]"]
      lines += [f"{k} = {_value(v)}" for k, v in table.items() if v is not None]
  return "\n".join(lines) + "\n"
