"""attndyn composes with the libraries it is built on: optax transformations as optimisers,
diffrax's SaveAt / step-size controllers / adjoints in the ODEs, and ``trainable`` as a pytree
of bools (equinox's filter style) as well as group names. Float64 (conftest)."""
import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import attndyn as ad
from attndyn import dynamics
from attndyn import models


def _setup(tiny_data, steps=20, record_every=5):
  task, data = tiny_data
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=task.n_topics, embed_dim=3,
                             key_dim=2, classifier="tc", embed_std=0.3, key_std=0.1)
  params0 = models.lu.init(jax.random.PRNGKey(1), cfg, jnp.float64)
  loss = models.make_loss(models.lu.apply)
  record = lambda p, p0: {"loss": loss(p, data.train)[0]}
  train_cfg = dynamics.TrainConfig(lr=0.5, steps=steps, record_every=record_every)
  return task, data, cfg, params0, loss, record, train_cfg


def _run(loss, data, record, train_cfg, trainable, params0, **kw):
  train = dynamics.make_train(loss, data.train, record, train_cfg, trainable, **kw)
  return jax.jit(train)(params0, jax.random.PRNGKey(0))


def _assert_tree_close(a, b, tol=1e-12):
  jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol,
                                                       atol=tol), a, b)


def test_optax_transformation_or_function_of_lr_trains_as_the_name(tiny_data):
  """``optimizer=optax.sgd(0.5)``, a constant schedule, and ``lambda lr: optax.sgd(lr)``
  give the trajectory of ``optimizer="gd", lr=0.5``; a global-norm clip bounds every step
  (‖Δθ‖ ≤ lr · c); the fast path refuses a transformation with a reason."""
  _, data, cfg, params0, loss, record, train_cfg = _setup(tiny_data)
  trainable = cfg.trainable()
  ref = _run(loss, data, record, train_cfg, trainable, params0, record_params=True)
  for optimizer in (optax.sgd(0.5), optax.sgd(optax.constant_schedule(0.5)),
                    lambda lr: optax.chain(optax.identity(), optax.sgd(lr))):
    got = _run(loss, data, record, ad.dynamics.TrainConfig(
        optimizer=optimizer, lr=0.5, steps=20, record_every=5), trainable, params0)
    _assert_tree_close(got.final_params, ref.final_params)
  clip = 1e-3
  one = ad.dynamics.TrainConfig(optimizer=lambda lr: optax.chain(
      optax.clip_by_global_norm(clip), optax.sgd(lr)), lr=0.5, steps=5, record_every=1)
  traj = _run(loss, data, record, one, trainable, params0, record_params=True)
  flat = jnp.concatenate([x.reshape(x.shape[0], -1) for x in jax.tree.leaves(traj.params)], 1)
  steps = np.linalg.norm(np.diff(np.asarray(flat), axis=0), axis=1)
  assert np.all(steps <= 0.5 * clip * (1 + 1e-9)) and steps.min() > 0, steps
  check = ad.dynamics.fast_path_applies(cfg, ad.dynamics.TrainConfig(optimizer=optax.sgd(0.5)))
  assert not check and "optax.GradientTransformation" in check.reason
  train = dynamics.make_train(loss, data.train, record, ad.dynamics.TrainConfig(
      optimizer=optax.sgd(0.5)), trainable)
  with pytest.raises(ad.ConfigError, match="lr = 0.1 is not allowed: unset when"):
    train(params0, jax.random.PRNGKey(0), lr=0.1)


def test_trainable_as_names_and_as_a_pytree_of_bools(tiny_data):
  """A list of the groups that train equals the dict of flags; a bool mask of embedding
  rows (equinox's filter style) keeps those rows exactly where they start, in GD and in the
  gradient flow, and GD equals the hand-written ``stop_gradient`` of those rows."""
  task, data, cfg, params0, loss, record, train_cfg = _setup(tiny_data)
  flags = cfg.trainable()
  names = [g for g, f in flags.items() if f]
  _assert_tree_close(_run(loss, data, record, train_cfg, names, params0).final_params,
                     _run(loss, data, record, train_cfg, flags, params0).final_params, 0)
  rows = (jnp.arange(task.n_words) < task.n_topic_words)[:, None]      # topic rows train
  mask = {**{g: bool(f) for g, f in flags.items()}, "embeddings": rows}
  got = _run(loss, data, record, train_cfg, mask, params0)
  frozen = ~np.asarray(rows[:, 0])
  np.testing.assert_array_equal(np.asarray(got.final_params["embeddings"])[frozen],
                                np.asarray(params0["embeddings"])[frozen])

  def held(p, b):
    e = p["embeddings"]
    return loss(dict(p, embeddings=jnp.where(rows, e, jax.lax.stop_gradient(e))), b)

  ref = _run(held, data, record, train_cfg, flags, params0)
  _assert_tree_close(got.final_params, ref.final_params)
  flow = dynamics.gradient_flow(loss, params0, data.train, record, lr=0.5,
                                ts=jnp.linspace(0, 20, 5), trainable=mask)
  assert float(flow.failed_at) == -1
  np.testing.assert_array_equal(np.asarray(flow.final_params["embeddings"])[frozen],
                                np.asarray(params0["embeddings"])[frozen])
  assert np.abs(np.asarray(flow.final_params["embeddings"])[~frozen]
                - np.asarray(params0["embeddings"])[~frozen]).max() > 1e-3


def test_ode_takes_diffrax_saveat_controller_and_adjoint(tiny_data):
  """``saveat=diffrax.SaveAt(ts=...)`` records as ``ts`` does; Euler with
  ``diffrax.ConstantStepSize()`` and ``dt0=1`` (time in steps) is gradient descent itself, so
  the flow then equals ``make_train`` to rounding; the derivative of the final loss in ``lr``
  is the same through ``DirectAdjoint`` as through the default adjoint (the same discrete
  solve differentiated); the reduced ODE takes them too (SaveAt and a PID controller of the default
  tolerances give the default solve)."""
  task, data, cfg, params0, loss, record, train_cfg = _setup(tiny_data)
  trainable = cfg.trainable()
  ts = train_cfg.record_steps().astype(jnp.float64)
  flow = lambda **kw: dynamics.gradient_flow(loss, params0, data.train, record, lr=0.5,
                                             trainable=trainable, **kw)
  a = flow(ts=ts)
  b = flow(saveat=diffrax.SaveAt(ts=ts))
  _assert_tree_close(a.observables, b.observables, 0)
  np.testing.assert_array_equal(a.t, b.t)
  euler = flow(ts=ts, solver=diffrax.Euler(), stepsize_controller=diffrax.ConstantStepSize(),
               dt0=1.0)
  gd = _run(loss, data, record, train_cfg, trainable, params0)
  _assert_tree_close(euler.observables, gd.observables, 1e-10)
  _assert_tree_close(euler.final_params, gd.final_params, 1e-10)

  def final_loss(lr, adjoint):
    traj = dynamics.gradient_flow(loss, params0, data.train, record, lr=lr, ts=ts,
                                  trainable=trainable, solver=diffrax.Euler(), dt0=1.0,
                                  stepsize_controller=diffrax.ConstantStepSize(),
                                  adjoint=adjoint)
    return traj.observables["loss"][-1]

  direct = jax.grad(final_loss)(0.5, diffrax.DirectAdjoint())
  default = jax.grad(final_loss)(0.5, None)
  assert abs(float(direct)) > 1e-3 and np.isclose(direct, default, rtol=1e-10, atol=0)
  n_topic = task.n_topic_words
  red = lambda **kw: dynamics.reduced_sen_ode(params0, data.train, data.train_topic_word,
                                              np.arange(n_topic), record, lr=0.5,
                                              trainable=trainable, **kw)
  pid = red(saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9))
  _assert_tree_close(red(ts=ts).observables, pid.observables, 0)
  with pytest.raises(ad.ConfigError, match="stepsize_controller = 'PIDController' is not "
                                           "allowed: without rtol"):
    red(ts=ts, rtol=1e-8, stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9))
  with pytest.raises(ad.ConfigError, match="adjoint = 'str' is not allowed"):
    flow(ts=ts, adjoint="backsolve")
