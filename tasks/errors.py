"""The one error type for bad input (config values, data files, results directories), and
which other exceptions are the machine's (memory, disk) rather than bugs."""


class ConfigError(ValueError):
  """Bad input: the message names what was wrong and what is allowed."""


def check(condition: bool, field: str, value, allowed: str) -> None:
  """Raise :class:`ConfigError` naming ``field``, ``value`` and what is allowed."""
  if not condition:
    raise ConfigError(f"{field} = {value!r} is not allowed: {allowed}.")


def is_concrete_number(x) -> bool:
  """True for Python numbers (not bools); traced or batched values are skipped by validation."""
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_environment_failure(err: BaseException) -> bool:
  """Whether ``err`` is the machine's (out of memory, a full disk, permissions), not a bug:
  the commands answer it with exit code 2, a bug with 1."""
  return isinstance(err, (OSError, MemoryError)) or "RESOURCE_EXHAUSTED" in str(err)
