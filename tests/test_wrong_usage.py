"""Each wrong use of the Python API gets one line at the boundary naming what was wrong and
what is allowed (a ConfigError, a ValueError), never a deep error from JAX or optax."""
import jax
import jax.numpy as jnp
import pytest

import attndyn as ad
from attndyn import dynamics
from attndyn import models
from attndyn import tasks


@pytest.fixture(scope="module")
def setup():
  task = tasks.TopicTaskConfig(n_topics=2, words_per_topic=2, vocab_size=20, n_nontopic=3,
                               n_train=24, n_test=8)
  data = tasks.make_topic_dataset(jax.random.PRNGKey(0), task)
  cfg = models.LuModelConfig(n_words=task.n_words, n_classes=2, embed_dim=3, key_dim=2)
  loss = models.make_loss(models.lu.apply)
  record = lambda p, p0: {"loss": loss(p, data.train)[0]}
  train_cfg = dynamics.TrainConfig(lr=0.5, steps=4, record_every=2)
  return task, data, cfg, loss, record, train_cfg


def _one_line(excinfo) -> str:
  text = str(excinfo.value)
  assert isinstance(excinfo.value, ad.ConfigError) and "\n" not in text, text
  return text


def test_train_with_params_and_key_swapped(setup):
  _, data, cfg, loss, record, train_cfg = setup
  train = dynamics.make_train(loss, data.train, record, train_cfg, cfg.trainable())
  key, params0 = jax.random.PRNGKey(0), models.lu.init(jax.random.PRNGKey(1), cfg)
  with pytest.raises(ad.ConfigError) as e:
    train(key, params0)
  assert "the arguments are swapped; call train(params0, key)" in _one_line(e)


def test_make_train_arguments_in_the_wrong_order(setup):
  _, data, cfg, loss, record, train_cfg = setup
  with pytest.raises(ad.ConfigError) as e:
    dynamics.make_train(data.train, loss, record, train_cfg, cfg.trainable())
  assert _one_line(e).startswith("loss_fn = 'a Batch' is not allowed: a function")
  with pytest.raises(ad.ConfigError) as e:
    dynamics.make_auto_train(loss, data.train, record, cfg.trainable(), train_cfg)
  assert _one_line(e).startswith("cfg = 'a dict' is not allowed: a dynamics.TrainConfig")


def test_make_topic_dataset_with_config_and_key_swapped(setup):
  task = setup[0]
  with pytest.raises(ad.ConfigError) as e:
    tasks.make_topic_dataset(task, jax.random.PRNGKey(0))
  assert "the arguments are swapped" in _one_line(e)
  with pytest.raises(ad.ConfigError) as e:
    tasks.make_topic_dataset(0, task)
  assert _one_line(e).startswith("key = 'int' is not allowed: a PRNG key")


def test_trainable_as_a_list(setup):
  """A list of group names is the groups that train; anything else in a list is one line."""
  _, data, cfg, loss, record, train_cfg = setup
  params0 = models.lu.init(jax.random.PRNGKey(1), cfg)
  names = [g for g, f in cfg.trainable().items() if f]
  dynamics.make_train(loss, data.train, record, train_cfg, names)(params0, jax.random.PRNGKey(0))
  with pytest.raises(ad.ConfigError) as e:
    dynamics.make_train(loss, data.train, record, train_cfg, ["embeddings", "kyes"])(
        params0, jax.random.PRNGKey(0))
  assert "(not ['kyes'])" in _one_line(e)
  with pytest.raises(ad.ConfigError) as e:
    dynamics.make_train(loss, data.train, record, train_cfg, [True, False])(
        params0, jax.random.PRNGKey(0))
  assert "structure is not the parameters'" in _one_line(e)


def test_run_sweep_over_a_list_of_numbers():
  with pytest.raises(ad.ConfigError) as e:
    dynamics.run_sweep(lambda x: x * 2, [0, 1, 2])
  assert "pass an array, e.g. jnp.asarray([0, 1, 2])" in _one_line(e)
  assert list(dynamics.run_sweep(lambda x: x * 2, jnp.asarray([0, 1, 2]))) == [0, 2, 4]


def test_seeds_as_an_array_are_seeds():
  cfg = ad.paper_config("quick", sweep={"seeds": jnp.arange(4), "data_seeds": jnp.int32(2)})
  assert cfg.sweep.seeds == (0, 1, 2, 3) and cfg.sweep.data_seeds == (0, 1)


def test_record_returning_none(setup):
  _, data, cfg, loss, _, train_cfg = setup
  params0 = models.lu.init(jax.random.PRNGKey(1), cfg)
  forgot = lambda p, p0: None
  with pytest.raises(ad.ConfigError) as e:
    dynamics.make_train(loss, data.train, forgot, train_cfg, cfg.trainable())(
        params0, jax.random.PRNGKey(0))
  assert "returned None" in _one_line(e)
  with pytest.raises(ad.ConfigError) as e:
    dynamics.gradient_flow(loss, params0, data.train, forgot, lr=0.5, ts=jnp.arange(3.0),
                           trainable=cfg.trainable())
  assert "returned None" in _one_line(e)


def test_python_errors_are_worded_for_python():
  with pytest.raises(ad.ConfigError) as e:
    ad.paper_config("lu2021-txt-tc")
  text = _one_line(e)
  assert text.startswith("preset 'lu2021-txt-tc' is not allowed.") and "--preset" not in text
