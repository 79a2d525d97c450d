"""The one error type for bad input (config values, data files, results directories), and
which other exceptions are the machine's (memory, disk) rather than bugs.

Below the config layer, a check names the argument it was given (``classifier``,
``lr``), not where that value came from: the config layer
(:func:`attndyn.schema.at`) adds the TOML path (``model.classifier``,
``cnn.task.n_topics``) as the error passes through it.
"""
import re
import sys

__all__ = ["ConfigError", "value_error", "check", "renamed", "is_concrete_number",
           "is_environment_failure"]


class ConfigError(ValueError):
  """Bad input: the message names what was wrong and what is allowed.

  A :func:`check` failure also carries ``field`` (the argument's name), ``value``
  and ``allowed``, so that a caller can rename the field (:func:`renamed`); other
  errors have ``field = None``.
  """

  def __init__(self, message: str, *, field=None, value=None, allowed=None, related=()):
    super().__init__(message)
    self.field, self.value, self.allowed, self.related = field, value, allowed, tuple(related)


def value_error(field: str, value, allowed: str, related=()) -> ConfigError:
  """The error of :func:`check`: ``FIELD = VALUE is not allowed: ALLOWED.``"""
  return ConfigError(f"{field} = {shown(value)} is not allowed: {allowed}.", field=field,
                     value=value, allowed=allowed, related=related)


def shown(value) -> str:
  """``repr(value)``, but an integer too long for Python to print (a hex literal in TOML reads
  into one) as ``an integer of about N digits``."""
  if isinstance(value, int) and not isinstance(value, bool) and \
      value.bit_length() > 3.3 * _max_digits():
    return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
  try:
    return repr(value)
  except ValueError:   # a container holding such an integer
    return f"a value holding an integer of more than {_max_digits()} digits"


def _max_digits() -> int:
  get = getattr(sys, "get_int_max_str_digits", None)
  return (get() or 10 ** 9) if get else 10 ** 9


def too_many_digits(err: BaseException) -> bool:
  """Whether ``err`` is Python refusing to read (or print) an integer of more than
  ``sys.get_int_max_str_digits()`` digits: bad input (a TOML, --set or JSON value), not a bug."""
  return isinstance(err, ValueError) and "integer string conversion" in _text(err)


def digits_error(what: str) -> ConfigError:
  """The one-line error for an integer too long to read in ``what`` (a file, a --set item)."""
  return ConfigError(f"{what} holds an integer of more than {_max_digits()} digits, which "
                     f"Python does not read; every integer attndyn takes is far smaller (see "
                     f"docs/usage.md for each key's allowed values).")


def check(condition: bool, field: str, value, allowed: str, related=()) -> None:
  """Raise :class:`ConfigError` naming ``field``, ``value`` and what is allowed.

  ``related``: other arguments of the same owner that ``allowed`` names (``steps``: "a
  multiple of record_every"), renamed with ``field`` by :func:`renamed`.
  """
  if not condition:
    raise value_error(field, value, allowed, related)


def renamed(err: ConfigError, prefix: str) -> ConfigError:
  """``err`` with its field, and the related names in its text, under ``prefix``
  (``classifier`` -> ``model.classifier``); an error that names no field is returned as it is."""
  if err.field is None or not prefix:
    return err
  allowed = err.allowed
  for name in err.related:
    allowed = re.sub(rf"(?<![\w.]){re.escape(name)}\b", f"{prefix}.{name}", allowed)
  return value_error(f"{prefix}.{err.field}", err.value, allowed,
                     tuple(f"{prefix}.{n}" for n in err.related))


def is_concrete_number(x) -> bool:
  """True for Python numbers (not bools); traced or batched values are skipped by validation."""
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_environment_failure(err: BaseException) -> bool:
  """Whether ``err`` is the machine's (out of memory, a full disk, permissions), not a bug:
  the commands answer it with exit code 2, a bug with 1."""
  return isinstance(err, (OSError, MemoryError)) or "RESOURCE_EXHAUSTED" in _text(err)


def _text(err: BaseException) -> str:
  """``str(err)``, or ``""`` for an exception that cannot say what it is."""
  try:
    return str(err)
  except Exception:
    return ""
