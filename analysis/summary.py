"""JSON-ready summaries of a sweep: one record per run, and their aggregate.

Inputs are what :func:`dynamics.run_sweep` returns: NumPy arrays with a leading
sweep-point axis ``P``, observables recorded by
:func:`analysis.observables.topic_observables`. Every number in the output is a
plain Python ``int``/``float`` or ``None`` (NaN and ±Inf become ``None``), so
``json.dumps(..., allow_nan=False)`` accepts it.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Theorem 1 (eq 9), Corollary 1 (eq 10), Assumption 1.
  https://arxiv.org/abs/2011.10036
"""
import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from attndyn.analysis.deviation import final_abs_deviation, max_abs_deviation
from attndyn.analysis.theorem1 import invariant_drift
from attndyn.analysis.sen import sen_norm, sen_relative_error
from attndyn.dynamics.trajectory import Trajectory, failure_reason

__all__ = ["json_number", "json_ready", "run_summaries", "run_headline", "aggregate"]


def json_number(x) -> Optional[float]:
  """A finite float, or ``None`` for NaN/±Inf (strict JSON has no NaN)."""
  x = float(x)
  return x if math.isfinite(x) else None


def json_ready(obj: Any) -> Any:
  """``obj`` with NumPy/JAX scalars and arrays turned into plain Python values."""
  if isinstance(obj, Mapping):
    return {str(k): json_ready(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [json_ready(v) for v in obj]
  if obj is None or isinstance(obj, (str, bool)):
    return obj
  if isinstance(obj, (np.bool_,)):
    return bool(obj)
  if isinstance(obj, (int, np.integer)):
    return int(obj)
  if isinstance(obj, (float, np.floating)):
    return json_number(obj)
  arr = np.asarray(obj)
  if arr.ndim == 0:
    return json_ready(arr.item())
  return [json_ready(v) for v in arr.tolist()]


def _time_or_none(x) -> Optional[float]:
  """``failed_at`` as JSON: ``None`` for ``-1`` (never failed), else the step/time."""
  x = float(x)
  if x < 0:
    return None
  return int(x) if x.is_integer() else x


def run_summaries(points: Sequence[Mapping], gd: Trajectory, odes: Mapping[str, Trajectory],
                  m: int) -> list:
  """One JSON-ready record per sweep point.

  Per topic word ``t`` (ids ``0 .. T-1``), at the last recorded time: the score
  ``s_t``, the embedding norm ``‖v_t‖``, Corollary 1's prediction

  .. math:: \\|v_t\\|_{SEN} = \\sqrt{2\\left(s_t + \\frac{e^{s_t}}{m} - \\frac1m\\right)}
     \\quad (10)

  its relative error ``|‖v_t‖ − ‖v_t‖_SEN| / ‖v_t‖_SEN``, and the drift of
  Theorem 1's ``Q_t`` (eq 9), ``max_τ |Q_t(τ) − Q_t(0)| / |s_t(end) − s_t(0)|``.
  For every ODE kind, ``max_{τ,t} |s_t^{GD}(τ) − s_t^{ODE}(τ)|``, the same at
  the last time, and the ODE's ``failed_at``.

  Args:
    points: ``P`` dicts of the sweep coordinates of each point (e.g.
      ``{"seed": 0, "data_seed": 0, "train.lr": 0.1}``), copied into the records.
    gd: gradient-descent :class:`Trajectory` with a leading ``P`` axis
      (``t [P, T]``, observables ``[P, T, ...]``, ``failed_at [P]``).
    odes: ODE kind (e.g. ``"reduced"``, ``"flow"``) -> :class:`Trajectory`
      recorded at the same times as ``gd``; may be empty.
    m: non-topic words per sentence (Corollary 1's ``m``).

  Returns:
    A list of ``P`` dicts with keys: the point's coordinates, ``final_train_loss``,
    ``train_acc``, ``test_acc``, ``topic_attention``, ``diverged`` (whether gradient
    descent went non-finite: NaN or ±Inf loss or parameters; the run is then
    frozen at its last finite parameters), ``failed_at`` (the step it diverged
    at, or ``None``),
    ``topic_words`` (list of ``{word, score, emb_norm, sen_norm, sen_rel_error,
    invariant_drift}``), ``nontopic_max_abs_score_change``,
    ``nontopic_max_abs_norm_change``, ``ode_max_abs_score_dev``,
    ``ode_final_abs_score_dev``, ``ode_failed_at``, ``ode_failure_reason`` (``None``,
    or a name from :data:`dynamics.trajectory.FAILURE_REASONS`: ``max_steps``,
    ``non_finite``, ``step_size_underflow``, ``solver_error``) and ``ode_solver_steps``
    (dicts keyed by ODE kind; the last two only for ODEs that carry
    :class:`dynamics.trajectory.ODEStats`).

  Raises:
    ConfigError: an ODE recorded at other times than ``gd``.
    ValueError: ``len(points)`` differs from the sweep size of ``gd``.
  """
  obs = {k: np.asarray(v) for k, v in gd.observables.items()}
  n_points = obs["loss"].shape[0]
  if len(points) != n_points:
    raise ValueError(f"{len(points)} sweep points given for a trajectory of {n_points} runs.")
  score, emb_norm = obs["score"][:, -1], obs["emb_norm"][:, -1]            # [P, T]
  predicted = np.asarray(sen_norm(score, m))
  with np.errstate(divide="ignore", invalid="ignore"):
    rel_error = np.asarray(sen_relative_error(score, emb_norm, m))
    drift = np.asarray(invariant_drift(obs["invariant"], obs["score"]))   # [P, T]
  max_dev = {kind: max_abs_deviation(gd, ode, "score") for kind, ode in odes.items()}
  final_dev = {kind: final_abs_deviation(gd, ode, "score") for kind, ode in odes.items()}
  failed_gd = np.asarray(gd.failed_at).reshape(n_points)
  failed_ode = {kind: np.asarray(ode.failed_at).reshape(n_points) for kind, ode in odes.items()}
  solved = {kind: ode.ode for kind, ode in odes.items() if getattr(ode, "ode", None) is not None}
  reasons = {k: np.asarray(v.reason).reshape(n_points) for k, v in solved.items()}
  steps = {k: np.asarray(v.num_steps).reshape(n_points) for k, v in solved.items()}

  summaries = []
  for p, point in enumerate(points):
    words = [{
        "word": int(t),
        "score": json_number(score[p, t]),
        "emb_norm": json_number(emb_norm[p, t]),
        "sen_norm": json_number(predicted[p, t]),
        "sen_rel_error": json_number(rel_error[p, t]),
        "invariant_drift": json_number(drift[p, t]),
    } for t in range(score.shape[-1])]
    record = json_ready(dict(point))
    record.update({
        "final_train_loss": json_number(obs["loss"][p, -1]),
        "train_acc": json_number(obs["train_acc"][p, -1]),
        "test_acc": json_number(obs["test_acc"][p, -1]),
        "topic_attention": json_number(obs["topic_attention"][p, -1]),
        "diverged": bool(failed_gd[p] >= 0),
        "failed_at": _time_or_none(failed_gd[p]),
        "topic_words": words,
        "nontopic_max_abs_score_change": json_number(obs["nontopic_max_abs_score_change"][p, -1]),
        "nontopic_max_abs_norm_change": json_number(obs["nontopic_max_abs_norm_change"][p, -1]),
        "ode_max_abs_score_dev": {k: json_number(v[p]) for k, v in max_dev.items()},
        "ode_final_abs_score_dev": {k: json_number(v[p]) for k, v in final_dev.items()},
        "ode_failed_at": {k: _time_or_none(v[p]) for k, v in failed_ode.items()},
        "ode_failure_reason": {k: failure_reason(v[p]) for k, v in reasons.items()},
        "ode_solver_steps": {k: int(v[p]) for k, v in steps.items()},
    })
    summaries.append(record)
  return summaries


def _stats(values) -> dict:
  """``{mean, min, max, n}`` over the values that are not ``None``."""
  finite = [v for v in values if v is not None]
  if not finite:
    return {"mean": None, "min": None, "max": None, "n": 0}
  return {"mean": json_number(np.mean(finite)), "min": json_number(np.min(finite)),
          "max": json_number(np.max(finite)), "n": len(finite)}


def _word_stat(record: Mapping, key: str, reduce) -> Optional[float]:
  values = [w[key] for w in record.get("topic_words", []) if w.get(key) is not None]
  return json_number(reduce(values)) if values else None


def _ratio(num, den) -> Optional[float]:
  if num is None or den is None or den == 0:
    return None
  return json_number(num / den)


_HEADLINE = ("final_train_loss", "train_acc", "test_acc", "topic_attention",
             "mean_final_topic_score", "max_sen_rel_error", "max_invariant_drift",
             "nontopic_to_topic_score_ratio", "nontopic_to_topic_norm_ratio")


def run_headline(record: Mapping) -> dict:
  """One run's numbers over its topic words (a record of :func:`run_summaries`):
  ``mean_final_topic_score`` (mean), ``max_sen_rel_error`` and ``max_invariant_drift`` (max),
  and Assumption 1's ratios (see :func:`aggregate`); ``None`` where undefined."""
  return {"mean_final_topic_score": _word_stat(record, "score", np.mean),
          "max_sen_rel_error": _word_stat(record, "sen_rel_error", np.max),
          "max_invariant_drift": _word_stat(record, "invariant_drift", np.max),
          "nontopic_to_topic_score_ratio": _ratio(record.get("nontopic_max_abs_score_change"),
                                                  _word_stat(record, "score", np.mean)),
          "nontopic_to_topic_norm_ratio": _ratio(record.get("nontopic_max_abs_norm_change"),
                                                 _word_stat(record, "emb_norm", np.min))}


def aggregate(summaries: Sequence[Mapping]) -> dict:
  """Mean/min/max over runs of the headline numbers of :func:`run_summaries`.

  Per run first: ``mean_final_topic_score`` (mean over topic words),
  ``max_sen_rel_error`` and ``max_invariant_drift`` (max over topic words),
  ``nontopic_to_topic_score_ratio`` = ``nontopic_max_abs_score_change / mean_t
  s_t`` (the Section 5.1 reproduction's Assumption-1 row: the paper compares the
  topic words' scores, as a group, with the non-topic words') and
  ``nontopic_to_topic_norm_ratio`` = ``nontopic_max_abs_norm_change / min_t
  ‖v_t‖`` (Assumption 1: both ≪ 1); then statistics over runs. Runs
  whose gradient descent diverged are counted (``n_diverged``) and listed
  (``diverged``: ``[{run, failed_at}]``, ``run`` indexing ``summaries``) but
  left out of the statistics, as are ``None`` entries (NaN, Inf, undefined
  ratios); ``n`` counts the runs that entered. ``ode_n_failed`` counts over all runs.

  Args:
    summaries: records from :func:`run_summaries`.

  Returns:
    ``{"n_runs", "n_diverged", "diverged", "final_train_loss": {mean, min, max, n}, "test_acc",
    "train_acc", "topic_attention", "mean_final_topic_score", "max_sen_rel_error",
    "max_invariant_drift", "nontopic_to_topic_score_ratio",
    "nontopic_to_topic_norm_ratio", "ode_max_abs_score_dev": {kind: stats},
    "ode_final_abs_score_dev": {kind: stats}, "ode_n_failed": {kind: int}}``.
  """
  kinds = sorted({k for r in summaries for k in r.get("ode_max_abs_score_dev", {})})
  diverged = [{"run": i, "failed_at": r["failed_at"]} for i, r in enumerate(summaries)
              if r["failed_at"] is not None]
  out = {"n_runs": len(summaries), "n_diverged": len(diverged), "diverged": diverged}
  out["ode_n_failed"] = {k: sum(r["ode_failed_at"].get(k) is not None for r in summaries)
                         for k in kinds}
  summaries = [r for r in summaries if r["failed_at"] is None]
  per_run = [{key: r[key] for key in ("final_train_loss", "train_acc", "test_acc",
                                       "topic_attention")} | run_headline(r) for r in summaries]
  out.update({key: _stats([r[key] for r in per_run]) for key in _HEADLINE})
  for key in ("ode_max_abs_score_dev", "ode_final_abs_score_dev"):
    out[key] = {k: _stats([r[key].get(k) for r in summaries]) for k in kinds}
  return out
