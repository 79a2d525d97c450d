"""Typed settings of a study (an experiment of a reproduction, the atlas): frozen dataclasses.

A study declares its settings as a frozen dataclass whose annotations say each
setting's kind; ``FULL`` and ``QUICK`` are two instances. ``--set NAME.a.b=v``
is a typed :func:`replace` with the kind read from the annotation, and
:func:`check` validates every field. The kinds:

* :data:`Count` (an integer >= 1), :data:`Index` (an integer >= 0),
  :data:`Number` (a finite number >= 0), ``bool``, ``str``, ``Literal[...]``
  (one of the values named), ``Optional[...]`` of one of these (``"none"``
  unsets it, as TOML has no null);
* ``tuple[X, ...]`` of one of these (a list in TOML and JSON);
* :data:`NumbersByName` (a table of name = number) and a nested frozen
  dataclass (a table of its own typed settings; :class:`Table` adds ``t[name]``
  for tables keyed by a classifier or a variant);
* :data:`RunTable`: an ``attndyn run`` config, or the part of one a study changes
  (any key may be set; the study's ``validate`` checks it with the run schema),
  and :func:`section` for a table of keys of one run-schema section.

Every value is checked by the run config's own checker, :func:`attndyn.schema.typed`
(one schema, the kinds' words in :data:`attndyn.schema.TEXT`): every failure is one
:class:`ConfigError` line naming the setting, its value and what is allowed (or the
settings there are, with a did-you-mean).
"""
import dataclasses
import types
import typing
from typing import Annotated, Any, Literal, Mapping, Sequence, Union

from attndyn import overrides, schema
from attndyn.tasks.errors import ConfigError, check

__all__ = ["Count", "Index", "Number", "NumbersByName", "RunTable", "section", "Table",
           "check_fields", "replace", "resolve", "leaves", "as_json", "from_json", "describe"]

Count = Annotated[int, "count"]
Index = Annotated[int, "index"]
Number = Annotated[float, "number"]
NumbersByName = Annotated[Mapping[str, float], "numbers_by_name"]
RunTable = Annotated[Mapping[str, Any], "run"]


def section(name: str):
  """The kind of a table of keys of the run schema's ``[name]`` section (typed there)."""
  return Annotated[Mapping[str, Any], ("section", name)]


class Table:
  """A nested settings table whose fields are named by data (``t["fc"]`` is ``t.fc``)."""

  def __getitem__(self, name: str):
    if name not in {f.name for f in dataclasses.fields(self)}:
      raise KeyError(name)
    return getattr(self, name)


def _kind(tp):
  """``(kind, optional)``: kind is a kind of :data:`attndyn.schema.TEXT` (``"count"``,
  ``"bool"``, ...), ``("section", name)``, ``("literal", values)``, ``("tuple", element
  kind)`` or a dataclass."""
  optional = False
  origin = typing.get_origin(tp)
  if origin in (Union, types.UnionType):
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    optional, tp = True, args[0]
    origin = typing.get_origin(tp)
  if origin is Annotated:
    return tp.__metadata__[0], optional
  if origin is Literal:
    return ("literal", typing.get_args(tp)), optional
  if origin is tuple:
    return ("tuple", _kind(typing.get_args(tp)[0])[0]), optional
  if tp in (bool, str):
    return tp.__name__, optional
  if dataclasses.is_dataclass(tp):
    return tp, optional
  raise TypeError(f"settings of type {tp!r} have no kind: use Count, Index, Number, bool, str, "
                  f"Literal, tuple, NumbersByName, RunTable, section(...) or a dataclass")


def _coerce(value, kind, optional: bool, field: str):
  """``value`` checked against ``kind`` and in its stored form (lists -> tuples): a nested
  table by its own settings, every other kind by :func:`attndyn.schema.typed`."""
  if not dataclasses.is_dataclass(kind) or (optional and (value is None or value == "none")):
    return schema.typed(field, value, kind, optional)
  if isinstance(value, kind):
    check_fields(value, field)
    return value
  check(isinstance(value, Mapping), field, value, schema.kind_text(kind))
  return from_json(kind, value, field)


def _hints(cls) -> dict:
  return typing.get_type_hints(cls, include_extras=True)


def check_fields(obj, name: str) -> None:
  """Every field of ``obj`` is of its declared kind (nested tables too)."""
  hints = _hints(type(obj))
  for f in dataclasses.fields(obj):
    kind, optional = _kind(hints[f.name])
    _coerce(getattr(obj, f.name), kind, optional, f"{name}.{f.name}")



def from_json(cls, doc: Mapping, name: str = "settings"):
  """An instance of ``cls`` from a JSON table (lists become tuples), every field checked; a
  field the class gives a default may be left out (``axes = {}``: no axis varied).

  Raises:
    ConfigError: an unknown key, a missing key without a default, or a value not of its kind.
  """
  hints = _hints(cls)
  fields = {f.name for f in dataclasses.fields(cls)}
  for key in doc:
    if key not in fields:
      raise _unknown(name, key, sorted(fields))
  missing = sorted(f.name for f in dataclasses.fields(cls) if f.name not in doc
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING)
  if missing:
    raise ConfigError(f"{name} lacks the settings {', '.join(missing)}.")
  values = {}
  for key in fields & set(doc):
    kind, optional = _kind(hints[key])
    values[key] = _coerce(doc[key], kind, optional, f"{name}.{key}")
  return cls(**values)


def as_json(obj) -> Any:
  """``obj`` as JSON-ready data: tables as dicts, tuples as lists."""
  if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
    return {f.name: as_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
  if isinstance(obj, Mapping):
    return {k: as_json(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [as_json(v) for v in obj]
  return obj


def _unknown(name: str, key: str, known: Sequence[str]) -> ConfigError:
  return ConfigError(f"{name} has no setting {key!r}.{schema.suggest(key, known, as_repr=True)} "
                     f"Known: {', '.join(known)}.")


def _set(obj, path: Sequence[str], value, name: str, where: str):
  """``obj`` with ``path`` (inside it) set to ``value``, typed by the annotation."""
  hints = _hints(type(obj))
  fields = [f.name for f in dataclasses.fields(obj)]
  key = path[0]
  if key not in fields:
    err = _unknown(f"{name}", key, _dotted(type(obj)))
    raise ConfigError(f"--set {where!r}: {err}")
  kind, optional = _kind(hints[key])
  field = f"{name}.{key}"
  if len(path) > 1:
    inner = getattr(obj, key)
    if dataclasses.is_dataclass(kind) and inner is not None:
      return dataclasses.replace(obj, **{key: _set(inner, path[1:], value, field, where)})
    if kind == "run" or (isinstance(kind, tuple) and kind[0] in ("section",)) \
        or kind == "numbers_by_name":
      table = as_json(inner) if inner is not None else {}
      node = table
      for step in path[1:-1]:
        node = node.setdefault(step, {})
        if not isinstance(node, dict):
          raise ConfigError(f"--set {where!r}: {field}.{step} is not a table.")
      node[path[-1]] = value
      try:
        return dataclasses.replace(obj, **{key: _coerce(table, kind, optional, field)})
      except ConfigError as err:
        raise ConfigError(f"--set {where!r}: {err}") from None
    raise ConfigError(f"--set {where!r}: {field} is not a table.")
  if dataclasses.is_dataclass(kind) and not isinstance(value, Mapping):
    inside = ", ".join(f"{field}.{k}" for k in _dotted(kind))
    raise ConfigError(f"--set {where!r}: {field} is a table; set one of its keys: {inside}.")
  try:
    return dataclasses.replace(obj, **{key: _coerce(value, kind, optional, field)})
  except ConfigError as err:
    raise ConfigError(f"--set {where!r}: {err}") from None


def _dotted(cls, prefix: str = "") -> list:
  """Every setting's dotted name, nested tables expanded."""
  names, hints = [], _hints(cls)
  for f in dataclasses.fields(cls):
    kind, _ = _kind(hints[f.name])
    if dataclasses.is_dataclass(kind):
      names += _dotted(kind, f"{prefix}{f.name}.")
    else:
      names.append(f"{prefix}{f.name}")
  return names


def replace(obj, items: Sequence[str], name: str, *, prefixed: bool = True):
  """``obj`` with every ``--set NAME.a.b=v`` item for ``name`` applied, in order (items for
  other names are skipped), then every field checked. ``prefixed=False``: the items name
  ``obj``'s settings without ``NAME.`` (``attndyn atlas --set tau=100``).

  Raises:
    ConfigError: a malformed item, a setting ``obj`` does not have, or a value not of its kind.
  """
  for item in items:
    path, value = overrides.parse(item)
    if not prefixed:
      path = [name] + path
    elif path[0] != name:
      continue
    if len(path) < 2:
      raise ConfigError(f"--set {item!r}: name a setting of {name}, e.g. "
                        f"{name}.{_dotted(type(obj))[0]}=...")
    obj = _set(obj, path[1:], value, name, item)
  check_fields(obj, name)
  return obj


def resolve(study, *, quick: bool, items: Sequence[str] = ()):
  """A study's settings (its ``QUICK`` or ``FULL``) with its ``--set`` items applied and its
  ``validate`` (when it has one) passed."""
  obj = replace(study.QUICK if quick else study.FULL, items, study.NAME)
  if hasattr(study, "validate"):
    study.validate(obj)
  return obj


def leaves(obj, prefix: str = "") -> dict:
  """``{"a.b": (kind text, value)}`` for every setting of ``obj``, nested tables expanded."""
  out, hints = {}, _hints(type(obj))
  for f in dataclasses.fields(obj):
    kind, optional = _kind(hints[f.name])
    value = getattr(obj, f.name)
    if dataclasses.is_dataclass(kind) and value is not None:
      out.update(leaves(value, f"{prefix}{f.name}."))
    else:
      out[f"{prefix}{f.name}"] = (schema.kind_text(kind, optional), as_json(value))
  return out


def describe(study, items: Sequence[str] = ()) -> list:
  """One line per setting: ``NAME.key  kind  quick=VALUE  full=VALUE`` (items applied)."""
  import json
  quick, full = (leaves(resolve(study, quick=q, items=items)) for q in (True, False))
  return [f"{study.NAME}.{k}  {kind}  quick={json.dumps(quick[k][1])}  "
          f"full={json.dumps(full[k][1])}" for k, (kind, _) in full.items()]
