"""Minibatch SGD across hundreds of noise seeds vs gradient flow and the stochastic modified equation.

Setting: the Lu topic task with a smaller dictionary (``M = 500``, 200 training
sentences; otherwise Section 5.1's text preset), Attn-TC. All runs start from
the same ``params0``; only the minibatch order (SGD) or the Brownian path (SDE)
differs between seeds. Time is gradient-flow time ``τ = lr · step``.

* SGD (``dynamics.make_train``, optimizer ``sgd``): ``lr`` is a traced sweep
  axis vmapped with the seeds; ``B`` is an outer loop of compiled calls.
* Gradient flow (``dynamics.gradient_flow``) and full-batch GD are the
  noiseless references.
* The SME (``dynamics.sde.sgd_sde``, full model, Itô Euler–Maruyama) and the
  reduced SEN system's SME (``dynamics.sde.reduced_sgd_sde``) at ``lr`` =
  ``sde.lr`` for a few ``B``.

Var, everywhere here: the across-seed variance of each topic word's ``s_t``
(``ddof = 1``), averaged over the topic words (:func:`analysis.sgd_noise.word_variance`);
the variance of the topic words' mean score is reported beside it. One init
is shared by every seed, so every interval covers the minibatch (or Brownian)
noise of that init only.

Claims: the SGD mean approaches gradient flow as B grows; the across-seed
variance of ``s_t`` at a fixed ``τ`` scales as ``(lr/B)^1``; the SDE's variance
is within 20% of SGD's with replacement where ``lr/B`` is small; Corollary 1
holds for every SGD seed. Reported: take-off times, Theorem 1's drift against
``lr/B``; shuffled epochs (drop-last, a final short batch, a B that divides n)
against the SME, which models independent minibatches, with the ratio that
their epoch-boundary noise alone predicts (:func:`analysis.sgd_noise.epoch_boundary_ratio`).
"""
import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from attndyn import analysis
from attndyn import dynamics
from attndyn import models
from attndyn import settings
from attndyn.analysis import replication as rep
from attndyn.analysis import sgd_figures as figs
from attndyn.analysis import sgd_noise as stats
from attndyn.models.classifiers import CLASSIFIERS
from attndyn.models.lu_linear import apply_linear_for
from attndyn.reproduce.lu2021 import common
from attndyn.reproduce.runner import Outcome
from attndyn.reproduce import engine
from attndyn.dynamics import sde
from attndyn.tasks.errors import ConfigError

__all__ = ["NAME", "TITLE", "SDE", "Tolerances", "Settings", "FULL", "QUICK", "SME", "SOURCES",
           "run"]

NAME = "noise"
TITLE = "SGD as a stochastic process: SGD over many seeds vs gradient flow and the SDE"


@dataclasses.dataclass(frozen=True)
class SDE:
  """The stochastic modified equation's runs (:mod:`attndyn.dynamics.sde`).

  Attributes:
    lr: the learning rate of the SDE runs (one of ``lrs``: its SGD runs are the comparison).
    batch_sizes: B of the full model's SME against SGD with replacement (each in ``batch_sizes``).
    shuffle_batch_sizes: B of the full model's SME against shuffled epochs (each in
      ``shuffle_batch_sizes``).
    dt: the Euler–Maruyama step, in SGD steps.
    brownian: the Brownian motion (``virtual``: a virtual Brownian tree; ``unsafe``: increments
      drawn per step).
    reduced_batch_sizes: B of the reduced SEN system's SME (each in ``batch_sizes``).
    valid_max_ratio: the largest lr/B at which the SDE's variance is judged against SGD's.
  """
  lr: settings.Number
  batch_sizes: tuple[settings.Count, ...]
  shuffle_batch_sizes: tuple[settings.Count, ...]
  dt: settings.Number
  brownian: Literal[sde.BROWNIAN]
  reduced_batch_sizes: tuple[settings.Count, ...]
  valid_max_ratio: settings.Number


@dataclasses.dataclass(frozen=True)
class Tolerances:
  """The judged rows' margins.

  Attributes:
    slope: |slope − 1| of log Var against log(lr/B).
    sde_ratio: |Var_SDE / Var_SGD − 1| in the SDE's valid regime.
    sen: every SGD seed's largest Corollary-1 relative error.
  """
  slope: settings.Number
  sde_ratio: settings.Number
  sen: settings.Number


@dataclasses.dataclass(frozen=True)
class Settings:
  """The experiment's settings (``--set noise.KEY=VALUE``).

  Attributes:
    task: the topic task's [task] run settings (Section 5.1's text preset, smaller dictionary).
    model: the model's [model] run settings (the text preset's).
    classifier: the Lu classifier trained.
    init_seed: the seed of the one init every run starts from.
    seeds: noise seeds (minibatch orders, Brownian paths) per configuration.
    lrs: SGD's learning rates (every lr records on the same τ grid).
    batch_sizes: B of SGD with replacement.
    shuffle_batch_sizes: B of shuffled epochs, drop-last (1..task.n_train).
    keep_last_batch_sizes: B of shuffled epochs with a final short batch (1..task.n_train).
    tau_end: the last gradient-flow time τ = lr · step.
    tau_every: τ between recorded points.
    tau_var: the τ at which the across-seed variance is compared.
    takeoff: the score s_t whose first crossing is the take-off time.
    sen_start_tau: Corollary 1 is checked from this τ on.
    sde: the SDE runs.
    tolerance: the judged rows' margins.
    bootstrap: bootstrap resamples of every interval.
  """
  task: settings.section("task")
  model: settings.section("model")
  classifier: Literal[CLASSIFIERS]
  init_seed: settings.Index
  seeds: settings.Count
  lrs: tuple[settings.Number, ...]
  batch_sizes: tuple[settings.Count, ...]
  shuffle_batch_sizes: tuple[settings.Count, ...]
  keep_last_batch_sizes: tuple[settings.Count, ...]
  tau_end: settings.Count
  tau_every: settings.Count
  tau_var: settings.Index
  takeoff: settings.Number
  sen_start_tau: settings.Index
  sde: SDE
  tolerance: Tolerances
  bootstrap: settings.Count


FULL = Settings(
    task={**common.TEXT_TASK, "vocab_size": 500, "n_train": 200, "n_test": 100},
    model=dict(common.TEXT_MODEL), classifier="tc", init_seed=0, seeds=256,
    lrs=(0.5, 1.0), batch_sizes=(4, 8, 16, 32, 64), shuffle_batch_sizes=(32, 40),
    keep_last_batch_sizes=(32,),
    tau_end=400, tau_every=10, tau_var=350, takeoff=1.0, sen_start_tau=200,
    sde=SDE(lr=1.0, batch_sizes=(4, 32), shuffle_batch_sizes=(32, 40), dt=0.5,
            brownian="virtual", reduced_batch_sizes=(32,), valid_max_ratio=0.1),
    tolerance=Tolerances(slope=0.15, sde_ratio=0.2, sen=0.05), bootstrap=1000,
)
QUICK = dataclasses.replace(
    FULL, seeds=64, batch_sizes=(4, 16, 64),
    sde=dataclasses.replace(FULL.sde, batch_sizes=(4, 64), dt=1.0, brownian="unsafe",
                            reduced_batch_sizes=()),
    bootstrap=300)

# No paper states these numbers: each rule is a prediction of SGD theory or of Lu et al.'s
# Corollary 1, with the margin ours.
SME = "Li, Tai & E (2017), stochastic modified equations: https://arxiv.org/abs/1511.06251"
SOURCES = {
    "mean_to_gf": rep.ours("SGD's mean follows gradient flow up to O(lr) and its noise shrinks "
                           "as B grows (" + SME + "); judged as strictly decreasing over B"),
    "slope": rep.ours("the SME's diffusion is (lr/B)·Σ, so the variance at fixed τ scales as "
                      "(lr/B)^1 to first order (" + SME + "); ±0.15 for the higher-order terms "
                      "in lr over the lr/B range swept"),
    "sde_ratio": rep.ours("the SME is a first-order weak approximation of SGD (" + SME + "); "
                          "within 20% where lr/B ≤ sde.valid_max_ratio"),
    "sen": rep.ours("Corollary 1 (Lu et al. 2021, Eq (10)) is derived for gradient flow; 5% "
                    "allows SGD's per-step noise around it"),
}


# Settings of the shuffled-epoch SGD runs: their batch sizes and the sampling they get.
SHUFFLED = (("shuffle_batch_sizes", "shuffle"), ("keep_last_batch_sizes", "shuffle_keep_last"))


def run(ctx, s) -> Outcome:
  task_cfg, data = common.topic_data(s.task, path=f"{NAME}.task")
  cfg = common.lu_config(task_cfg, s.classifier, s.model, path=f"{NAME}.model")
  apply = apply_linear_for(cfg)
  loss_fn = models.make_loss(apply)
  record = analysis.topic_observables(apply, data)
  trainable = cfg.trainable()
  m = task_cfg.n_nontopic
  n = task_cfg.n_train
  for key, _ in SHUFFLED:   # before anything runs
    for b in getattr(s, key):
      if not 1 <= int(b) <= n:
        raise ConfigError(f"noise.{key} holds {b}: a shuffled batch size is 1..task.n_train "
                          f"= {n}.")
  params0 = models.lu.init(jax.random.PRNGKey(s.init_seed), cfg)
  lrs = [float(v) for v in s.lrs]
  grid = stats.tau_grid(lrs, s.tau_every, s.tau_end)
  if grid is None:
    raise ConfigError(f"noise: tau_every = {float(s.tau_every):g} / lr and tau_end = "
                      f"{float(s.tau_end):g} / lr must be whole step counts for every lr in "
                      f"{lrs} (e.g. lrs 0.5 and 1 with tau_every 10).")
  tau, every, steps = grid
  S = int(s.seeds)
  keys = np.arange(S, dtype=np.uint32) + np.uint32(1000)
  iv = stats.index_at(tau, s.tau_var)
  keep = ("score", "emb_norm", "loss", "invariant")
  claims, notes, details = [], [], {"tau": tau}
  settings_json = settings.as_json(s)   # what every sweep's checkpoints are keyed by

  # --- noiseless references: gradient flow (lr folded into τ) and GD at each lr, both
  # through the engine (checkpointed, and a signal stops them inside the compiled call).
  def gf_one(_):
    traj = dynamics.gradient_flow(loss_fn, params0, data.train, record, lr=1.0, ts=tau,
                                  trainable=trainable)
    return {k: traj.observables[k] for k in keep}

  gf = engine.sweep(ctx, f"{NAME}-gradient-flow", gf_one, {"point": np.zeros(1, np.int32)},
                    settings_json)
  gf = {k: v[0] for k, v in gf.items()}
  gd_cfg = dynamics.TrainConfig(lr=max(lrs), steps=steps, record_every=every)
  gd_train = dynamics.make_train(loss_fn, data.train, record, gd_cfg, trainable)

  def gd_one(inp):
    traj = gd_train(params0, jax.random.PRNGKey(0), inp["lr"])
    return {"t": traj.t, **{k: traj.observables[k] for k in keep}}

  gd_all = engine.sweep(ctx, f"{NAME}-gd", gd_one, {"lr": np.asarray(jnp.asarray(lrs))},
                        settings_json)
  t_steps = gd_all["t"][0]
  gd = {lr: {k: gd_all[k][i][None] for k in keep} for i, lr in enumerate(lrs)}
  gd = {lr: {k: v[0] for k, v in stats.on_grid(o, t_steps, lr, tau).items()}
        for lr, o in gd.items()}
  gf_takeoff = float(stats.takeoff_times(tau, gf["score"].T, s.takeoff).mean())
  ctx.log(f"{NAME}: gradient flow take-off (s_t ≥ {s.takeoff:g}) at τ ≈ {gf_takeoff:.0f}")

  # --- SGD: lr traced (vmapped with the seeds), B an outer loop of compiled calls.
  def sgd_runs(batch_size, sampling):
    tcfg = dynamics.TrainConfig(optimizer="sgd", lr=max(lrs), steps=steps, record_every=every,
                                batch_size=batch_size, sampling=sampling)
    train = dynamics.make_train(loss_fn, data.train, record, tcfg, trainable)

    def one(inp):
      traj = train(params0, jax.random.PRNGKey(inp["seed"]), inp["lr"])
      return {k: traj.observables[k] for k in keep}

    inputs = {"seed": np.tile(keys, len(lrs)),
              "lr": np.repeat(np.asarray(lrs, np.float32), S)}
    ctx.log(f"{NAME}: SGD B = {batch_size} ({sampling}) × lr {lrs} × {S} seeds, {steps} steps")
    obs = engine.sweep(ctx, f"{NAME}-sgd-b{batch_size}-{sampling}", one, inputs, settings_json)
    return {lr: stats.on_grid({k: v[i * S:(i + 1) * S] for k, v in obs.items()}, t_steps, lr,
                              tau)
            for i, lr in enumerate(lrs)}

  sgd = {}
  for b in s.batch_sizes:
    for lr, o in sgd_runs(int(b), "replacement").items():
      sgd[lr, int(b), "replacement"] = o
  for key, sampling in SHUFFLED:
    for b in getattr(s, key):
      for lr, o in sgd_runs(int(b), sampling).items():
        sgd[lr, int(b), sampling] = o

  # --- 1. the SGD mean approaches gradient flow as B grows (fixed lr).
  batch_sizes = [int(b) for b in s.batch_sizes]
  dev = {}
  for lr in lrs:
    dev[lr] = [stats.max_mean_deviation(sgd[lr, b, "replacement"]["score"], gf["score"])
               for b in batch_sizes]
    gap = float(np.max(np.abs(gd[lr]["score"] - gf["score"])))
    claims.append(rep.claim(
        f"{NAME}.mean_to_gf.lr_{lr:g}",
        f"lr {lr:g}: max over τ and topic words of |mean over seeds of SGD's s_t − gradient "
        f"flow's s_t| decreases strictly as B grows ({', '.join(map(str, batch_sizes))})",
        paper="SGD mean → gradient flow as B → n, lr → 0",
        ours=rep.mean_ci([rep.strictly_monotone(dev[lr], increasing=False)]),
        tolerance=rep.Tolerance("all_true", source=SOURCES["mean_to_gf"]), figure="fig_bands",
        quick=ctx.quick,
        note="deviations " + " > ".join(f"{d:.3g}" for d in dev[lr])
             + f"; full-batch GD at this lr deviates {gap:.3g} (the lr → 0 part)"))
  details["mean_deviation_from_gf"] = {f"{lr:g}": dev[lr] for lr in lrs}

  # --- 2. across-seed variance of s_t at τ_var against lr/B.
  configs = [(lr, b) for lr in lrs for b in batch_sizes]
  ratios = [lr / b for lr, b in configs]
  samples = [sgd[lr, b, "replacement"]["score"][:, iv] for lr, b in configs]
  fit = stats.loglog_slope(ratios, samples, n_boot=s.bootstrap)
  var = [stats.word_variance(x) for x in samples]
  mean_samples = [x.mean(-1, keepdims=True) for x in samples]   # [S, 1]: the words' mean score
  fit_wm = stats.loglog_slope(ratios, mean_samples, n_boot=s.bootstrap)
  var_wm = [stats.word_variance(x) for x in mean_samples]
  words = samples[0].shape[-1]
  per_over_mean = [v / w for v, w in zip(var, var_wm)]
  var_def = (f"Var = across-seed variance of each topic word's s_t, averaged over the {words} "
             "topic words")
  # the bootstrap interval itself (it need not be symmetric about the fit), not fit ± half-width
  ours = rep.interval_estimate(fit.slope, fit.lo, fit.hi, S)
  if fit.lo > 1 or fit.hi < 1:
    excess = (f"the interval excludes 1: {fit.slope - 1:+.3f} from the first-order exponent; "
              "the SME is first order in lr, and the higher-order terms it leaves out bend the "
              f"line, which the ±{s.tolerance.slope:g} tolerance allows for")
  else:
    excess = "the interval contains 1"
  claims.append(rep.claim(
      f"{NAME}.var_slope", f"slope of log Var[s_t(τ = {tau[iv]:g})] against log(lr/B) over "
      f"lr ∈ {lrs} × B ∈ {batch_sizes} (SGD with replacement; {var_def})", paper=1.0, ours=ours,
      tolerance=rep.Tolerance("abs", s.tolerance.slope, source=SOURCES["slope"]),
      figure="fig_variance_scaling",
      quick=ctx.quick, comparable=S >= 256, note=f"fit {fit.slope:.3f}, bootstrap 95% [{fit.lo:.3f}, {fit.hi:.3f}] "
      f"({s.bootstrap} resamples of the {S} seeds); the ± shown is half that interval; "
      f"{excess}; one init (seed {s.init_seed}): the interval covers seed noise only"))
  claims.append(rep.claim(
      f"{NAME}.var_slope_word_mean", f"the same slope with Var = across-seed variance of the "
      f"{words} topic words' mean s_t (τ = {tau[iv]:g})", paper=1.0,
      ours=rep.interval_estimate(fit_wm.slope, fit_wm.lo, fit_wm.hi, S),
      tolerance=rep.Tolerance("info"), figure="fig_variance_scaling", quick=ctx.quick,
      note=f"bootstrap 95% [{fit_wm.lo:.3f}, {fit_wm.hi:.3f}]; per-word Var / this Var: "
           f"{min(per_over_mean):.3g}–{max(per_over_mean):.3g} over the configurations ({words} "
           "if the words' scores were independent across seeds; more: anticorrelated)"))
  iv_mid = stats.index_at(tau, gf_takeoff) if np.isfinite(gf_takeoff) else len(tau) // 2
  samples_mid = [sgd[lr, b, "replacement"]["score"][:, iv_mid] for lr, b in configs]
  fit_mid = stats.loglog_slope(ratios, samples_mid, n_boot=s.bootstrap)
  claims.append(rep.claim(
      f"{NAME}.var_slope_takeoff", f"same slope (per-word Var) at the gradient-flow take-off "
      f"τ = {tau[iv_mid]:g} (mid-transition)", paper=1.0,
      ours=rep.interval_estimate(fit_mid.slope, fit_mid.lo, fit_mid.hi, S),
      tolerance=rep.Tolerance("info"), figure="fig_variance_scaling", quick=ctx.quick,
      note=f"bootstrap 95% [{fit_mid.lo:.3f}, {fit_mid.hi:.3f}]"))
  details["variance"] = {"definition": var_def, "lr_over_B": ratios, "var_tau_var": var,
                         "var_word_mean_tau_var": var_wm, "slope_word_mean": fit_wm.slope,
                         "slope_word_mean_ci": [fit_wm.lo, fit_wm.hi],
                         "var_takeoff": [stats.word_variance(x) for x in samples_mid],
                         "slope": fit.slope, "slope_ci": [fit.lo, fit.hi],
                         "slope_takeoff": fit_mid.slope, "slope_takeoff_ci": [fit_mid.lo, fit_mid.hi]}

  # --- 3. the SME against SGD (full model), and the reduced system's SME.
  sd = s.sde
  lr_sde = float(sd.lr)
  if lr_sde not in lrs:
    raise ConfigError(f"noise: sde.lr = {lr_sde:g} must be one of lrs = {lrs} (its SGD runs are "
                      "the comparison).")
  ts = tau / lr_sde
  losses = sde.per_sample_cross_entropy(apply)
  sde_runs, var_curves = {}, {}

  def sde_sweep(b, sampling, reduced=False):
    if reduced:
      topic = jnp.arange(task_cfg.n_topic_words)
      fn = lambda k: sde.reduced_sgd_sde(
          params0, data.train, data.train_topic_word, topic, record, lr=lr_sde, batch_size=b,
          ts=ts, trainable=trainable, key=jax.random.PRNGKey(k), sampling=sampling,
          dt=float(sd.dt), brownian=sd.brownian).observables
    else:
      fn = lambda k: sde.sgd_sde(
          losses, params0, data.train, record, lr=lr_sde, batch_size=b, ts=ts,
          trainable=trainable, key=jax.random.PRNGKey(k), sampling=sampling, dt=float(sd.dt),
          brownian=sd.brownian).observables
    ctx.log(f"{NAME}: {'reduced ' if reduced else ''}SDE B = {b} ({sampling}), lr {lr_sde:g}, "
            f"{S} Brownian seeds, dt {sd.dt}")
    obs = engine.sweep(ctx, f"{NAME}-{'reduced-' if reduced else ''}sde-b{b}-{sampling}",
                       lambda k: {q: fn(k)[q] for q in keep}, keys + np.uint32(10 ** 6),
                       settings_json, chunk_size=128, what="Brownian seeds")
    return obs

  sde_rows, shuffle_curves = [], {}

  def shuffled_terms(b, sampling):
    """(claim words, predicted ratio words, predicted ratio, note on τ_var within an epoch)."""
    epoch = dynamics.steps_per_epoch(n, b, sampling)
    r = n % b
    pred = stats.epoch_boundary_ratio(n, b, sampling)
    if r == 0:
      how = f"{b} divides n = {n}: nothing dropped, {epoch} steps per epoch"
      said = ("the epoch-boundary noise is 0, so the first-order prediction is ∞ and what "
              "shuffled SGD keeps is of higher order in lr (θ moves within an epoch)")
    elif sampling == "shuffle":
      how = f"drop-last: the {r} of {n} samples left unseen each epoch, {epoch} steps per epoch"
      said = f"the dropped samples' noise alone predicts {pred:.3g}"
    else:
      how = f"a final short batch of the {r} samples left, {epoch} steps per epoch"
      said = f"the short batch's noise alone predicts {pred:.3g}"
    steps = int(round(tau[iv] / lr_sde))
    return how, said, pred, epoch, steps, stats.last_epoch_end(tau, iv, lr_sde, epoch)

  for sampling, bs in (("replacement", sd.batch_sizes), ("shuffle", sd.shuffle_batch_sizes)):
    for b in bs:
      b = int(b)
      if (lr_sde, b, sampling) not in sgd:
        raise ConfigError(f"noise: sde batch size {b} ({sampling}) has no SGD runs: add it to "
                          f"{'batch_sizes' if sampling == 'replacement' else 'shuffle_batch_sizes'}.")
      obs = sde_sweep(b, sampling)
      sde_runs[b, sampling] = obs
      # the SME has no epochs: one shuffled SME serves drop-last and the final short batch alike
      against = [sampling] + (["shuffle_keep_last"] if sampling == "shuffle"
                              and (lr_sde, b, "shuffle_keep_last") in sgd else [])
      for smp in against:
        ref = sgd[lr_sde, b, smp]["score"]
        ratio, lo, hi = stats.variance_ratio_at(obs["score"], ref, iv, n_boot=s.bootstrap)
        r_mid, lo_mid, hi_mid = stats.variance_ratio_at(obs["score"], ref, iv_mid,
                                                        n_boot=s.bootstrap)
        r_wm, lo_wm, hi_wm = stats.variance_ratio_at(obs["score"], ref, iv, word_mean=True,
                                                     n_boot=s.bootstrap)
        v_sgd, v_sde = stats.word_variance(ref[:, iv]), stats.word_variance(obs["score"][:, iv])
        common_note = (f"bootstrap 95% [{lo:.3f}, {hi:.3f}]; Var_SGD {v_sgd:.3g}, Var_SDE "
                       f"{v_sde:.3g} (per-word Var); with Var of the {words} words' mean s_t: "
                       f"{r_wm:.3g} [{lo_wm:.3g}, {hi_wm:.3g}]; at the take-off "
                       f"τ = {tau[iv_mid]:g}: {r_mid:.3g} [{lo_mid:.3g}, {hi_mid:.3g}]")
        row = {"B": b, "sampling": smp, "ratio": ratio, "ci": [lo, hi], "ratio_takeoff": r_mid,
               "ci_takeoff": [lo_mid, hi_mid], "ratio_word_mean": r_wm, "ci_word_mean": [lo_wm, hi_wm],
               "var_sgd": v_sgd, "var_sde": v_sde}
        if smp == "replacement":
          valid = lr_sde / b <= sd.valid_max_ratio
          tol = (rep.Tolerance("abs", s.tolerance.sde_ratio, f"|ratio − 1| ≤ "
                               f"{s.tolerance.sde_ratio:g}", source=SOURCES["sde_ratio"])
                 if valid else rep.Tolerance("info"))
          claims.append(rep.claim(
              f"{NAME}.sde_var_ratio.B{b}.{smp}",
              f"Var_SDE / Var_SGD of s_t at τ = {tau[iv]:g}, lr {lr_sde:g}, B {b} (with "
              f"replacement; lr/B = {lr_sde / b:.3g}{', SDE valid regime' if valid else ''}; "
              f"{var_def})", paper=1.0,
              ours=rep.interval_estimate(ratio, lo, hi, S), tolerance=tol,
              figure="fig_sde_variance", quick=ctx.quick, comparable=S >= 256,
              note=f"{common_note}; one init: the interval covers seed noise only"))
          var_curves[f"SGD B={b} {smp}"] = ref.var(0, ddof=1).mean(-1)
          var_curves[f"SDE B={b} {smp}"] = obs["score"].var(0, ddof=1).mean(-1)
        else:
          how, said, pred, epoch, steps, end = shuffled_terms(b, smp)
          if end == iv:
            where = (f"τ = {tau[iv]:g} is an epoch's end (step {steps} = "
                     f"{steps // epoch} epochs)")
          else:
            where = f"τ = {tau[iv]:g} is {steps % epoch} steps into an epoch"
            if end is not None:
              r_end, lo_end, hi_end = stats.variance_ratio_at(obs["score"], ref, end,
                                                              n_boot=s.bootstrap)
              where += (f"; at τ = {tau[end]:g}, the last recorded epoch end: {r_end:.3g} "
                        f"[{lo_end:.3g}, {hi_end:.3g}]")
              row.update(tau_epoch_end=float(tau[end]), ratio_epoch_end=r_end,
                         ci_epoch_end=[lo_end, hi_end])
          claims.append(rep.claim(
              f"{NAME}.sde_var_ratio.B{b}.{smp}",
              f"Var_SDE / Var_SGD of s_t at τ = {tau[iv]:g}, lr {lr_sde:g}, B {b}, shuffled "
              f"epochs ({how}); {said} (docs/sgd_sde.md)", paper="none: Li, Tai & E's SME "
              "assumes independent minibatches",
              ours=rep.interval_estimate(ratio, lo, hi, S),
              tolerance=rep.Tolerance("info"), figure="fig_shuffle", quick=ctx.quick,
              note=f"{common_note}; {where}; the SME's c_s = (n − B)/(n − 1) = "
                   f"{sde.finite_population_factor(n, b, smp):.3g} is one step's "
                   "finite-population factor, not a model of epochs"))
          row.update(predicted=pred, steps_per_epoch=epoch, left_over=n % b)
          label = {"shuffle": "drop-last", "shuffle_keep_last": "short last batch"}[smp]
          shuffle_curves[f"SGD B={b} {label}" if n % b else f"SGD B={b} (B divides n)"] = (
              ref.var(0, ddof=1).mean(-1))
          if smp == "shuffle":
            shuffle_curves[f"SDE B={b} shuffled (c_s)"] = obs["score"].var(0, ddof=1).mean(-1)
        sde_rows.append(row)
  for b in sd.reduced_batch_sizes:
    b = int(b)
    obs = sde_sweep(b, "replacement", reduced=True)
    sde_runs[b, "reduced"] = obs
    ref = sgd[lr_sde, b, "replacement"]["score"]
    ratio, lo, hi, _ = stats.variance_ratio(obs["score"][:, iv], ref[:, iv], n_boot=s.bootstrap)
    claims.append(rep.claim(
        f"{NAME}.reduced_sde_var_ratio.B{b}", f"reduced SEN system's SDE (Assumption 1: non-topic "
        f"words frozen): Var / Var_SGD of s_t at τ = {tau[iv]:g}, lr {lr_sde:g}, B {b}",
        paper=1.0, ours=rep.interval_estimate(ratio, lo, hi, S),
        tolerance=rep.Tolerance("info"), figure="fig_sde_variance", quick=ctx.quick,
        note=f"bootstrap 95% [{lo:.3f}, {hi:.3f}]; max |mean s_t − SGD mean| "
             f"{float(np.max(np.abs(obs['score'].mean(0) - ref.mean(0)))):.3g}"))
    var_curves[f"reduced SDE B={b}"] = obs["score"].var(0, ddof=1).mean(-1)
  details["sde"] = sde_rows

  # --- 4. Corollary 1 per seed; Theorem 1's drift; take-off times.
  sen_rows, drift_x, drift_y, sen_y, takeoffs = [], [], [], [], {}
  for (lr, b, sampling), o in sorted(sgd.items()):
    err = stats.sen_errors(o, tau, m, s.sen_start_tau)
    drift = stats.mean_invariant_drift(o)
    tk = stats.takeoff_times(tau, np.moveaxis(o["score"], -1, 1), s.takeoff).mean(-1)
    label = f"lr {lr:g}, B {b}" + ("" if sampling == "replacement" else
                                   " shuffled (B divides n)" if n % b == 0 else
                                   " shuffled, drop-last" if sampling == "shuffle" else
                                   " shuffled, short last batch")
    claims.append(rep.claim(
        f"{NAME}.sen_per_seed.lr_{lr:g}.B{b}.{sampling}",
        f"{label}: every SGD seed's largest Corollary-1 relative error over τ ≥ "
        f"{s.sen_start_tau:g} and the topic words is ≤ {s.tolerance.sen:g}",
        paper="Eq (10) holds", ours=rep.mean_ci(err <= s.tolerance.sen),
        tolerance=rep.Tolerance("all_true", source=SOURCES["sen"]), figure="Eq (10)",
        quick=ctx.quick,
        note=f"per-seed error mean {np.mean(err):.4f}, max {np.max(err):.4f}; GD at this lr: "
             f"{float(stats.sen_errors({k: v[None] for k, v in gd[lr].items()}, tau, m, s.sen_start_tau)[0]):.4f}"))
    excess = stats.excess_invariant_drift(o["invariant"], gd[lr]["invariant"], gd[lr]["score"])
    if sampling == "replacement":
      drift_x.append(lr / b)
      drift_y.append(float(np.mean(excess)))
      sen_y.append(float(np.mean(err)))
      claims.append(rep.claim(
          f"{NAME}.invariant_drift.lr_{lr:g}.B{b}", f"{label}: Theorem-1 drift of each seed away "
          f"from full-batch GD's, max_τ|Q_t − Q_t^GD| / score growth, mean over topic words",
          paper="0 along the flow (eq 9)", ours=rep.mean_ci(excess),
          tolerance=rep.Tolerance("info"), figure="fig_invariant", quick=ctx.quick,
          note=f"total drift max|ΔQ_t|/growth per seed {np.mean(drift):.4f} (GD alone: "
               f"{stats.mean_invariant_drift({k: v[None] for k, v in gd[lr].items()})[0]:.4f})"))
    claims.append(rep.claim(
        f"{NAME}.takeoff.lr_{lr:g}.B{b}.{sampling}", f"{label}: take-off time τ at which s_t "
        f"first reaches {s.takeoff:g} (mean over topic words), over seeds",
        paper=f"gradient flow: {gf_takeoff:.1f}", ours=rep.mean_ci(tk),
        tolerance=rep.Tolerance("info"), figure="fig_takeoff", quick=ctx.quick,
        note=f"sd over seeds {np.nanstd(tk, ddof=1):.2f}"))
    sen_rows.append({"lr": lr, "B": b, "sampling": sampling, "sen_max": float(np.max(err)),
                     "sen_mean": float(np.mean(err)), "drift_mean": float(np.mean(drift)),
                     "takeoff_mean": float(np.nanmean(tk)), "takeoff_sd": float(np.nanstd(tk))})
    if lr == lr_sde:
      takeoffs[label] = tk
  slope_drift = stats.loglog_fit(drift_x, drift_y)[0]
  slope_sen = stats.loglog_fit(drift_x, sen_y)[0]
  claims.append(rep.claim(
      f"{NAME}.invariant_drift_slope", "slope of log(mean excess Theorem-1 drift over GD) against "
      "log(lr/B)", paper="grows with lr/B", ours=rep.mean_ci([slope_drift]),
      tolerance=rep.Tolerance("info"), figure="fig_invariant", quick=ctx.quick,
      note="excess drift " + ", ".join(f"{x:.3g}: {y:.3g}" for x, y in zip(drift_x, drift_y))))
  claims.append(rep.claim(
      f"{NAME}.sen_error_slope", "slope of log(mean per-seed Corollary-1 error) against log(lr/B)",
      paper="grows with lr/B", ours=rep.mean_ci([slope_sen]), tolerance=rep.Tolerance("info"),
      figure="fig_invariant", quick=ctx.quick,
      note="errors " + ", ".join(f"{x:.3g}: {y:.3g}" for x, y in zip(drift_x, sen_y))))
  details["per_config"] = sen_rows
  details["curves"] = {  # across-seed mean and variance (mean over topic words) along τ
      **{f"SGD lr {lr:g} B {b} {smp}": stats.curve_moments(o) for (lr, b, smp), o in sgd.items()},
      **{f"SDE lr {lr_sde:g} B {b} {smp}": stats.curve_moments(o) for (b, smp), o in sde_runs.items()},
      "gradient flow": {q: np.asarray(gf[q]).reshape(len(tau), -1).mean(-1)
                        for q in ("score", "emb_norm", "loss")}}
  details["gf_takeoff"] = gf_takeoff

  # --- figures.
  figures = []
  lr0 = lr_sde
  figs.band_panels(figs.bands_of_runs(tau, sgd, sde_runs, gf, gd[lr0], lr0, batch_sizes),
                   ctx.path("fig_bands.png"),
                   title=f"lr {lr0:g}: mean ± sd over {S} seeds (same init)")
  figures.append("fig_bands.png")
  series = {f"lr {lr:g}": ([lr / b for b in batch_sizes],
                           [var[configs.index((lr, b))] for b in batch_sizes]) for lr in lrs}
  figs.scaling_figure(series, ctx.path("fig_variance_scaling.png"), fit=fit,
                      title=f"Var over seeds of $s_t$ at τ = {tau[iv]:g}")
  figures.append("fig_variance_scaling.png")
  figs.band_panels([{"title": "across-seed variance of $s_t$ (mean over topic words)",
                     "ylabel": "Var", "logy": True,
                     "refs": [],
                     "curves": [(k, tau, v[None]) for k, v in var_curves.items()]}],
                   ctx.path("fig_sde_variance.png"),
                   title=f"SGD vs its SDE, lr {lr_sde:g}, {S} seeds each")
  figures.append("fig_sde_variance.png")
  shuffled = [r for r in sde_rows if r["sampling"] != "replacement"]
  if shuffled:
    figs.shuffle_figure(
        tau, shuffle_curves,
        [(f"B {r['B']}" + ("" if not r["left_over"] else ", drop-last" if r["sampling"] == "shuffle"
                           else ", short last batch"), r["ratio"], r["ci"], r["predicted"])
         for r in shuffled], ctx.path("fig_shuffle.png"),
        title=f"shuffled epochs vs the SME, lr {lr_sde:g}, n {n}, {S} seeds each (τ = {tau[iv]:g})")
    figures.append("fig_shuffle.png")
  figs.histogram_figure(takeoffs, ctx.path("fig_takeoff.png"), refs={"gradient flow": gf_takeoff},
                        title=f"take-off time (s_t ≥ {s.takeoff:g}), lr {lr_sde:g}")
  figures.append("fig_takeoff.png")
  figs.scaling_figure({"Theorem-1 drift over GD's": (drift_x, drift_y),
                       "Corollary-1 error": (drift_x, sen_y)}, ctx.path("fig_invariant.png"),
                      ylabel="mean over seeds", title="Theorem 1 / Corollary 1 vs lr/B")
  figures.append("fig_invariant.png")
  notes.append(f"Task: M = {task_cfg.vocab_size}, n_train = {n}, m = {m}, J = "
               f"{task_cfg.n_topics}×{task_cfg.words_per_topic}; Attn-{s.classifier.upper()}; "
               f"one init (seed {s.init_seed}) shared by all {S} noise seeds, so every "
               f"interval covers the noise of the seeds only, not the spread over inits. "
               f"{var_def}, unless a row says otherwise. τ = lr·step; "
               f"SDE: Itô Euler–Maruyama dt = {sd.dt} step, {sd.brownian} Brownian motion, "
               f"exact low-rank noise (lr/√(nB))·∇Σ(ξ_i−ξ̄)l_i.")
  return Outcome(claims, figures, {"notes": notes, **details})
