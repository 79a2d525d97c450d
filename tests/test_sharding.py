"""Sweeps sharded over 4 (forced host) devices equal the single-device results.

JAX fixes the device count when its backend starts, so the check runs in a
subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``. The
sweep has 6 points: not a multiple of 4, so the last chunk is padded.
"""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from attndyn import dynamics
    from attndyn import config, overrides, pipeline, presets

    assert jax.device_count() == 4, jax.devices()
    assert dynamics.sweep_mesh().devices.size == 4
    one = jax.devices()[:1]

    def fn(x):
      return {"y": jnp.sin(x["a"]) * x["b"], "s": jnp.sum(x["b"]) + x["a"]}

    inputs = {"a": np.arange(6.0), "b": np.arange(18.0).reshape(6, 3)}
    ref = dynamics.run_sweep(fn, inputs, devices=one)
    for chunk in (None, 4, 3, 1):
      got = dynamics.run_sweep(fn, inputs, chunk_size=chunk)
      for k in ref:
        assert got[k].shape == ref[k].shape, (chunk, k, got[k].shape)
        np.testing.assert_array_equal(got[k], ref[k])

    sets = ["task.vocab_size=12", "task.n_nontopic=3", "task.n_train=16", "task.n_test=8",
            "model.embed_dim=4", "model.key_dim=4", "train.steps=20", "train.record_every=10",
            "train.lr=0.5", "model.embed_std=0.1", "ode.kind=none", "precision=float64",
            "sweep.seeds=3", 'sweep.grid={"model.query_std"=[0.5, 2.0]}', "model.query_norm=none"]
    cfg = config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))
    assert cfg.sweep.n_points == 6
    sharded = pipeline.run(cfg, progress=False)
    single = pipeline.run(cfg, progress=False, devices=one)
    for a, b in zip(jax.tree.leaves(sharded.gd), jax.tree.leaves(single.gd)):
      assert a.shape[0] == 6 and a.dtype == b.dtype, (a.shape, a.dtype, b.dtype)
      np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert sharded.gd.observables["score"].dtype == np.float64
    print("OK")
""")


def test_sweeps_sharded_over_four_devices_equal_one_device():
  env = {**os.environ, "JAX_PLATFORMS": "cpu",
         "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") +
                       " --xla_force_host_platform_device_count=4").strip()}
  done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                        timeout=600)
  assert done.returncode == 0, done.stderr[-4000:]
  assert done.stdout.strip().endswith("OK")
