"""Minibatch SGD as a stochastic process: the stochastic modified equation (SME), solved by diffrax.

Time is in optimiser steps, as for every :class:`dynamics.Trajectory`: the
gradient flow is ``dθ/dt = -lr ∇L(θ)`` and GD step ``k`` is time ``t = k``. One
SGD step on a minibatch ``b`` of ``B`` samples is

.. math:: θ_{k+1} = θ_k - \\mathrm{lr}\\, g_b(θ_k), \\qquad
   g_b = \\frac1B \\sum_{i∈b} g_i, \\quad \\mathbb E[g_b] = ∇L, \\quad
   \\mathrm{Cov}[g_b] = \\frac{c_s}{B} Σ(θ),

with ``g_i = ∇l_i`` the per-sample gradients of the ``n`` training samples,
``Σ = (1/n) Σ_i (g_i - ḡ)(g_i - ḡ)ᵀ`` their covariance and ``c_s = 1`` for
sampling with replacement, ``c_s = (n - B)/(n - 1)`` (the finite-population
factor of one step) for sampling without replacement. Matching the first two
moments of one step gives the Itô SDE in step time (Li, Tai & E 2017, the
first-order stochastic modified equation)

.. math:: dθ = -\\mathrm{lr}\\, ∇L(θ)\\, dt + \\mathrm{lr} \\sqrt{c_s Σ(θ) / B}\\; dW_t ,
   \\qquad W_t ∈ \\mathbb R^P,

i.e. a per-step noise covariance ``lr² c_s Σ / B``. In gradient-flow time
``τ = lr·t`` the same process reads ``dθ = -∇L dτ + \\sqrt{lr\\, c_s Σ/B}\\, dW_τ``,
so at a fixed point ``τ`` of the flow the noise variance grows with ``lr/B``.

**Low-rank exact form.** No ``P × P`` matrix is ever formed. With
``G ∈ R^{n×P}`` the per-sample gradients, ``Σ = (1/n)(G - 1ḡᵀ)ᵀ(G - 1ḡᵀ)``, so
``\\sqrt{Σ} dW_P`` has the law of ``n^{-1/2} (G - 1ḡᵀ)ᵀ dW_n`` with an
``n``-dimensional Brownian motion ``W_n`` (rank ≤ n - 1). The diffusion term is

.. math:: \\frac{\\mathrm{lr}\\sqrt{c_s}}{\\sqrt{nB}} (G - 1ḡᵀ)^T ξ
   = \\frac{\\mathrm{lr}\\sqrt{c_s}}{\\sqrt{nB}} ∇_θ \\sum_i (ξ_i - \\bar ξ)\\, l_i(θ),

one vector–Jacobian product of the per-sample losses with the centred Brownian
increment as cotangent: exactly the same cost as a full-batch gradient, no
per-sample gradients stored (:func:`sgd_sde`, the full model). The reduced SEN
system (:func:`reduced_sgd_sde`) has a tiny state, so there the per-sample
velocities ``V ∈ R^{n × P}`` are formed explicitly and the term is
``(n B)^{-1/2} \\sqrt{c_s} (V - 1\\bar vᵀ)ᵀ ξ`` with ``v_i = -lr P g_i``
(``P`` the ``‖q‖²`` metric on scores, as in eq 6).

**Solvers.** The noise is multiplicative and non-commutative, so the default
is Itô Euler–Maruyama (:class:`diffrax.Euler`: strong order 1/2, weak order
1) on a fixed step ``dt`` (in optimiser steps). A Stratonovich solver (Heun,
midpoint, SRK methods such as SPaRK) would converge to the Stratonovich
solution, which differs from the Itô SME by a drift of order ``lr²/B``; it is
not offered. The Brownian motion is a :class:`diffrax.VirtualBrownianTree`
(tolerance ``dt/8``; deterministic in its key, any step sequence) or, for
fixed steps only, :class:`diffrax.UnsafeBrownianPath` (exact ``N(0, dt)``
increments, cheaper). Every solve is pure: vmap it over Brownian keys with the
same ``params0`` so that the spread of the trajectories is the noise alone.

Validity: the SME is a weak approximation of order 1 in ``lr`` of SGD with
replacement (Li, Tai & E derive it for independent minibatches); it ignores
the higher cumulants of the minibatch gradient and the ``O(lr²)``
modified-drift terms. For shuffled epochs ``c_s`` corrects one step's
covariance only: the SME still treats the steps of an epoch as independent,
whereas at fixed θ their noises cancel over an epoch except for the samples
left over at its end (dropped, or a final short batch), so it overstates the
epoch-scale variance, by the factor that
:func:`analysis.sgd_noise.epoch_boundary_ratio` gives to first order
(docs/sgd_sde.md).

References:
  Li, Tai & E, "Stochastic Modified Equations and Adaptive Stochastic Gradient
  Algorithms", ICML 2017. https://arxiv.org/abs/1511.06251
  Lu, Mao & Nayak, "On the Dynamics of Training Attention Models", ICLR 2021,
  Lemma 2 (the reduced system). https://arxiv.org/abs/2011.10036
"""
import math
from typing import Callable, Mapping

import diffrax
import jax
import jax.numpy as jnp
import lineax

from attndyn.dynamics.ode import failure_time, split_trainable, time_grid, _merge
from attndyn.dynamics.reduced_ode import (NonTopic, ReducedState, check_reduced_config, nontopic_constants,
                                  reduced_trajectory, reduced_velocity, save_at)
from attndyn.dynamics.train import SAMPLING
from attndyn.dynamics.trajectory import Trajectory
from attndyn.models.lu import word_scores
from attndyn.tasks.batch import Batch
from attndyn.tasks.errors import check

__all__ = ["BROWNIAN", "finite_population_factor", "noise_coefficient", "centred_operator",
           "brownian_motion", "ClockAndBrownian", "sme_field", "sgd_sde",
           "per_sample_reduced_velocities", "reduced_sgd_sde", "per_sample_cross_entropy"]

BROWNIAN = ("virtual", "unsafe")


def finite_population_factor(n: int, batch_size: int, sampling: str) -> float:
  """``c_s``: one minibatch mean's covariance is ``c_s Σ / B``.

  Args:
    n: number of training samples.
    batch_size: ``B``.
    sampling: ``"replacement"`` (``c_s = 1``) or ``"shuffle"`` /
      ``"shuffle_keep_last"`` (without replacement: ``c_s = (n - B)/(n - 1)``,
      the covariance of one step of ``B``; the SME has no epochs, so the two
      shuffled samplings give the same SME).
  """
  check(sampling in SAMPLING, "sampling", sampling, f"one of {', '.join(SAMPLING)}")
  check(isinstance(batch_size, int) and 1 <= batch_size <= n, "batch_size", batch_size,
        f"an integer in 1..n = {n}")
  if sampling == "replacement":
    return 1.0
  return (n - batch_size) / (n - 1) if n > 1 else 0.0


def noise_coefficient(n: int, batch_size: int, sampling: str) -> float:
  """``sqrt(c_s / (n B))``: the factor in front of ``(V - 1v̄ᵀ)ᵀ dW_n`` (``V`` includes lr)."""
  return math.sqrt(finite_population_factor(n, batch_size, sampling) / (n * batch_size))


def centred_operator(weighted: Callable, n: int, dtype) -> lineax.FunctionLinearOperator:
  """The linear map ``ξ ↦ weighted(ξ - mean(ξ))`` on ``R^n`` as a lineax operator.

  Args:
    weighted: linear in its ``[n]`` argument, returns a pytree shaped like the state.
    n: Brownian dimension (number of training samples).
    dtype: dtype of ``ξ``.
  """
  return lineax.FunctionLinearOperator(lambda xi: weighted(xi - jnp.mean(xi)),
                                       jax.ShapeDtypeStruct((n,), dtype))


def brownian_motion(t0, t1, n: int, key: jax.Array, dt: float, kind: str = "virtual", dtype=None):
  """An ``n``-dimensional Brownian motion on ``[t0, t1]`` for the diffusion term.

  Args:
    t0, t1: time interval (steps).
    n: dimension.
    key: PRNG key (the noise seed).
    dt: the solver step; the virtual tree resolves ``dt/8``.
    kind: ``"virtual"`` (:class:`diffrax.VirtualBrownianTree`) or ``"unsafe"``
      (:class:`diffrax.UnsafeBrownianPath`, fixed steps only).
    dtype: dtype of the increments (default: the default float).
  """
  check(kind in BROWNIAN, "brownian", kind, f"one of {', '.join(BROWNIAN)}")
  dtype = jax.dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype
  shape = jax.ShapeDtypeStruct((n,), dtype)
  if kind == "unsafe":
    return diffrax.UnsafeBrownianPath(shape=shape, key=key)
  return diffrax.VirtualBrownianTree(t0, t1, tol=dt / 8, shape=shape, key=key)


def _check_common(dt, batch_size, n, sampling):
  check(isinstance(dt, (int, float)) and dt > 0, "dt", dt, "a positive number of steps")
  finite_population_factor(n, batch_size, sampling)


def _solve(drift, diffusion, y0, args, ts, key, *, n, dt, brownian, saveat):
  path = brownian_motion(ts[0], ts[-1], n, key, dt, brownian, ts.dtype)
  if drift is None:   # ``diffusion`` takes the control (dt, dW) and carries the drift too
    terms = diffrax.ControlTerm(diffusion, ClockAndBrownian(ts[0], ts[-1], path))
  else:
    terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, path))
  try:
    steps = int(math.ceil(float(ts[-1] - ts[0]) / dt)) + 2
  except jax.errors.ConcretizationTypeError:   # traced times: a generous bound
    steps = 1 << 20
  return diffrax.diffeqsolve(terms, diffrax.Euler(), ts[0], ts[-1], dt, y0, args=args,
                             saveat=saveat, stepsize_controller=diffrax.ConstantStepSize(),
                             max_steps=steps, throw=False,
                             adjoint=diffrax.ForwardMode() if brownian == "unsafe"
                             else diffrax.RecursiveCheckpointAdjoint())


class ClockAndBrownian(diffrax.AbstractPath):
  """The control ``(t, W_t)``: its increment over ``[t0, t1]`` is ``(t1 - t0, W_{t1} - W_{t0})``.

  Lets one :class:`diffrax.ControlTerm` carry drift and diffusion together, so
  that a full-model Euler–Maruyama step costs a single vector–Jacobian product
  (:func:`sgd_sde`).
  """
  t0: float
  t1: float
  brownian: diffrax.AbstractBrownianPath

  def evaluate(self, t0, t1=None, left: bool = True):
    if t1 is None:
      return (jnp.asarray(t0), self.brownian.evaluate(t0, None, left))
    return (jnp.asarray(t1 - t0), self.brownian.evaluate(t0, t1, left))


def sme_field(losses: Callable, n: int, coef: float, dtype) -> Callable:
  r"""The full model's SME as one control term: ``field(t, y, args)`` → operator on ``(h, ξ)``.

  .. math:: (h, ξ) \mapsto -\mathrm{lr}\, ∇L(y)\, h + \mathrm{lr}\cdot\mathrm{coef}\,
     ∇_y \sum_i (ξ_i - \bar ξ)\, l_i(y) = ∇_y \sum_i w_i l_i(y)

  with ``w = lr(-h/n + coef (ξ - ξ̄))``: one vector–Jacobian product per step.
  Driven by :class:`ClockAndBrownian` increments ``(dt, dW)`` it is the
  Euler–Maruyama step of the module docstring's SDE.

  Args:
    losses: ``losses(y, fixed, batch) -> [n]`` per-sample losses of the moving
      parameters ``y``.
    n: number of samples.
    coef: :func:`noise_coefficient`.
    dtype: dtype of the control.

  Returns:
    ``field(t, y, args)`` with ``args = (lr, fixed, batch, ...)``, returning a
    :class:`lineax.FunctionLinearOperator`.
  """
  def field(t, y, args):
    del t
    lr_, fixed_, batch_ = args[:3]
    out, vjp = jax.vjp(lambda m: losses(m, fixed_, batch_), y)

    def mv(control):
      h, xi = control
      w = lr_ * (-h / n + coef * (xi - jnp.mean(xi)))
      g, = vjp(w.astype(out.dtype))
      return jax.tree.map(lambda x, g_: g_.astype(x.dtype), y, g)
    return lineax.FunctionLinearOperator(
        mv, (jax.ShapeDtypeStruct((), dtype), jax.ShapeDtypeStruct((n,), dtype)))
  return field


def sgd_sde(per_sample_loss: Callable, params0, batch: Batch, record: Callable, *, lr,
            batch_size: int, ts, trainable: Mapping[str, bool], key: jax.Array,
            sampling: str = "replacement", dt: float = 0.5,
            brownian: str = "virtual") -> Trajectory:
  """Solve the SME of minibatch SGD on the full model (module docstring) and record observables.

  .. math:: dθ = -\\mathrm{lr} ∇L(θ) dt + \\frac{\\mathrm{lr}\\sqrt{c_s}}{\\sqrt{nB}}
     ∇_θ \\sum_i (dW_i - \\overline{dW})\\, l_i(θ)

  in step time (per-step noise covariance ``lr² c_s Σ(θ)/B``), with frozen
  groups held fixed, by Itô Euler–Maruyama with step ``dt``.

  Args:
    per_sample_loss: ``per_sample_loss(params, batch) -> [n]`` losses whose
      mean is the training loss ``L``.
    params0: initial parameters (a dict of top-level groups), shared by all
      noise seeds when vmapped over ``key``.
    batch: the full training set (``n`` samples).
    record: ``record(params, params0) -> pytree`` of observables at ``ts``.
    lr: learning rate (float or traced).
    batch_size: ``B`` of the SGD being modelled (static).
    ts: ``[K]`` recorded times in steps; ``ts[0]`` is the start.
    trainable: group -> trains.
    key: the Brownian motion's key.
    sampling: ``"replacement"`` or ``"shuffle"`` (sets ``c_s``).
    dt: Euler–Maruyama step in optimiser steps.
    brownian: ``"virtual"`` or ``"unsafe"`` (:func:`brownian_motion`).

  Returns:
    A :class:`Trajectory` (``t = ts``, observables, ``final_params``,
    ``failed_at``).
  """
  ts = time_grid(ts)
  n = batch.tokens.shape[0]
  _check_common(dt, batch_size, n, sampling)
  coef = noise_coefficient(n, batch_size, sampling)
  moving0, fixed = split_trainable(params0, trainable)
  order = tuple(params0)

  def losses(moving, fixed_, batch_):
    return per_sample_loss(_merge(moving, fixed_, order), batch_)

  field = sme_field(losses, n, coef, ts.dtype)

  def observe(t, y, args):
    _, fixed_, _, params0_ = args
    return record(_merge(y, fixed_, order), params0_)

  saveat = diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts, fn=observe), diffrax.SubSaveAt(t1=True)])
  sol = _solve(None, field, moving0, (lr, fixed, batch, params0), ts, key, n=n, dt=dt,
               brownian=brownian, saveat=saveat)
  observables, final = sol.ys
  return Trajectory(t=ts, observables=observables,
                    final_params=_merge(jax.tree.map(lambda x: x[-1], final), fixed, order),
                    failed_at=failure_time(ts, observables, sol.result), params=None)


def per_sample_reduced_velocities(state: ReducedState, c: NonTopic, classifier0: dict, lr, q_sq,
                                  *, trainable: Mapping[str, bool]) -> ReducedState:
  """``v_i``: the reduced velocity (eqs 5-6) of each training sentence's own loss.

  ``mean_i v_i`` is :func:`dynamics.reduced_ode.reduced_velocity` with
  ``form="exact"``; an SGD step of the reduced model on minibatch ``b`` is
  ``mean_{i∈b} v_i``.

  Returns:
    A :class:`ReducedState` whose leaves carry a leading axis ``n``.
  """
  def one(member, log_z, nubar, label):
    ci = c._replace(member=member[None], log_z=log_z[None], nubar=nubar[:, None],
                    labels=label[None])
    return reduced_velocity(state, ci, classifier0, lr, q_sq, form="exact", trainable=trainable)
  return jax.vmap(one, in_axes=(0, 0, 1, 0))(c.member, c.log_z, c.nubar, c.labels)


def reduced_sgd_sde(params0: dict, batch: Batch, topic_word: jax.Array, topic_words: jax.Array,
                    record: Callable, *, lr, batch_size: int, ts, trainable: Mapping[str, bool],
                    key: jax.Array, sampling: str = "replacement", form: str = "exact",
                    dt: float = 0.5, brownian: str = "virtual") -> Trajectory:
  """The SME of SGD on the reduced SEN system of Lemma 2 (topic words only, Assumption 1).

  .. math:: dy = f(y)\\, dt + \\sqrt{\\frac{c_s}{nB}} (V(y) - 1\\bar v(y)^T)^T dW_n

  with ``y = (ν_t, s_t, classifier)``, ``f`` the reduced velocity of ``form``
  (``"exact"``: eqs 5-6, whose mean of per-sample velocities it is;
  ``"lemma2"``: eqs 7-8) and ``V`` the ``[n, P]`` per-sample velocities
  (:func:`per_sample_reduced_velocities`, which include ``lr`` and the ``‖q‖²``
  metric on scores). Time in steps; Itô Euler–Maruyama with step ``dt``.

  Args:
    params0, batch, topic_word, topic_words, record, trainable, form: as
      :func:`dynamics.reduced_ode.reduced_sen_ode`.
    lr: learning rate (float or traced).
    batch_size, sampling, key, dt, brownian: as :func:`sgd_sde`.

  Returns:
    A :class:`Trajectory` with observables of the reconstructed full parameters.
  """
  check_reduced_config(form, trainable)
  ts = time_grid(ts)
  n = batch.tokens.shape[0]
  _check_common(dt, batch_size, n, sampling)
  coef = noise_coefficient(n, batch_size, sampling)
  topic_words = jnp.asarray(topic_words)
  consts = nontopic_constants(params0, batch, topic_word, topic_words)
  state0 = ReducedState(nu=params0["embeddings"][topic_words], s=word_scores(params0)[topic_words],
                        classifier=params0["classifier"] if trainable["classifier"] else None)

  def drift(t, y, args):
    lr_, c, p0 = args
    q = p0["query"]
    v = reduced_velocity(y, c, p0["classifier"], lr_, jnp.dot(q, q), form=form,
                         trainable=trainable)
    return jax.tree.map(lambda a, x: a.astype(x.dtype), v, y)

  def diffusion(t, y, args):
    lr_, c, p0 = args
    q = p0["query"]
    per = per_sample_reduced_velocities(y, c, p0["classifier"], lr_, jnp.dot(q, q),
                                        trainable=trainable)

    def weighted(w):
      return jax.tree.map(lambda v, x: (coef * jnp.tensordot(w.astype(v.dtype), v, axes=1)
                                        ).astype(x.dtype), per, y)
    return centred_operator(weighted, n, ts.dtype)

  sol = _solve(drift, diffusion, state0, (lr, consts, params0), ts, key, n=n, dt=dt,
               brownian=brownian, saveat=save_at(ts))
  return reduced_trajectory(sol, ts, params0, topic_words, record)


def per_sample_cross_entropy(apply_fn: Callable) -> Callable:
  """``losses(params, batch) -> [n]`` cross-entropies of a model whose ``apply`` gives ``.logits``."""
  import optax

  def losses(params, batch: Batch):
    logits = apply_fn(params, batch).logits
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch.labels)
  return losses
