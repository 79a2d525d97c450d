"""dynamics.xla_options: per-stage XLA options are kept only where the installed XLA knows them."""
import jax
import numpy as np

from attndyn import dynamics
from attndyn import tasks
from attndyn.dynamics import xla_options


def test_unknown_option_is_dropped_and_known_ones_kept():
  options = {"xla_backend_optimization_level": 1, "xla_attndyn_no_such_option": True}
  assert xla_options.supported(options) == {"xla_backend_optimization_level": 1}
  assert xla_options.supported(None) is None
  assert xla_options.supported({}) == {}


def test_stage_options_compile_and_give_the_default_result():
  """Every stage's options, as the installed XLA takes them, compile a program to XLA's answer."""
  x = np.linspace(-3.0, 3.0, 64, dtype=np.float32)
  f = lambda v: jax.nn.softmax(v) @ jax.numpy.tanh(v)
  want = jax.jit(f)(x)
  for options in (dynamics._FAST_COMPILER_OPTIONS, dynamics._REDUCED_ODE_COMPILER_OPTIONS,
                  dynamics._REDUCED_ODE_LINEAR_COMPILER_OPTIONS, tasks.TOPIC_COMPILER_OPTIONS):
    got = jax.jit(f).lower(x).compile(xla_options.supported(options))(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_topic_dataset_options_give_the_same_data_bit_for_bit():
  """The generator compiled with its options draws exactly the data of a plain jit (and of
  the eager calls elsewhere, e.g. attndyn explain)."""
  cfg = tasks.TopicTaskConfig(n_topics=3, words_per_topic=2, vocab_size=40, n_nontopic=5,
                              n_train=24, n_test=8)
  key = jax.random.PRNGKey(3)
  plain = jax.jit(tasks.make_topic_dataset, static_argnums=1)(key, cfg)
  tuned = jax.jit(tasks.make_topic_dataset, static_argnums=1,
                  compiler_options=xla_options.supported(tasks.TOPIC_COMPILER_OPTIONS))(key, cfg)
  for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(tuned)):
    np.testing.assert_array_equal(a, b)
