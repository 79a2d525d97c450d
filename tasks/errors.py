"""The one error type for bad input (config values, data files, results directories), and
which other exceptions are the machine's (memory, disk) rather than bugs.

Below the config layer, a check names the argument it was given (``classifier``,
``lr``), not where that value came from: the config layer
(:func:`attndyn.schema.at`) adds the TOML path (``model.classifier``,
``cnn.task.n_topics``) as the error passes through it.
"""
import re

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
  return ConfigError(f"{field} = {value!r} is not allowed: {allowed}.", field=field, value=value,
                     allowed=allowed, related=related)


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
  return isinstance(err, (OSError, MemoryError)) or "RESOURCE_EXHAUSTED" in str(err)
