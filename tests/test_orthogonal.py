"""The vmap-safe orthogonal initialiser: jax's draws, and no thread-pool deadlock under vmap."""
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attndyn.models.orthogonal import orthogonal, qr


@pytest.mark.parametrize("shape", [(6, 6), (7, 3), (3, 7), (2, 4, 5)])
def test_orthogonal_equals_jax_initializer(key, shape):
  got = orthogonal()(key, shape, jnp.float64)
  want = jax.nn.initializers.orthogonal()(key, shape, jnp.float64)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_vmapped_qr_factors_every_matrix(key):
  a = jax.random.normal(key, (3, 2, 5, 4), jnp.float64)
  q, r = jax.jit(jax.vmap(jax.vmap(qr)))(a)
  np.testing.assert_allclose(q @ r, a, atol=1e-12)
  np.testing.assert_allclose(jnp.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (3, 2, 4, 4)),
                             atol=1e-12)


def test_lstm_init_vmapped_over_seeds_finishes():
  """jit(vmap(seq2seq.init)) at hidden 256: with flax's default orthogonal init (one batched
  LAPACK QR per recurrent kernel, eight at once) this never returned on a 2-core CPU."""
  code = textwrap.dedent("""
      import jax
      from attndyn.models import seq2seq
      cfg = seq2seq.Seq2SeqConfig(12, 12, hidden=256)
      keys = jax.random.split(jax.random.PRNGKey(0), 3)
      out = jax.block_until_ready(jax.jit(jax.vmap(lambda k: seq2seq.init(k, cfg)))(keys))
      print(out["encoder"]["hi"]["kernel"].shape)
  """)
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "(3, 256, 256)" in done.stdout
