"""Every GPU measurement of the fast path and the atlas in one budgeted run: ``python -m benchmarks.gpu``.

``python -m benchmarks.gpu --out DIR [--work DIR2] [--budget SECONDS] [--tiny]
[--atlas-from DIR3] [--allow-cpu] [--skip bench|atlas-quick|atlas-full ...]``

Each step runs in its own process under a time limit taken from the budget (default 480 s),
and ``DIR/gpu.json`` (every number, each step's status, limit and wall time, in the order
run) and ``DIR/gpu-table.md`` (the rows for docs/usage.md) are rewritten after every step, so
a run stopped at any point keeps what it had measured. The steps, in order (``--skip`` leaves
one out, e.g. to give the full atlas the whole budget):

1. ``device``: the devices JAX chose (platform, kind, count, memory) and the device's own
   memory bandwidth (:func:`benchmarks.stream.device_bandwidth`: a triad, a scale and a sum
   of 1 GiB arrays made on the device, the best of 10 timings of 10 queued calls). Without
   ``--tiny`` or ``--allow-cpu`` the run stops here when JAX found no accelerator.
2. ``bench``: at 1,024, 4,096 and 16,384 seeds in turn, the fast path as ``attndyn bench``
   times its ``attndyn`` row (the text TC preset of :mod:`benchmarks.workload`,
   :func:`benchmarks.impls.attndyn`, :func:`benchmarks.run.time_impl`: the median of 3
   timed calls after a warm-up, compiled apart), in seed·epochs/s, and its share of the
   measured bandwidth: :func:`benchmarks.workload.model_bytes_per_seed_epoch` × seed·epochs/s
   ÷ the triad's bandwidth, ``attndyn bench``'s BW% formula with the device's triad in place
   of the host's. Each row records its seeds per tile (``seed_tile``, the default,
   :func:`dynamics.fast_lu.default_seed_tile`); one more row (``one_tile``) times the middle
   seed count (4,096) in a single tile, the choice the default's cap was made against.
3. ``atlas-quick``: ``attndyn atlas --quick`` into a new folder, and its wall time.
4. ``atlas-store``, ``atlas-full``, ``atlas-store``: ``attndyn atlas`` (the full grid) in a
   copy of ``--atlas-from`` (default docs/atlas/h100/full, which is only read), with whatever
   budget is left: ``--resume`` when the copy holds a job store (``jobs/``), else from
   nothing (``--force``: the copy's other files stay). Before and after, ``atlas-store`` counts
   the grid's buckets the store holds under this code's job keys, which digest the code's
   git revision, so a store made by other code is counted but not reused; records in the
   format of an attndyn before the job store (``buckets/*.json``, as docs/atlas/h100 keeps)
   are counted and never read back. A full grid not finished has its remaining time
   estimated from the computing seconds of the buckets done, per kind
   (:func:`benchmarks.atlas.estimate_seconds`).

The atlas commands run with ``--workers 1`` (on an accelerator, ``auto`` means 1 as well)
and ``--no-progress``; their folders, each step's log and attndyn's compile cache
(``ATTNDYN_COMPILE_CACHE``, unless it is set: empty at the start, so the quick atlas
compiles cold and the full atlas loads the programs they share) go in ``--work`` (default
``DIR/work``). ``--tiny`` runs the same steps on tiny sizes (8, 16 and 32 seeds, a few epochs,
a one- and a two-bucket atlas on a tiny task), small enough for a CPU:
tests/test_benchmarks_gpu.py runs it.

JAX chooses the platform: ``JAX_PLATFORMS`` is passed on to every step as it is set (unset,
JAX takes the GPU where its CUDA plugin is installed). On a device machine that returns only
a few files, keep the atlases out of the returned folder, e.g.
``python -m benchmarks.gpu --out $OUT --work /tmp/gpu-work``.
"""
import argparse
import datetime
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from attndyn import atomic, lock

ROOT = Path(__file__).resolve().parents[1]
RESULTS, TABLE = "gpu.json", "gpu-table.md"
SOURCE = ROOT / "docs" / "atlas" / "h100" / "full"

# Seeds and epochs per timed call: a call of 0.5-1.6 s at 10⁶ seed·epochs/s, so the five calls
# of a seed count (compile, warm-up, 3 timed) fit the step's limit at a tenth of that.
SEEDS = {"full": (1024, 4096, 16384), "tiny": (8, 16, 32)}
EPOCHS = {"full": {1024: 500, 4096: 200, 16384: 100}, "tiny": {8: 10, 16: 10, 32: 10}}
REPS = 3
# The workload: the text TC preset (attndyn bench's); tiny: a small vocabulary and corpus.
WORKLOAD = {"full": {}, "tiny": dict(vocab_size=200, n_train=100)}
# Elements per array of the bandwidth measurement (1 GiB; tiny: 4 MiB) and its timings.
BANDWIDTH = {"full": dict(n=1 << 28, repeats=10, calls=10),
             "tiny": dict(n=1 << 22, repeats=3, calls=2)}
# Each step's own limit in seconds, below what the budget leaves; the full atlas takes the rest.
LIMITS = {"device": 90, "bench": 180, "atlas-quick": 240, "atlas-store": 60}
GRACE = 20      # seconds an atlas has, after SIGTERM, to stop before SIGKILL (its buckets are kept)
MIN_STEP = 5    # a step given fewer seconds than this is skipped

# The tiny atlas: one Attn-TC bucket on a tiny task (2 σ × 2 lr × 2 seeds, GD alone: no ODE to
# compile); the full one adds a second (m = 4).
TINY_ATLAS = ['classifiers=["tc"]', "crosses=[]", "seeds=2", "sigma=[0.001, 0.1]", "tau=5.0",
              "steps=10", "record_every=5", "run_lengths=[10, 5]", "ode_classifiers=[]",
              "base={n_nontopic=3, vocab_size=20, n_topics=2, words_per_topic=2, embed_dim=4, "
              "n_train=16, n_test=8, normaliser=\"softmax\", train_query=false}"]
TINY_SETS = {"quick": TINY_ATLAS + ["axes={}"], "full": TINY_ATLAS + ["axes={n_nontopic=[4]}"]}
SKIPPABLE = ("bench", "atlas-quick", "atlas-full")
GOALS = {"seed_epochs_per_s_at_4096": 1e6, "full_atlas_s": 300.0}


# ---------------------------------------------------------------- the steps (child processes)

def _step_device(args) -> dict:
  import jax
  from benchmarks.stream import device_bandwidth
  devices = jax.devices()
  d = devices[0]
  try:
    stats = d.memory_stats() or {}
  except Exception:   # noqa: BLE001 - not every backend reports it
    stats = {}
  memory = stats.get("bytes_limit")
  if memory is None and d.platform == "cpu":
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")   # the host's
  import jaxlib
  # no accelerator where one is expected: the run stops, so its memory is not swept
  refused = d.platform == "cpu" and args.mode == "full" and not args.allow_cpu
  return {"platform": d.platform, "backend": jax.default_backend(), "device_kind": d.device_kind,
          "devices": [str(x) for x in devices], "device_count": len(devices),
          "memory_bytes": memory, "jax": jax.__version__,
          "jaxlib": getattr(jaxlib, "__version__", None),
          "bandwidth": None if refused else device_bandwidth(**BANDWIDTH[args.mode])}


def _step_bench(args) -> list:
  """Each seed count in turn, its row added to the result file as soon as it is timed (a
  step stopped at its limit keeps the rows before)."""
  from benchmarks import impls
  from benchmarks.run import time_impl
  from benchmarks.workload import make_workload, model_bytes_per_seed_epoch
  from attndyn.dynamics import fast_lu
  rows = []
  # every seed count in the default tiles, then the middle one in a single tile (the cap
  # lifted: fast_lu.ACCELERATOR_SEED_TILE was chosen from one such pair of runs)
  middle = SEEDS[args.mode][1]
  for seeds, tile in [(n, None) for n in SEEDS[args.mode]] + [(middle, middle)]:
    w = make_workload(seeds, **WORKLOAD[args.mode])
    build = lambda w_, epochs, tile=tile: impls.attndyn(w_, epochs, seed_tile=tile)
    row = time_impl("attndyn", build, w, EPOCHS[args.mode][seeds], REPS)
    row["model_bytes_per_seed_epoch"] = model_bytes_per_seed_epoch(w)
    row["one_tile"] = tile is not None
    row["seed_tile"] = tile or fast_lu.train.seed_tile_for(w.model_cfg, w.data.train, seeds)
    rows.append(row)
    _write_result(args.result, rows)
    del w
  return rows


def _step_atlas_store(args) -> dict:
  """The grid's buckets in ``args.atlas_dir``'s store under this code's keys, and the rest."""
  from attndyn import atlas, jobs
  from benchmarks.atlas import _kind, estimate_seconds
  s = atlas.settings(args.quick, args.set or ())
  grid = atlas.buckets(s)
  store = Path(args.atlas_dir) / atlas.STORE
  held = jobs.Store(store).keys()
  done, seconds = [], {}
  for b in grid:
    key = atlas._bucket_key(s, b)   # the key run_atlas files the bucket under
    if key in held:
      done.append(b.index)
      try:
        doc = json.loads((store / f"{key}.json").read_text(encoding="utf-8"))
        seconds[b.index] = float(doc["result"]["seconds"])
      except (OSError, ValueError, KeyError, TypeError):
        pass
  left = [b for b in grid if b.index not in set(done)]
  old = sorted((Path(args.atlas_dir) / "buckets").glob("bucket-*.json"))
  commits = set()
  for path in old:
    try:
      commits.add(json.loads(path.read_text(encoding="utf-8")).get("commit"))
    except (OSError, ValueError, AttributeError):
      commits.add("unreadable")
  out = {"buckets": len(grid), "configurations": sum(atlas.n_configurations(s, b) for b in grid),
         "store_files": len(held), "done": len(done), "left": len(left), "done_indices": done,
         "computing_s_done": sum(seconds.values()),
         "old_format_records": len(old), "old_format_commits": sorted(map(str, commits)),
         "revision": jobs.revision(), "precision": jobs.precision(),
         "kinds_left": sorted({_kind(s, b) for b in left})}
  if left and seconds:
    estimate, unseen = estimate_seconds(s, [(grid[i], t) for i, t in seconds.items()], left)
    out.update(estimated_left_s=estimate, kinds_costed_at_the_mean=unseen)
  return out


STEPS = {"device": _step_device, "bench": _step_bench, "atlas-store": _step_atlas_store}


def _child(argv) -> int:
  ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu --step")
  ap.add_argument("--step", choices=list(STEPS), required=True)
  ap.add_argument("--result", required=True)
  ap.add_argument("--mode", choices=list(SEEDS), required=True)
  ap.add_argument("--atlas-dir")
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--allow-cpu", action="store_true")
  ap.add_argument("--set", action="append")
  args = ap.parse_args(argv)
  _write_result(args.result, STEPS[args.step](args))
  return 0


def _write_result(path, result) -> None:
  atomic.make_dirs(Path(path).parent)
  atomic.write_text(Path(path), json.dumps(result, indent=1, default=str))


# ---------------------------------------------------------------- the run (this process)

class Run:
  """The results of one run, rewritten in ``out`` after every step."""

  def __init__(self, out: Path, work: Path, budget: float, mode: str, command: list):
    self.out, self.work, self.budget, self.mode = out, work, budget, mode
    self.start = time.monotonic()
    self.doc = {"format": 1, "command": command, "mode": mode, "budget_s": budget,
                "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "finished": False, "environment": _environment(), "steps": [],
                "device": None, "bench": [], "atlas_quick": None, "atlas_full": None,
                "goals": None}

  def left(self) -> float:
    return self.budget - (time.monotonic() - self.start)

  def step(self, name: str, cmd: list, limit: float, *, grace: float = 0.0,
           result: Path = None) -> tuple:
    """Run ``cmd`` (a child process) for at most ``limit`` seconds, within the budget, and
    record it; ``grace``: seconds it has between SIGTERM and SIGKILL, inside ``limit``.

    Returns:
      ``(entry, value)``: the step's record in ``steps``, and what it wrote to ``result``
      (``None`` if nothing).
    """
    limit = min(limit, self.left())
    entry = {"name": name, "limit_s": round(limit, 1)}
    self.doc["steps"].append(entry)
    if limit < MIN_STEP:
      entry.update(status="skipped", why=f"the budget had {max(limit, 0):.0f} s left")
      self.save()
      return entry, None
    log = self.work / "logs" / f"{len(self.doc['steps']):02d}-{name}.log"
    entry.update(_limited(cmd, limit, grace, log))
    value = None
    if result is not None and result.is_file():   # a step stopped early may have written some
      try:
        value = json.loads(result.read_text(encoding="utf-8"))
      except (OSError, ValueError) as err:
        entry.update(status="failed", why=f"its result {str(result)!r} could not be read ({err})")
    elif result is not None and entry["status"] == "ok":
      entry.update(status="failed", why=f"it wrote no result ({str(result)!r})")
    self.save()
    return entry, value

  def skip(self, name: str) -> tuple:
    """Record ``name`` as left out by ``--skip``."""
    self.doc["steps"].append({"name": name, "status": "skipped", "why": "--skip"})
    self.save()
    return self.doc["steps"][-1], None

  def child(self, name: str, step: str, limit: float, **options) -> tuple:
    """One of :data:`STEPS` in a child process: ``(entry, value)`` as :meth:`step`."""
    result = self.work / "steps" / f"{len(self.doc['steps']) + 1:02d}-{name}.json"
    cmd = [sys.executable, "-m", "benchmarks.gpu", "--step", step, "--result", str(result),
           "--mode", self.mode]
    for key, value in options.items():
      flag = "--" + key.replace("_", "-")
      if value is None or value is False:
        continue
      if value is True:
        cmd.append(flag)
      elif isinstance(value, list):
        cmd += [a for v in value for a in (flag, v)]
      else:
        cmd += [flag, str(value)]
    return self.step(name, cmd, limit, result=result)

  def save(self) -> None:
    # unrounded, like each step's wall_s: the steps' walls must sum to no more than this
    self.doc["elapsed_s"] = time.monotonic() - self.start
    self.doc["goals"] = _goals(self.doc)
    atomic.write_text(self.out / RESULTS, json.dumps(self.doc, indent=1, default=str) + "\n")
    atomic.write_text(self.out / TABLE, table(self.doc))


def _environment() -> dict:
  """Python, ``JAX_PLATFORMS`` and the dependencies of pyproject.toml this Python lacks."""
  with open(ROOT / "pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
  names = [d.split(">")[0].split("=")[0].split("<")[0].strip() for d in deps]
  return {"python": sys.version.split()[0], "executable": sys.executable,
          "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS"),
          "missing_dependencies": [n for n in names if importlib.util.find_spec(n) is None]}


def _group_gone(pgid: int, wait: float = 10.0) -> None:
  """Kill what is left of process group ``pgid`` and wait, up to ``wait`` seconds, until none of
  it is left: reaping the step's own process does not wait for processes it started, which a
  SIGKILL ends a moment later (or at once, while they are stopped)."""
  deadline = time.monotonic() + wait
  while time.monotonic() < deadline:
    try:
      os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):   # no process of the group is left
      return
    time.sleep(0.05)


def _limited(cmd: list, limit: float, grace: float, log: Path) -> dict:
  """Run ``cmd`` in its own process group with its output in ``log``; after ``limit`` seconds
  (``grace`` of them after a SIGTERM) the group is killed, and so it is when this process is
  interrupted. The group stays in this process's session, so whatever ends the session ends
  it too. Returns status, rc, wall_s, tail."""
  atomic.make_dirs(log.parent)
  env = {"ATTNDYN_COMPILE_CACHE": str(log.parent.parent / "xla-cache"),   # in the work folder
         **os.environ, "PYTHONUNBUFFERED": "1",
         "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
  t0 = time.monotonic()
  status = None
  fd = atomic.open_own(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
  with os.fdopen(fd, "w", encoding="utf-8") as f:
    f.write("$ " + " ".join(cmd) + "\n")
    f.flush()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                            process_group=0)
    try:
      proc.wait(timeout=max(limit - grace, 0.1))
    except BaseException as err:   # the limit, or this run stopped (Ctrl-C, SIGTERM)
      if not isinstance(err, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _group_gone(proc.pid)
        raise
      status = "timeout"
      if grace > 0:
        os.killpg(proc.pid, signal.SIGTERM)   # the group this run started
        try:
          proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
          pass
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
      _group_gone(proc.pid)
  rc = proc.returncode
  tail = log.read_text(encoding="utf-8", errors="replace")[-1500:]
  return {"status": status or ("ok" if rc == 0 else "failed"), "rc": rc,
          "wall_s": time.monotonic() - t0, "log": str(log),
          "tail": None if rc == 0 and status is None else tail}


def _goals(doc: dict) -> dict:
  """The issue's goals against what was measured (``None``: not measured, or not this size)."""
  rate = next((r["seed_epochs_per_s"] for r in doc["bench"]
               if r["seeds"] == 4096 and not r.get("one_tile")), None)
  full = doc["atlas_full"] or {}
  seconds = full.get("seconds_if_run_alone")
  return {"seed_epochs_per_s_at_4096": {"goal": GOALS["seed_epochs_per_s_at_4096"],
                                        "measured": rate,
                                        "met": None if rate is None
                                        else rate >= GOALS["seed_epochs_per_s_at_4096"]},
          "full_atlas_s": {"goal": GOALS["full_atlas_s"], "measured": seconds,
                           "estimated": full.get("estimated_total_s") if seconds is None
                           else None,
                           "met": None if seconds is None else seconds <= GOALS["full_atlas_s"]}}


def _atlas_summary(directory: Path) -> dict:
  try:
    doc = json.loads((directory / "atlas.json").read_text(encoding="utf-8"))
  except (OSError, ValueError):
    return {}
  seconds = doc.get("seconds") or {}
  return {k: doc.get(k) for k in ("n_buckets", "n_configurations", "n_rows", "errors")} | {
      "atlas_seconds_total": seconds.get("total"), "computing_s": seconds.get("computing"),
      "reused": len(doc.get("reused") or []), "finished": doc.get("finished", True)}


def run(args, out: Path, work: Path) -> int:
  mode = "tiny" if args.tiny else "full"
  r = Run(out, work, args.budget, mode, ["python -m benchmarks.gpu", *(args.argv or [])])
  r.save()
  try:
    return _steps(r, args, mode)
  except KeyboardInterrupt:   # Ctrl-C or SIGTERM: the running step's group was killed
    return _end(r, 130, "interrupted: gpu.json holds the steps finished before")


def _steps(r: Run, args, mode: str) -> int:
  _, device = r.child("device", "device", LIMITS["device"], allow_cpu=args.allow_cpu)
  r.doc["device"] = device
  if device is None:   # JAX could not start here: every other step would fail the same way
    return _end(r, 1, f"the device step failed (JAX_PLATFORMS = "
                      f"{os.environ.get('JAX_PLATFORMS')!r}): see gpu.json's steps and its log")
  if device["platform"] == "cpu" and mode == "full" and not args.allow_cpu:
    return _end(r, 2, "JAX found no accelerator (platform cpu): install jax's CUDA plugin, "
                      "or pass --allow-cpu (or --tiny) to measure the CPU")
  bandwidth = device["bandwidth"]["triad_gbs"]

  _, rows = r.child("bench", "bench", LIMITS["bench"]) if "bench" not in args.skip \
      else r.skip("bench")
  for row in rows or []:
    row["bandwidth_gbs"] = bandwidth
    row["bandwidth_share"] = (row["model_bytes_per_seed_epoch"] * row["seed_epochs_per_s"]
                              / (bandwidth * 1e9))
    r.doc["bench"].append(row)
  r.save()

  sets = {k: [a for item in v for a in ("--set", item)] for k, v in TINY_SETS.items()} \
      if args.tiny else {"quick": [], "full": []}
  atlas = [sys.executable, "-m", "attndyn.cli", "atlas", "--no-progress", "--workers", "1"]
  if "atlas-quick" not in args.skip:
    _quick_atlas(r, args, atlas, sets)
  else:
    r.skip("atlas-quick")
  if "atlas-full" not in args.skip:
    _full_atlas(r, args, atlas, sets)
  else:
    r.skip("atlas-full")
  r.doc["finished"] = True
  return _end(r, 0, None)


def _quick_atlas(r: Run, args, atlas: list, sets: dict) -> None:
  quick_dir = r.work / "atlas-quick"
  entry, _ = r.step("atlas-quick", atlas + ["--quick", "--out", str(quick_dir)] + sets["quick"],
                    LIMITS["atlas-quick"], grace=GRACE if not args.tiny else 5)
  r.doc["atlas_quick"] = {"dir": str(quick_dir), "status": entry["status"],
                          "wall_s": entry.get("wall_s"), **_atlas_summary(quick_dir)}
  r.save()


def _full_atlas(r: Run, args, atlas: list, sets: dict) -> None:
  full_dir = r.work / "atlas-full"
  source = Path(args.atlas_from)
  shutil.copytree(source, full_dir, symlinks=False)
  store_sets = TINY_SETS["full"] if args.tiny else []
  _, before = r.child("atlas-store", "atlas-store", LIMITS["atlas-store"], atlas_dir=full_dir,
                      set=store_sets)
  resume = (full_dir / "jobs").is_dir()
  full = {"dir": str(full_dir), "source": str(source), "resumed": resume,
          "resume_note": _resume_note(source, resume, before), "before": before}
  r.doc["atlas_full"] = full
  # what is left after the atlas: the second count, and GRACE inside the atlas's own limit
  reserve = LIMITS["atlas-store"] if not args.tiny else 30
  entry, _ = r.step("atlas-full", atlas + ["--out", str(full_dir),
                                           "--resume" if resume else "--force"] + sets["full"],
                    r.left() - reserve, grace=GRACE if not args.tiny else 5)
  full.update(status=entry["status"], wall_s=entry.get("wall_s"), **_atlas_summary(full_dir))
  _, counts = r.child("atlas-store", "atlas-store", LIMITS["atlas-store"], atlas_dir=full_dir,
                      set=store_sets)
  full["after"] = counts
  if counts:
    reused = (before or {}).get("done", 0)
    full.update(buckets=counts["buckets"], done=counts["done"], left=counts["left"],
                reused_buckets=reused, computed_buckets=counts["done"] - reused)
    if counts["left"] == 0 and reused == 0 and entry["status"] == "ok":
      full["seconds_if_run_alone"] = entry["wall_s"]   # the whole grid, in this one command
    if counts["left"]:
      full["estimated_left_s"] = counts.get("estimated_left_s")
    # the buckets' own computing seconds (done) + the estimate (left): no start-up, no writing
    full["estimated_total_s"] = counts["computing_s_done"] + (counts.get("estimated_left_s") or 0)


def _resume_note(source: Path, resume: bool, before) -> str:
  """What of ``source`` the full atlas can reuse, in one sentence."""
  if before is None:
    return "not counted (the atlas-store step failed)"
  old = (f"; its {before['old_format_records']} records in the format of an attndyn before the "
         f"job store (buckets/*.json, commit(s) {', '.join(c[:7] for c in before['old_format_commits'])}) "
         f"are not read back" if before["old_format_records"] else "")
  if not resume:
    return (f"{source} holds no job store (jobs/), so no bucket is reused: the grid is "
            f"computed from nothing{old}")
  other = before["store_files"] - before["done"]
  return (f"{before['done']} of {before['buckets']} buckets reused from {source}'s job store"
          + (f"; {other} stored job(s) are under keys of other code or settings (job keys "
             f"digest the git revision) and are computed again" if other else "") + old)


def _end(r: Run, code: int, message) -> int:
  r.doc["exit"] = {"code": code, "message": message}
  r.save()
  if message:
    print(f"python -m benchmarks.gpu: {message}", file=sys.stderr)
  print(f"wrote {r.out / RESULTS} and {r.out / TABLE} ({r.doc['elapsed_s']:.0f} s)")
  return code


# ---------------------------------------------------------------- the table for docs/usage.md

def _num(x, fmt=",.0f") -> str:
  return "not measured" if x is None else format(x, fmt)


def table(doc: dict) -> str:
  """``gpu.json`` as the markdown that docs/usage.md's Speed section shows."""
  device = doc.get("device")
  if device and device["bandwidth"]:
    memory = device.get("memory_bytes")
    about = (f"{device['device_kind']} ({device['platform']}, {device['device_count']} "
             f"device(s)" + (f", {memory / 2**30:.0f} GiB" if memory else "")
             + f"; jax {device['jax']}), measured triad bandwidth "
             f"{device['bandwidth']['triad_gbs']:,.0f} GB/s")
  elif device:
    about = f"{device['device_kind']} ({device['platform']}): no accelerator, nothing measured"
  else:
    about = "not measured (the device step failed)"
  lines = [f"Device: {about}{' (--tiny sizes)' if doc['mode'] == 'tiny' else ''}; "
           f"`{' '.join(doc['command'])}`, {doc['started']}.", "",
           "| seeds | attndyn seed·epochs/s | share of measured bandwidth | compile |",
           "|---|---|---|---|"]
  by = {row["seeds"]: row for row in doc["bench"] if not row.get("one_tile")}
  for seeds in SEEDS[doc["mode"]]:
    row = by.get(seeds)
    if row is None:
      lines.append(f"| {seeds:,} | not measured | not measured | not measured |")
    else:
      share = row["bandwidth_share"]
      lines.append(f"| {seeds:,} | {row['seed_epochs_per_s']:,.0f} | "
                   f"{'not measured' if share is None else f'{100 * share:.1f} %'} | "
                   f"{row['compile_s']:.2f} s |")
  quick = doc.get("atlas_quick") or {}
  full = doc.get("atlas_full") or {}
  lines.append("")
  tiles = ", ".join(f"{r['seeds']:,}: {r['seed_tile']:,}" for r in by.values()
                    if r.get("seed_tile"))
  if tiles:
    lines.append(f"- Seeds per tile (seeds: tile): {tiles}.")
  for row in (r for r in doc["bench"] if r.get("one_tile")):
    share = row["bandwidth_share"]
    lines.append(f"- {row['seeds']:,} seeds in one tile: {row['seed_epochs_per_s']:,.0f} "
                 f"seed·epochs/s, {'not measured' if share is None else f'{100 * share:.1f} %'}"
                 " of the measured bandwidth.")
  lines += [f"- Quick atlas: {_status(quick)}."]
  text = _status(full)
  if full.get("buckets") is not None:
    text += (f"; {full['done']} of {full['buckets']} buckets done ({full['reused_buckets']} "
             f"reused from {full['source']}), {full['left']} left")
    if full.get("left"):
      text += f", about {_num(full.get('estimated_left_s'), '.0f')} s more"
  lines.append(f"- Full atlas: {text}.")
  return "\n".join(lines) + "\n"


def _status(step: dict) -> str:
  if not step:
    return "not measured"
  if step.get("status") == "ok":
    return f"{step['wall_s']:.0f} s wall"
  return f"{step.get('status')} after {_num(step.get('wall_s'), '.0f')} s"


# ---------------------------------------------------------------- command line

class _Parser(argparse.ArgumentParser):
  def error(self, message):
    self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`).\n")


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv[:1] == ["--step"]:
    return _child(argv)
  ap = _Parser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help=f"directory for {RESULTS} and {TABLE}")
  ap.add_argument("--work", help="directory for the atlases and the logs (default DIR/work)")
  ap.add_argument("--budget", type=float, default=480.0,
                  help="seconds for all the steps together (default 480)")
  ap.add_argument("--tiny", action="store_true", help="the same steps on tiny sizes (a CPU test)")
  ap.add_argument("--atlas-from", default=str(SOURCE),
                  help="the full atlas to continue, copied, never written (default "
                       "docs/atlas/h100/full)")
  ap.add_argument("--allow-cpu", action="store_true",
                  help="measure at full size even where JAX found no accelerator")
  ap.add_argument("--skip", action="append", default=[], choices=SKIPPABLE,
                  help="leave out a step (repeatable), e.g. to give the full atlas the budget")
  args = ap.parse_args(argv)
  args.argv = argv
  if not args.budget > 0:
    ap.error(f"--budget {args.budget:g} is not allowed: a number of seconds > 0")
  if not Path(args.atlas_from).is_dir():
    ap.error(f"--atlas-from {args.atlas_from!r} is not a directory")
  out = Path(args.out)
  work = Path(args.work) if args.work else out / "work"
  for flag, d in (("--out", out), ("--work", work)):
    if d.exists() and not (d.is_dir() and all(p.name == lock.LOCKFILE for p in d.iterdir())):
      ap.error(f"{flag} {str(d)!r} is not a new or empty directory: pick another")
  atomic.make_dirs(out)
  atomic.make_dirs(work)

  def on_sigterm(signum, frame):   # a SIGTERM stops the run as Ctrl-C does
    raise KeyboardInterrupt

  previous = signal.signal(signal.SIGTERM, on_sigterm)
  try:
    with lock.hold(out):
      return run(args, out, work)
  finally:
    signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
  sys.exit(main())
