"""Throughput of ``attndyn atlas``: configurations/s, compiles per configuration, full-grid estimate.

``python -m benchmarks.atlas --out DIR [--quick] [--buckets I,J,...] [--baseline] [--baseline-ode]
[--write-history PATH]``
``python -m benchmarks.atlas --out DIR --workers N [--quick] [--buckets I,J,...]``
``python -m benchmarks.atlas --compare DIR_A DIR_B``

Runs a sample of the full grid's buckets (default: the base bucket of each classifier, Attn-TC's
largest m × M bucket, its sparsemax and its trainable-query bucket; ``--quick``: the whole quick
grid) through :func:`attndyn.atlas.run_atlas`, one bucket after another in this process,
counting XLA compilations with JAX's ``backend_compile`` monitoring event. Per bucket it
prints the wall time (compilation included), the bucket job's own computing seconds (what
``DIR/atlas.json`` keeps per bucket), configurations and compiles; then configurations/s and
compiles per configuration over the sample, and an estimate of the full grid's wall time: each
full-grid bucket costs the mean time of the sampled buckets of its kind (classifier × GD path:
fast path with or without the reduced ODE, or autodiff GD without an ODE). The numbers depend
on how loaded the machine is; say so when quoting them. Writes ``DIR/atlas_bench.json``.
``--write-history PATH`` also appends these numbers as one dated section (the commit, the
machine and its load, the command) to ``PATH``, the measurement history
(docs/measurements/atlas-speed.md; :mod:`benchmarks.history`).

``--baseline`` also runs each sampled bucket the way the atlas ran before
``train.flow_time``: every point to the bucket's ``steps`` in one chunk, each lr's rows cut at
``τ/lr`` afterwards; it prints both wall times per bucket and their ratio, measured in the
same process. ``--baseline-ode`` also runs each sampled bucket with the reduced ODE solved
once per learning rate, as before :func:`attndyn.dynamics.strategy.lrs_together` solved it once
for all of them in flow time; it prints both wall times per bucket and their ratio.

``--workers N`` times the sample twice, one run after the other in this process: its buckets
as jobs on a Dask ``LocalCluster`` of ``N`` worker processes (``run_atlas(workers=N)``,
:func:`attndyn.jobs.cluster`), then in this process (``workers=1``, an in-process worker,
which compiles afresh: the workers' compiles stay in their processes). It prints both wall
times, their ratio and the largest relative difference between the two tables, and writes
``DIR/atlas_workers.json``.

``--compare DIR_A DIR_B`` runs nothing: it reads two finished atlases' ``atlas.csv`` (another
machine, backend, precision or version of attndyn: an atlas written before the job store, which
kept ``buckets/`` records beside its atlas.csv, compares the same way) and prints, over their
common rows (matched by bucket, σ, lr and seed), how many runs hold in one and not the other
under today's tolerances (each with the measure nearest its tolerance), each measure's relative
difference (median, 99th percentile, largest) and the computing seconds of the buckets both
timed (``atlas.json``'s per-bucket seconds; a bucket an older atlas marked as timed in part is
left out): B's over A's in all and per bucket.
"""
import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Optional


def _kind(s, bucket) -> str:
  """``classifier/path``: ``fast+reduced``, ``fast`` (the fast path without the reduced ODE: TL
  by default) or ``autodiff``."""
  from attndyn import atlas
  path = ("fast+reduced" if atlas.solves_ode(s, bucket) else "fast") if atlas.fast_path(bucket) \
      else "autodiff"
  return f"{bucket.values['classifier']}/{path}"


def estimate_seconds(s, timed, among) -> tuple:
  """What the buckets ``among`` would take: each costs the mean seconds of the ``timed``
  ``(bucket, seconds)`` of its kind (:func:`_kind`), a kind none of them has the mean of all.

  Returns:
    ``(seconds, kinds)``: the sum, and the kinds costed at the mean of all (sorted).
  """
  by_kind = {}
  for bucket, seconds in timed:
    by_kind.setdefault(_kind(s, bucket), []).append(seconds)
  mean = {k: sum(v) / len(v) for k, v in by_kind.items()}
  fallback = sum(seconds for _, seconds in timed) / len(timed)
  kinds = [_kind(s, b) for b in among]
  return sum(mean.get(k, fallback) for k in kinds), sorted(set(kinds) - set(mean))


def default_sample(s) -> list:
  """Indices of the sampled buckets of the full grid (see the module docstring)."""
  from attndyn import atlas
  from attndyn.settings import as_json
  chosen = []
  base = as_json(s.base)
  largest = {"n_nontopic": max(s.axes.n_nontopic), "vocab_size": max(s.axes.vocab_size)}
  for b in atlas.buckets(s):
    v = b.values
    diff = {k: v[k] for k in base if v[k] != base[k]}
    if not diff or (v["classifier"] == "tc" and diff in (
        largest, {"normaliser": "sparsemax"}, {"train_query": True})):
      chosen.append(b.index)
  return chosen


def _computing(out: Path, index: int) -> Optional[float]:
  """The bucket job's computing seconds, as ``out/atlas.json`` keeps them (``None``: not there)."""
  try:
    seconds = json.loads((out / "atlas.json").read_text(encoding="utf-8"))["seconds"]
    value = seconds[f"bucket-{index:04d}"]
  except (OSError, ValueError, KeyError, TypeError):
    return None
  return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _fmt(seconds: Optional[float]) -> str:
  return "—" if seconds is None else f"{seconds:.1f} s"


@contextlib.contextmanager
def _without_flow_time(atlas):
  """The atlas's bucket configs as before ``train.flow_time``: one chunk, every point to
  ``steps`` (the rows are still cut at ``τ/lr``, so they are the same measures)."""
  original = atlas.run_config

  def run_config(s, bucket):
    raw = original(s, bucket)
    raw["train"].pop("flow_time")
    raw["sweep"]["chunk_size"] = atlas.n_configurations(s, bucket) * s.seeds
    return raw

  atlas.run_config = run_config
  try:
    yield
  finally:
    atlas.run_config = original


@contextlib.contextmanager
def _ode_per_lr():
  """The reduced ODE solved once per learning rate (each lr's chunk its own solve)."""
  from attndyn.dynamics import strategy
  original = strategy.lrs_together
  strategy.lrs_together = lambda train_cfg, grid=(): False
  try:
    yield
  finally:
    strategy.lrs_together = original


def _timed(atlas, out: Path, index: int, quick: bool) -> tuple:
  """``(wall seconds, the job's computing seconds)`` of one bucket run into ``out``."""
  t0 = time.perf_counter()
  atlas.run_atlas(out, quick=quick, only=[index], progress=False, findings=False)
  return time.perf_counter() - t0, _computing(out, index)


COMPARED = ("sen_error", "q_drift", "assumption1_ratio", "ode_rel_dev", "test_acc",
            "mean_topic_score", "time_to_learn")


def _atlas_rows(directory: Path) -> dict:
  """``(bucket, σ, lr, seed) -> row`` of ``directory/atlas.csv`` (or, for the atlases kept in
  docs/atlas without it, of their per-bucket ``buckets/bucket-NNNN.csv``), flagged with
  today's tolerances."""
  from attndyn import atlas
  from attndyn.analysis import atlas as measures
  table = directory / "atlas.csv"
  kept = sorted((directory / "buckets").glob("bucket-*.csv"))
  rows = atlas.read_table(table) if table.is_file() or not kept else [
      r for path in kept for r in atlas.read_table(path)]
  rows = measures.with_flags(rows, atlas.TOLERANCES)
  return {(r["bucket"], r["sigma"], r["lr"], r["seed"]): r for r in rows}


def _bucket_seconds(directory: Path) -> dict:
  """``bucket-NNNN -> computing seconds`` from ``directory/atlas.json`` (an older atlas's
  buckets timed in part, ``buckets_with_partial_times``, and unknown times left out)."""
  try:
    doc = json.loads((directory / "atlas.json").read_text(encoding="utf-8"))
  except (OSError, ValueError):
    doc = {"seconds": {}}
  for meta in sorted((directory / "buckets").glob("bucket-*.json")):   # kept per-bucket files
    try:
      seconds = json.loads(meta.read_text(encoding="utf-8")).get("seconds") or []
      doc["seconds"].setdefault(meta.stem, sum(seconds) if None not in seconds else None)
    except (OSError, ValueError, TypeError, AttributeError):
      pass
  partial = set(doc.get("buckets_with_partial_times") or ())
  return {k: float(v) for k, v in (doc.get("seconds") or {}).items()
          if k.startswith("bucket-") and k not in partial and isinstance(v, (int, float))
          and math.isfinite(v) and v > 0}


def compare(a: Path, b: Path) -> dict:
  """Two finished atlases ``a`` and ``b``, row by row (see the module docstring); prints and
  returns it."""
  import numpy as np
  from attndyn import atlas
  from attndyn.analysis import atlas as measures

  def value(row, k):
    v = row.get(k, math.nan)
    return math.nan if v is None or isinstance(v, str) else float(v)

  bound = {m.name: atlas.TOLERANCES[m.tolerance] for m in measures.MEASURES}
  rows_a, rows_b = _atlas_rows(a), _atlas_rows(b)
  common = sorted(set(rows_a) & set(rows_b))
  rel = {k: [] for k in COMPARED}
  flips, per_bucket = [], {}
  for key in common:
    ra, rb = rows_a[key], rows_b[key]
    name = f"bucket-{key[0]:04d}"
    per_bucket[name] = per_bucket.get(name, 0) + 1
    for k in COMPARED:
      x, y = value(ra, k), value(rb, k)
      if math.isfinite(x) and math.isfinite(y) and x != 0:
        rel[k].append(abs(y - x) / abs(x))
    if ra["holds"] != rb["holds"]:
      # The measure whose value in A sits nearest its tolerance (log distance); a run that
      # diverged, or has no positive measure, is named by its `broken` flags instead.
      judged = [k for k in bound if math.isfinite(value(ra, k)) and value(ra, k) > 0]
      near = min(judged, key=lambda k: abs(math.log(value(ra, k) / bound[k])), default=None)
      flips.append({"bucket": name, "sigma": key[1], "lr": key[2], "seed": key[3],
                    "holds_a": ra["holds"], "measure": near or f"{ra['broken']} / {rb['broken']}",
                    "bound": bound[near] if near else math.nan,
                    "a": value(ra, near) if near else math.nan,
                    "b": value(rb, near) if near else math.nan})
  seconds_a, seconds_b = _bucket_seconds(a), _bucket_seconds(b)
  buckets = [{"bucket": name, "rows": n, "seconds_a": seconds_a.get(name),
              "seconds_b": seconds_b.get(name),
              "ratio": seconds_b[name] / seconds_a[name]
              if name in seconds_a and name in seconds_b else None}
             for name, n in sorted(per_bucket.items())]
  timed = [r for r in buckets if r["ratio"] is not None]
  total_a = sum(r["seconds_a"] for r in timed)
  total_b = sum(r["seconds_b"] for r in timed)
  doc = {"buckets": buckets, "rows": len(common), "rows_a": len(rows_a), "rows_b": len(rows_b),
         "holds_differ": flips,
         "relative_difference": {k: {"n": len(v), "median": float(np.median(v)),
                                     "p99": float(np.percentile(v, 99)), "max": float(max(v))}
                                 for k, v in rel.items() if v},
         "seconds_a": total_a, "seconds_b": total_b}
  print(f"{len(buckets)} common buckets, {len(common)} common rows (A has {len(rows_a)}, "
        f"B {len(rows_b)}); holds differs in {len(flips)}")
  for f in flips:
    print(f"  {f['bucket']} σ {f['sigma']:.3g} lr {f['lr']:.3g} seed {f['seed']}: "
          f"{f['measure']} {f['a']:.5g} / {f['b']:.5g} (bound {f['bound']:g})")
  for k, v in doc["relative_difference"].items():
    print(f"  {k:<18} relative difference: median {v['median']:.2e}, 99th percentile "
          f"{v['p99']:.2e}, largest {v['max']:.2e} ({v['n']} rows)")
  if timed:
    ratios = [r["ratio"] for r in timed]
    print(f"computing seconds over {len(timed)} buckets: A {total_a:.1f} s, B {total_b:.1f} s, "
          f"B / A {total_b / total_a:.3f} (per bucket: median {float(np.median(ratios)):.3f}, "
          f"{min(ratios):.3f} … {max(ratios):.3f})")
  return doc


def workers(out: Path, quick: bool, sample, n: int) -> int:
  """``--workers N``: the sample's wall time on a Dask LocalCluster of ``N`` worker processes
  and in this process."""
  from attndyn import atlas
  s = atlas.settings(quick=quick)
  everything = atlas.buckets(s)
  if sample:
    sample = [int(i) for i in sample.split(",")]
  else:
    sample = [b.index for b in everything] if quick else default_sample(s)
  seconds, tables = {}, {}
  for w in (n, 1):
    t0 = time.perf_counter()
    got = atlas.run_atlas(out / f"workers-{w}", quick=quick, only=sample, progress=False,
                          findings=False, workers=w)
    seconds[w], tables[w] = time.perf_counter() - t0, got.rows
    print(f"workers={w}: {seconds[w]:.1f} s for {len(sample)} buckets, "
          f"{sum(atlas.n_configurations(s, everything[i]) for i in sample)} configurations",
          flush=True)
  # a NaN or infinity in one table only, or a missing row, counts as an infinite difference
  worst = 0.0 if len(tables[n]) == len(tables[1]) else math.inf
  for ra, rb in zip(tables[n], tables[1]):
    for k, v in rb.items():
      u = ra.get(k)
      if not isinstance(v, float) or u == v or (isinstance(u, float) and math.isnan(u)
                                                and math.isnan(v)):
        continue
      finite = isinstance(u, float) and math.isfinite(u) and math.isfinite(v)
      worst = max(worst, abs(u - v) / max(abs(v), 1e-300) if finite else math.inf)
  doc = {"grid": "quick" if quick else "full", "buckets": sample, "workers": n,
         "seconds": {str(k): v for k, v in seconds.items()}, "ratio": seconds[1] / seconds[n],
         "rows": len(tables[1]), "largest_relative_difference": worst}
  print(f"ratio (one process / {n} workers): {doc['ratio']:.2f}x; "
        f"largest relative difference between the tables: {worst:.2e}")
  out.mkdir(parents=True, exist_ok=True)
  (out / "atlas_workers.json").write_text(json.dumps(doc, indent=1))
  return 0


HISTORY_TITLE = "`attndyn atlas`: measured wall times"
HISTORY_COMMAND = ("python -m benchmarks.atlas --out DIR [--quick] [--buckets ...] "
                   "--write-history PATH")


def history_lines(doc: dict) -> list:
  """The markdown body of one history section: a row per timed bucket (wall seconds with
  compilation, the job's computing seconds, configurations, compiles, the baselines' ratios
  when run) and the sample's throughput and whole-grid estimate (``doc`` is atlas_bench.json's
  content)."""
  lines = ["| bucket | kind | seconds | computing | configurations | compiles (seconds) | "
           "baselines |",
           "|---|---|---|---|---|---|---|"]
  for r in doc["rows"]:
    base = [f"{name} {r[key] / r['seconds']:.2f}×" for name, key in
            (("no flow_time", "baseline_seconds"), ("ODE per lr", "baseline_ode_seconds"))
            if key in r]
    lines.append(f"| {r['bucket']} | {r['kind']} | {r['seconds']:.1f} | {_fmt(r['computing'])} | "
                 f"{r['configurations']} | {r['compiles']} ({r['compile_seconds']:.1f}) | "
                 f"{', '.join(base) or '—'} |")
  total = sum(r["seconds"] for r in doc["rows"])
  lines += ["", f"{sum(r['configurations'] for r in doc['rows'])} configurations in {total:.1f} s: "
            f"{doc['configurations_per_s']:.3f} configurations/s, "
            f"{doc['compiles_per_configuration']:.3f} compiles per configuration; the "
            f"{doc['grid']} grid ({doc['grid_buckets']} buckets, {doc['grid_configurations']} "
            f"configurations) estimated at {doc['estimated_grid_seconds'] / 60:.1f} min"
            + (f" (unsampled kinds at the mean: {', '.join(doc['kinds_unsampled'])})"
               if doc["kinds_unsampled"] else "") + "."]
  return lines


def main(argv=None) -> int:
  if argv is None:
    argv = sys.argv[1:]
  if argv[:1] == ["--compare"]:
    missing = [d for d in argv[1:] if not (Path(d) / "atlas.csv").is_file()
               and not any((Path(d) / "buckets").glob("bucket-*.csv"))]
    if len(argv) != 3 or missing:
      print("python -m benchmarks.atlas: --compare takes two finished atlases' directories "
            "(each with its atlas.csv, or kept buckets/*.csv)"
            + (f"; {missing[0]!r} has neither" if missing else ""),
            file=sys.stderr)
      return 2
    compare(Path(argv[1]), Path(argv[2]))
    return 0
  import jax
  from attndyn import atlas
  parser = argparse.ArgumentParser(prog="python -m benchmarks.atlas", description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--quick", action="store_true", help="time the whole quick grid")
  parser.add_argument("--buckets", help="comma-separated bucket indices of the grid")
  parser.add_argument("--baseline", action="store_true",
                      help="also time each bucket without train.flow_time (one chunk, every "
                           "point to the bucket's steps) and print the ratio")
  parser.add_argument("--baseline-ode", action="store_true",
                      help="also time each bucket with the reduced ODE solved once per learning "
                           "rate and print the ratio")
  parser.add_argument("--workers", type=int, default=None, metavar="N",
                      help="time the sample on a Dask LocalCluster of N worker processes "
                           "against this process")
  parser.add_argument("--write-history", metavar="PATH",
                      help="append the timings, dated, with the commit and the machine, to this "
                           "markdown file (docs/measurements/atlas-speed.md)")
  args = parser.parse_args(argv)
  if args.write_history is not None:
    from benchmarks import history
    from attndyn.tasks.errors import ConfigError
    try:
      history.check_path(args.write_history)
      if args.workers is not None:
        raise ConfigError("--write-history records the sample's bucket timings, not --workers' "
                          "comparison: run the two apart.")
    except ConfigError as err:
      print(f"python -m benchmarks.atlas: {err}", file=sys.stderr)
      return 2
    load_before = history.load()
  if args.workers is not None:
    return workers(Path(args.out), args.quick, args.buckets, args.workers)
  compiles = []
  jax.monitoring.register_event_duration_secs_listener(
      lambda event, secs, **kw: compiles.append(secs)
      if event == "/jax/core/compile/backend_compile_duration" else None)
  s = atlas.settings(quick=args.quick)
  everything = atlas.buckets(s)
  if args.buckets:
    sample = [int(i) for i in args.buckets.split(",")]
  else:
    sample = [b.index for b in everything] if args.quick else default_sample(s)
  rows = []
  for index in sample:
    n_before, t0 = len(compiles), time.perf_counter()
    out = Path(args.out) / f"bucket-{index:04d}"
    atlas.run_atlas(out, quick=args.quick, only=[index], progress=False, findings=False)
    b = everything[index]
    per_bucket = atlas.n_configurations(s, b)
    rows.append({"bucket": index, "kind": _kind(s, b), "values": b.values,
                 "seconds": time.perf_counter() - t0, "configurations": per_bucket,
                 "compiles": len(compiles) - n_before,
                 "compile_seconds": sum(compiles[n_before:]),
                 "computing": _computing(out, index)})
    r = rows[-1]
    print(f"bucket {index:4d} {r['kind']:<16} {r['seconds']:7.1f} s  {per_bucket} configurations  "
          f"{r['compiles']} compiles ({r['compile_seconds']:.1f} s)  computing "
          f"{_fmt(r['computing'])}",
          flush=True)
    if args.baseline:
      with _without_flow_time(atlas):
        r["baseline_seconds"], r["baseline_computing"] = _timed(
            atlas, Path(args.out) / f"baseline-{index:04d}", index, args.quick)
      print(f"  baseline (no flow_time, one chunk) {r['baseline_seconds']:7.1f} s  "
            f"(computing {_fmt(r['baseline_computing'])})  "
            f"ratio {r['baseline_seconds'] / r['seconds']:.2f}x",
            flush=True)
    if args.baseline_ode:
      with _ode_per_lr():
        r["baseline_ode_seconds"], r["baseline_ode_computing"] = _timed(
            atlas, Path(args.out) / f"baseline-ode-{index:04d}", index, args.quick)
      print(f"  baseline (reduced ODE per lr) {r['baseline_ode_seconds']:7.1f} s  "
            f"(computing {_fmt(r['baseline_ode_computing'])})  "
            f"ratio {r['baseline_ode_seconds'] / r['seconds']:.2f}x", flush=True)
  total = sum(r["seconds"] for r in rows)
  configs = sum(r["configurations"] for r in rows)
  estimate, unsampled = estimate_seconds(s, [(everything[r["bucket"]], r["seconds"]) for r in rows],
                                         everything)
  doc = {"grid": "quick" if args.quick else "full", "rows": rows,
         "configurations_per_s": configs / total,
         "compiles_per_configuration": sum(r["compiles"] for r in rows) / configs,
         "grid_buckets": len(everything),
         "grid_configurations": sum(atlas.n_configurations(s, b) for b in everything),
         "estimated_grid_seconds": estimate,
         "kinds_unsampled": unsampled}
  print(f"{configs} configurations in {total:.0f} s: {doc['configurations_per_s']:.2f} "
        f"configurations/s, {doc['compiles_per_configuration']:.3f} compiles per configuration; "
        f"the {doc['grid']} grid ({len(everything)} buckets, {doc['grid_configurations']} "
        f"configurations) would take about {estimate / 60:.0f} min on this machine as loaded now"
        + (f" (unsampled kinds costed at the mean: {doc['kinds_unsampled']})"
           if doc["kinds_unsampled"] else ""))
  Path(args.out).mkdir(parents=True, exist_ok=True)
  (Path(args.out) / "atlas_bench.json").write_text(json.dumps(doc, indent=1, default=str))
  if args.write_history is not None:
    import shlex
    command = " ".join(["python -m benchmarks.atlas", *map(shlex.quote, argv)])
    label = (f"benchmarks.atlas, the {doc['grid']} grid's bucket{'s' if len(rows) > 1 else ''} "
             f"{', '.join(str(r['bucket']) for r in rows)}")
    history.append(args.write_history, label, command, history_lines(doc), title=HISTORY_TITLE,
                   generated_by=HISTORY_COMMAND, load_before=load_before)
    print(f"appended to {args.write_history}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
