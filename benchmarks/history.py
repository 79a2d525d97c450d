"""A benchmark's measurement history: one dated markdown file that benchmark output extends.

Wall times belong to a machine, a commit and a day, not to the reference docs: a benchmark run
with ``--write-history PATH`` (``python -m benchmarks.atlas``) appends one section to ``PATH``
(docs/measurements/atlas-speed.md for the atlas), headed by the date and what was measured and
naming the commit, the machine (CPU model, cores, memory, JAX backend and devices, load average
before and after) and the command; the body is the benchmark's own numbers. A new file starts with
:func:`header`, which says that it is generated and by which command.

The file is rewritten whole through :func:`attndyn.atomic.write_text` (a kill leaves the old
file or the new one; a symbolic link at ``PATH`` is refused). Two benchmarks appending to one
file at the same moment may lose one section: run them one after the other.
"""
import datetime
import os
import textwrap
from pathlib import Path
from typing import Optional, Sequence

from attndyn import atomic
from attndyn.tasks.errors import ConfigError


def header(title: str, command: str) -> str:
  """The first lines of a new history file: what it holds and the command that extends it."""
  text = (f"Generated: `{command}` appends a dated section to this file (benchmarks/history.py), "
          f"oldest first; sections are not edited by hand. Each names the date, the commit, the "
          f"machine and its load, and the command of its measurement. What the measured code "
          f"computes is in the reference docs, not here.")
  return f"# {title}\n\n" + textwrap.fill(text, width=100, break_long_words=False,
                                           break_on_hyphens=False) + "\n"


def check_path(path) -> Path:
  """``path`` as a :class:`Path`, refused in one line (:class:`ConfigError`) before anything is
  measured when the history could not be written there: a missing folder, a folder or
  something else that is not a file, or a symbolic link."""
  path = Path(path)
  if path.is_symlink():
    raise ConfigError(f"--write-history {str(path)!r} is a symbolic link, which the benchmark "
                      f"does not follow: give the file itself.")
  if path.exists() and not path.is_file():
    raise ConfigError(f"--write-history {str(path)!r} is not a file: give a markdown file "
                      f"(new or one this option wrote).")
  if not path.parent.is_dir():
    raise ConfigError(f"--write-history {str(path)!r}: its folder {str(path.parent)!r} does not "
                      f"exist; the file may be new, its folder may not.")
  return path


def _cpu_model() -> Optional[str]:
  """The CPU's model name from /proc/cpuinfo (None where there is none)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.lower().startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return None


def machine(load_before: Optional[float] = None) -> dict:
  """What a wall time depends on: the CPU's model, cores and memory
  (:func:`attndyn.reproduce.runner.machine`), JAX's version, backend and devices
  (:func:`attndyn.outputs.environment`), and the 1-minute load average now (and, if given,
  before the measurement)."""
  from attndyn import outputs
  from attndyn.reproduce import runner
  env = outputs.environment()
  return dict(runner.machine(), cpu=_cpu_model(), backend=env["backend"],
              devices=env["devices"], device_count=env["device_count"],
              jax=env["versions"].get("jax"), load_before=load_before, load_after=load())


def load() -> Optional[float]:
  """The 1-minute load average (None where the system does not say): read it before a
  measurement and hand it to :func:`append`."""
  try:
    return round(os.getloadavg()[0], 2)
  except (OSError, AttributeError):
    return None


def commit() -> str:
  """The commit of the checkout measured (``+dirty`` when its tracked files differ), or
  ``unknown`` outside a git checkout (:func:`attndyn.jobs.revision`)."""
  from attndyn import jobs
  rev = jobs.revision()
  return "unknown" if rev is None else rev["commit"][:12] + ("+dirty" if rev["dirty"] else "")


def _machine_line(m: dict) -> str:
  parts = [f"{m.get('cpus')} CPU cores" + (f" ({m['cpu']})" if m.get("cpu") else "")]
  if m.get("memory_gb") is not None:
    parts.append(f"{m['memory_gb']} GiB memory")
  parts.append(f"JAX {m.get('jax')} on {m.get('backend')} "
               f"({m.get('device_count')} × {', '.join(m.get('devices') or [])})")
  loads = [f"{k} {m[key]}" for k, key in (("before", "load_before"), ("after", "load_after"))
           if m.get(key) is not None]
  if loads:
    parts.append("load average " + ", ".join(loads))
  return "; ".join(parts)


def section(label: str, command: str, body: Sequence[str], *, when: datetime.datetime,
            commit: str, machine: dict) -> str:
  """One dated section: heading (date, time, ``label``), commit, machine, command, ``body``."""
  stamp = when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  lines = [f"## {stamp} · {label}", "",
           f"- commit: {commit}",
           f"- machine: {_machine_line(machine)}",
           f"- command: `{command}`", "", *body]
  return "\n".join(lines).rstrip("\n") + "\n"


def append(path, label: str, command: str, body: Sequence[str], *, title: str, generated_by: str,
           when: Optional[datetime.datetime] = None, commit_id: Optional[str] = None,
           machine_doc: Optional[dict] = None, load_before: Optional[float] = None) -> Path:
  """Append one dated section to the history at ``path`` (made with :func:`header` when new).

  Args:
    path: the markdown file (its folder must exist).
    label: what was measured, in a few words (the section's heading, after the date).
    command: the benchmark's command line, as run.
    body: markdown lines with the measured numbers.
    title / generated_by: the file's title and the command that extends it, for the
      :func:`header` of a new file.
    when / commit_id / machine_doc: the measurement's time, commit and machine (default: now,
      :func:`commit`, :func:`machine`).
    load_before: the load average read before the measurement (:func:`load`).

  Returns:
    ``path``.
  """
  path = check_path(path)
  when = when or datetime.datetime.now(datetime.timezone.utc)
  text = path.read_text(encoding="utf-8") if path.exists() else header(title, generated_by)
  new = section(label, command, body, when=when, commit=commit_id or commit(),
                machine=machine_doc or machine(load_before))
  return atomic.write_text(path, text.rstrip("\n") + "\n\n" + new)

