"""Lemma 2's reduced SEN ODE for a whole sweep of seeds as one diffrax solve.

The seeds of a sweep that share one dataset are independent copies of the
reduced system of :mod:`dynamics.reduced_ode`, so they can be stepped as a
single ODE whose state carries a leading seed axis ``S``:

.. math:: \\frac{d y^{(i)}}{dt} = f(y^{(i)};\\, θ_0^{(i)}, \\mathrm{lr}^{(i)}), \\qquad i = 1..S

with ``f`` the velocity of eqs (5)-(8) (:func:`dynamics.reduced_ode.reduced_velocity`,
vmapped over seeds). One adaptive step size is shared by all seeds. The error
norm the PID controller sees is the *largest per-seed RMS*
(:func:`seed_max_rms_norm`), so every accepted step meets ``rtol``/``atol`` for
every seed, as it would solved alone, while the solver's control flow stays
scalar. The step sequence is shared, so a seed's result depends, within the
tolerance, on which seeds share its solve.

Against ``vmap`` of :func:`dynamics.reduced_sen_ode` this trades steps for
program size: the shared step follows the most demanding seed at each time, so
it takes more steps than the slowest seed alone, but a vmapped ``diffeqsolve``
turns every scalar of the step-size logic into a per-seed select and is slower
to trace and compile; for a smooth field (FC/TC) the shared solve is the faster
from cold on narrow chunks (``benchmarks.run``'s reduced-ODE timing measures both). Its
steps grow with the seeds, each of which is demanding at its own times, so wide chunks are
the vmap's (:data:`dynamics.strategy.SHARED_SOLVE_MAX_POINTS`; ``benchmarks.ode_width``
counts both).

A discontinuous field is the exception: TL's ReLU kinks shorten each seed's
steps at its own times, and the shared step takes them all, many times the steps
of any one seed, so ``attndyn run`` solves TL's seeds separately.

A seed whose error is not finite (a diverged run) is left out of the norm, so
it cannot stall the others: its observables turn non-finite and its own
``failed_at`` reports it, as under ``vmap``. A solve that fails as a whole
(step budget spent) marks every seed.

References:
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021.
  https://arxiv.org/abs/2011.10036
"""
import functools
from typing import Callable, Mapping, Optional

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from attndyn.dynamics.ode import (check_adjoint, controller_for, failure_time, make_solver, ode_stats,
                          stopped_lr)
from attndyn.dynamics.reduced_ode import (Collective, NonTopic, ReducedState, check_solve_inputs,
                                  full_params, nontopic_constants, seed_velocity)
from attndyn.dynamics.fast_lu.step import WordRows
from attndyn.dynamics.fast_lu.xla_cpu import _weighted_row_sum
from attndyn.dynamics.trajectory import Trajectory, checked_record
from attndyn.models.lu import word_scores
from attndyn.tasks.batch import Batch

__all__ = ["seed_max_rms_norm", "reduced_sen_ode_sweep"]

# The constants shared by every seed (they depend on the data only) and those per seed.
_CONSTANT_AXES = NonTopic(member=None, log_z=0, nubar=0, labels=None, count=None,
                          mean_nubar=0, mean_inv_z=0)
_EXTENDED_CONSTANT_AXES = _CONSTANT_AXES._replace(
    collective=Collective(share=0, group_share=0, word_share=0))


def seed_max_rms_norm(tree) -> jax.Array:
  """``max_i RMS(tree^{(i)})`` over the leading seed axis, non-finite seeds left out.

  The error norm for a system of independent seeds stepped together: a step is
  accepted only if it is acceptable for every seed on its own.
  """
  leaves = [jnp.reshape(x, (x.shape[0], -1)) for x in jax.tree.leaves(tree)]
  square = sum(jnp.sum(jnp.abs(x) ** 2, axis=1) for x in leaves)
  per_seed = jnp.sqrt(square / sum(x.shape[1] for x in leaves))
  return jnp.max(jnp.where(jnp.isfinite(per_seed), per_seed, 0.0))


def reduced_sen_ode_sweep(params0: dict, batch: Batch, topic_word: jax.Array,
                          topic_words: jax.Array, record: Callable, *, lr, ts=None,
                          trainable: Mapping[str, bool], form: str = "lemma2", solver="tsit5",
                          rtol: Optional[float] = None, atol: Optional[float] = None,
                          max_steps: int = 100_000, dt0: Optional[float] = None,
                          dtmin: Optional[float] = None, t_end=None, extended: bool = False,
                          saveat: Optional[diffrax.SaveAt] = None,
                          stepsize_controller: Optional[diffrax.AbstractStepSizeController] = None,
                          adjoint: Optional[diffrax.AbstractAdjoint] = None) -> Trajectory:
  """:func:`dynamics.reduced_sen_ode` for ``S`` seeds sharing one dataset, solved together.

  Args:
    params0: initial parameters with a leading seed axis ``S`` on every leaf.
    batch: training sentences ``[n, L]``, shared by all seeds.
    topic_word: ``[n]`` vocabulary id of each sentence's topic word.
    topic_words: ``[T]`` vocabulary ids of the topic words, concrete (NumPy or a jnp
      array made outside ``jax.jit``; a traced array is refused).
    record: ``record(params, params0) -> pytree`` of one seed's full parameters.
    lr: learning rate, a scalar or ``[S]``.
    ts: ``[K]`` increasing recorded times in steps.
    trainable, form, solver, rtol, atol, max_steps, dt0, dtmin, saveat,
      stepsize_controller, adjoint: as for
      :func:`dynamics.reduced_sen_ode`; the tolerances hold for every seed.
    t_end: ``None``, a scalar or ``[S]``: as for :func:`dynamics.reduced_sen_ode`, per seed
      (a stopped seed's zero velocity costs the shared step nothing).
    extended: the extended reduced dynamics, as for :func:`dynamics.reduced_sen_ode`.

  Returns:
    A :class:`Trajectory` with a leading ``S`` axis, as ``vmap`` of
    :func:`dynamics.reduced_sen_ode` returns: ``t [S, K]``, observables
    ``[S, K, ...]``, ``final_params``, ``failed_at [S]``, ``params=None``, ``ode``
    (:class:`dynamics.trajectory.ODEStats`, each ``[S]``: the step counts and diffrax's
    result are the one shared solve's; the reason is per seed).

  Raises:
    ConfigError: as :func:`dynamics.reduced_sen_ode`.
  """
  seeds_last = getattr(record, "seeds_last", None)
  record = checked_record(record)
  ts, t0, t1, topic_words, trainable = check_solve_inputs(
      form, trainable, ts, batch, topic_word, topic_words, saveat=saveat, params0=params0)
  controller = controller_for(stepsize_controller, rtol=rtol, atol=atol, dtmin=dtmin, dt0=dt0,
                              norm=seed_max_rms_norm, t_end=t_end)
  seeds = jax.tree.leaves(params0)[0].shape[0]
  lr = jnp.broadcast_to(jnp.asarray(lr, ts.dtype), (seeds,))
  consts = jax.vmap(functools.partial(nontopic_constants, extended=extended),
                    (0, None, None, None))(params0, batch, topic_word, topic_words)
  consts = consts._replace(member=consts.member[0], labels=consts.labels[0],
                           count=consts.count[0])
  nu0 = params0["embeddings"][:, topic_words]
  state0 = ReducedState(
      nu=nu0, s=jax.vmap(word_scores)(params0)[:, topic_words],
      classifier=params0["classifier"] if trainable["classifier"] else None,
      push=jnp.zeros_like(nu0) if extended else None)
  axes = _EXTENDED_CONSTANT_AXES if extended else _CONSTANT_AXES

  one_seed = functools.partial(seed_velocity, form=form, trainable=trainable)

  def vector_field(t, y, args):
    consts_, params0_, lr_ = args
    return jax.vmap(one_seed, (0, axes, 0, 0))(y, consts_, params0_,
                                                         stopped_lr(lr_, t, t_end))

  # Saved at ts only (ts[-1] is t1); observables are computed afterwards, per seed.
  sol = diffrax.diffeqsolve(
      diffrax.ODETerm(vector_field), make_solver(solver), t0, t1, dt0, state0,
      args=(consts, params0, lr), saveat=diffrax.SaveAt(ts=ts), stepsize_controller=controller,
      adjoint=check_adjoint(adjoint), max_steps=max_steps, throw=False)

  word_share = consts.collective.word_share if extended else None
  if seeds_last is None:
    observables = jax.vmap(  # per seed: states [K, ...]
        lambda states, p0, share: jax.lax.map(
            lambda y: record(full_params(y, p0, topic_words, share), p0), states),
        (1, 0, 0 if extended else None))(sol.ys, params0, word_share)
  else:
    observables = _records_seeds_last(seeds_last, sol.ys, params0, topic_words, word_share)

  def trajectory(observables, states, p0, word_share):  # one seed: states [K, ...]
    final = full_params(jax.tree.map(lambda x: x[-1], states), p0, topic_words, word_share)
    return Trajectory(t=ts, observables=observables, final_params=final,
                      failed_at=failure_time(ts, observables, sol.result), params=None,
                      ode=ode_stats(sol, ts, observables))

  return jax.vmap(trajectory, (0, 1, 0, 0 if extended else None))(
      observables, sol.ys, params0, word_share)


def _records_seeds_last(seeds_last, ys, params0, topic_words, word_share):
  """``record.seeds_last`` (:func:`analysis.topic_observables`) at every saved state, all
  seeds at once: ``[S, K, ...]`` from ``ys`` (leaves ``[K, S, ...]``).

  The rows are :func:`full_params`' (the topic words' embeddings and scores from the state,
  the others' moved by the extended dynamics' push), laid out as the fast path's
  :class:`dynamics.fast_lu.WordRows` with the seed axis last; the record then reads every
  seed's sentences at once instead of gathering each seed's ``[n, L, d]`` embeddings twice a
  saved time.
  """
  last = lambda x: jnp.moveaxis(x, 0, -1)
  emb0 = last(params0["embeddings"])                                       # [V, d, S]
  rows0 = WordRows(np.arange(emb0.shape[0]), emb0, last(jax.vmap(word_scores)(params0)),
                   jnp.linalg.norm(params0["query"], axis=-1),
                   jax.tree.map(last, params0["classifier"]),
                   functools.partial(_weighted_row_sum, jnp.asarray(True)))

  def at(k, y):                                                            # y leaves [S, ...]
    emb = rows0.embeddings
    if y.push is not None:                                                 # Δν_w = Σ_t C_wt E_t
      emb = emb + jnp.einsum("svt,std->vds", word_share, y.push).astype(emb.dtype)
    emb = emb.at[topic_words].set(jnp.moveaxis(y.nu, 0, -1).astype(emb.dtype))
    cls = rows0.classifier if y.classifier is None else jax.tree.map(last, y.classifier)
    scores = rows0.scores.at[topic_words].set(y.s.T.astype(rows0.scores.dtype))
    rows = rows0._replace(embeddings=emb, scores=scores,
                          classifier=cls,
                          weighted_sum=functools.partial(_weighted_row_sum, k >= 0))
    return seeds_last(rows, rows0)

  n_saved = jax.tree.leaves(ys)[0].shape[0]
  out = jax.lax.map(lambda a: at(*a), (jnp.arange(n_saved), ys))          # [K, S, ...]
  return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), out)
