"""The ``attndyn`` command: a tiny run end to end, its files, and one-line errors."""
import json
import os
import subprocess
import sys
from pathlib import Path

from unittest import mock

import numpy as np
import pytest

from attndyn import chunking, cli, config, pipeline, presets

# The quick preset shrunk so a run takes seconds: 2 seeds, 40 steps, a 12-word vocabulary.
TINY = ["--set", "task.vocab_size=12", "--set", "task.n_nontopic=3", "--set", "task.n_train=16",
        "--set", "task.n_test=8", "--set", "model.embed_dim=4", "--set", "model.key_dim=4",
        "--set", "train.steps=40", "--set", "train.record_every=10", "--set", "sweep.seeds=2",
        "--set", "train.lr=0.5", "--set", "model.embed_std=0.1"]
RUN_KEYS = {"seed", "data_seed", "final_train_loss", "test_acc", "topic_words",
            "nontopic_max_abs_score_change", "ode_max_abs_score_dev"}
WORD_KEYS = {"word", "score", "emb_norm", "sen_norm", "invariant_drift"}
PNG = b"\x89PNG\r\n\x1a\n"


def _console_script() -> str:
  return str(Path(sys.executable).with_name("attndyn"))


@pytest.fixture(scope="module")
def script_run(tmp_path_factory):
  """The console script run in a subprocess (GD only), started first so it overlaps the
  in-process run below (compilation is single-threaded; CI has 2 cores)."""
  out = tmp_path_factory.mktemp("script") / "out"
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  proc = subprocess.Popen([_console_script(), "run", "--preset", "quick", "--out", str(out),
                           "--force", "--set", "ode.kind=none", *TINY],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
  yield proc, out
  if proc.poll() is None:
    proc.kill()
    proc.communicate()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, script_run):
  """One in-process ``attndyn run --preset quick`` (both ODEs) shared by the tests below.

  Returns:
    ``(exit code, output directory, the pipeline's RunResult)``.
  """
  out = tmp_path_factory.mktemp("run") / "out"
  results, real_run = [], pipeline.run
  with mock.patch.object(pipeline, "run", lambda *a, **k: results.append(real_run(*a, **k))
                         or results[-1]):
    code = cli.main(["run", "--preset", "quick", "--out", str(out), "--no-progress", *TINY])
  return code, out, results[0]


def test_run_writes_summary_with_every_required_key(tiny_run):
  code, out, _ = tiny_run
  assert code == 0
  doc = json.loads((out / "summary.json").read_text())
  assert doc["schema_version"] == 2 and doc["errors"] == {}
  assert doc["environment"]["versions"]["jax"] and doc["environment"]["device_count"] >= 1
  cfg = config.RunConfig.from_dict(doc["config"])
  assert (cfg.train.steps, cfg.task.vocab_size, cfg.ode.kind) == (40, 12, "both")
  assert [r["seed"] for r in doc["runs"]] == [0, 1]
  for run in doc["runs"]:
    assert RUN_KEYS <= set(run)
    assert len(run["topic_words"]) == cfg.task.n_topic_words
    for word in run["topic_words"]:
      assert WORD_KEYS <= set(word)
    assert set(run["ode_max_abs_score_dev"]) == {"reduced", "gradient_flow"}
    assert all(np.isfinite(v) for v in run["ode_max_abs_score_dev"].values())
  assert config.load(out / "config.toml") == cfg


def test_run_writes_plain_npz_and_png_figures(tiny_run):
  _, out, _ = tiny_run
  with np.load(out / "trajectories.npz", allow_pickle=False) as z:
    np.testing.assert_array_equal(z["points/seed"], [0, 1])
    assert z["gd/score"].shape == (2, 5, 8) and z["gd/loss"].shape == (2, 5)
    for kind in ("reduced", "gradient_flow"):
      np.testing.assert_array_equal(z[f"{kind}/t"], z["gd/t"])
      assert z[f"{kind}/score"].shape == z["gd/score"].shape
    assert z["gd/final_word_score"].shape == (2, 8 + 12)
  for name in ("sen.png", "attndyn.dynamics.png", "loss.png", "invariant.png"):
    assert (out / name).read_bytes()[:8] == PNG
  assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def _failing_ode_stages(monkeypatch, gd, err):
  """Make every ODE stage raise ``err(label)``; GD returns ``gd``."""
  real = pipeline._stage

  def stage(label, *args, **kwargs):
    if label == "gd":
      return gd
    raise err(label)

  monkeypatch.setattr(pipeline, "_stage", stage)
  return real


def test_a_failed_ode_stage_is_a_bug_that_keeps_everything_else(tiny_run, tmp_path, monkeypatch,
                                                                  capsys):
  _failing_ode_stages(monkeypatch, tiny_run[2].gd,
                      lambda label: RuntimeError(f"{label} solver exploded"))
  out = tmp_path / "out"
  code = cli.main(["run", "--preset", "quick", "--out", str(out), "--no-progress", *TINY])
  err = capsys.readouterr().err
  assert code == 1 and "Traceback" not in err
  assert "internal error: the reduced stage failed (RuntimeError: reduced solver exploded)" in err
  log = (out / cli.ERROR_LOG).read_text()   # both stages' tracebacks, for the bug report
  assert "reduced solver exploded" in log and "gradient_flow solver exploded" in log
  assert err.count(f"traceback in {out / cli.ERROR_LOG}") == 2
  doc = json.loads((out / "summary.json").read_text())
  assert set(doc["errors"]) == {"reduced", "gradient_flow"}
  assert doc["runs"][0]["final_train_loss"] is not None
  with np.load(out / "trajectories.npz", allow_pickle=False) as z:
    assert "gd/score" in z.files and "reduced/score" not in z.files


def test_an_ode_stage_the_machine_stopped_is_finished_by_resume(tiny_run, tmp_path, monkeypatch,
                                                                capsys):
  """Out of memory in the ODE stages: exit code 2 (not a bug) naming ``--resume``, which then
  solves the missing stages and reads GD back from its checkpoints."""
  real = _failing_ode_stages(
      monkeypatch, tiny_run[2].gd,
      lambda label: RuntimeError(f"RESOURCE_EXHAUSTED: {label} needs more memory"))
  out = tmp_path / "out"
  code = cli.main(["run", "--preset", "quick", "--out", str(out), "--no-progress", *TINY])
  err = capsys.readouterr().err
  assert code == 2 and "internal error" not in err and err.count("\n") == 2, err
  assert f"`attndyn run --out {out} --resume` solves the reduced stage alone" in err
  monkeypatch.setattr(pipeline, "_stage", real)
  code = cli.main(["run", "--out", str(out), "--resume", "--no-progress"])
  assert code == 0, capsys.readouterr().err
  doc = json.loads((out / "summary.json").read_text())
  assert doc["errors"] == {}
  with np.load(out / "trajectories.npz", allow_pickle=False) as z:
    assert {"gd/score", "reduced/score", "gradient_flow/score"} <= set(z.files)


def test_refuses_a_non_empty_out_dir_and_touches_nothing(tmp_path, capsys):
  (tmp_path / "notes.txt").write_text("mine")
  code = cli.main(["run", "--preset", "quick", "--out", str(tmp_path), *TINY])
  err = capsys.readouterr().err
  assert code == 2 and "not empty" in err and "--force" in err
  assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("args,expected", [
    (["--preset", "quick", "--set", "train.lr=-1"], "train.lr = -1.0 is not allowed"),
    (["--preset", "quick", "--set", "model.clasifier=fc"], 'Did you mean "classifier"'),
    (["--preset", "quikc"], 'Did you mean "quick"'),
    (["--preset", "quick", "--set", "train.lr"], "section.key=value"),
    (["missing.toml"], "does not exist"),
    (["bad.toml"], "not valid TOML"),
    (["bad.toml", "--preset", "quick"], "exactly one of CONFIG.toml or --preset"),
    ([], "exactly one of CONFIG.toml or --preset"),
])
def test_bad_input_exits_2_with_one_line_and_no_traceback(args, expected, tmp_path, capsys,
                                                          monkeypatch):
  monkeypatch.chdir(tmp_path)
  Path("bad.toml").write_text("[train\nlr = 0.1\n")
  code = cli.main(["run", *args, "--out", str(tmp_path / "out")])
  err = capsys.readouterr().err
  assert code == 2
  assert err.startswith("attndyn: error: ") and err.count("\n") == 1, err
  assert expected in err and "Traceback" not in err
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sets,expected", [
    (["train.steps=40000000", "train.record_every=1"],
     "the recorded trajectories alone would need 34.9 GB (2 sweep points × 40000001 recorded "
     "steps × 3 stage(s)), more than this machine's 1.0 GB"),
    (["model.embed_dim=20000000", "ode.kind=none"],
     "one sweep point's parameters alone would need 3.0 GB (20 words × 20000004 embedding and "
     "key dimensions), more than this machine's 1.0 GB"),
])
def test_a_run_that_cannot_fit_in_memory_is_refused_before_anything_runs(sets, expected,
                                                                           tmp_path, capsys):
  items = [a for s in sets for a in ("--set", s)]
  with mock.patch.object(chunking, "host_bytes", return_value=2**30), \
      mock.patch.object(pipeline, "run", side_effect=AssertionError("ran")):
    code = cli.main(["run", "--preset", "quick", "--out", str(tmp_path / "o"), *TINY, *items])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and expected in err, err
  assert not (tmp_path / "o").exists()
  # Both sizes are exact lower bounds: the presets pass on a 1 GB machine.
  with mock.patch.object(chunking, "host_bytes", return_value=2**30):
    for name in presets.names():
      chunking.check_fits(config.RunConfig.from_dict(presets.preset(name)))


def test_out_of_memory_is_one_line_with_both_remedies(tmp_path, capsys):
  with mock.patch.object(pipeline, "run", side_effect=MemoryError()):
    code = cli.main(["run", "--preset", "quick", "--out", str(tmp_path / "o"), *TINY])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
  assert "--chunk-size N" in err and "if one point alone does not fit" in err


@pytest.mark.parametrize("entry,kind", [
    ("summary.json/", "not a file"), ("trajectories.npz/", "not a file"),
    ("run_info.json/", "not a file"), ("config.toml/", "not a file"),
    ("checkpoints", "not a directory"), ("checkpoints/manifest.json/", "not a file"),
    ("checkpoints/0123abcd.npz/", "not a file"), ("checkpoints/0123abcd.json/", "not a file"),
])
def test_force_refuses_own_output_names_of_the_wrong_kind_before_running(entry, kind, tmp_path,
                                                                         capsys):
  """A directory where attndyn writes a file (or a file where it keeps checkpoints) is refused
  up front: the writes at the end of a run would fail and lose what was computed."""
  path = tmp_path / entry.rstrip("/")
  path.parent.mkdir(parents=True, exist_ok=True)
  path.mkdir() if entry.endswith("/") else path.write_text("mine")
  with mock.patch.object(pipeline, "run", side_effect=AssertionError("ran")):
    code = cli.main(["run", "--preset", "quick", "--out", str(tmp_path), "--force", *TINY])
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and f"{str(path)!r} is {kind}" in err, err
  assert path.exists() and not (tmp_path / "config.toml").is_file()


@pytest.mark.parametrize("args,expected", [
    (["--impls", "foo"], "argument --impls: invalid choice: 'foo'"),
    (["--seeds", "0"], "argument --seeds: '0' is not a positive integer"),
    (["--reps", "x"], "argument --reps: 'x' is not a positive integer"),
    (["--out", "FILE"], "cannot make a directory there"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bench_takes_its_options_and_refuses_bad_ones(args, expected, tmp_path, capsys):
  """`attndyn bench` hands every option, leading ones included, to benchmarks.run's parser;
  bad ones end in one usage error before anything is timed."""
  (tmp_path / "FILE").write_text("")
  args = [str(tmp_path / "FILE") if a == "FILE" else a for a in args]
  with pytest.raises(SystemExit) as stop:
    cli.main(["bench", "--out", str(tmp_path / "out"), *args])
  err = capsys.readouterr().err
  assert stop.value.code == 2 and "attndyn bench: error: " in err and expected in err, err
  assert "Traceback" not in err and not (tmp_path / "out").exists()
  with pytest.raises(SystemExit) as stop:
    cli.main(["bench", "--help"])
  assert stop.value.code == 0 and "usage: attndyn bench" in capsys.readouterr().out


def test_presets_lists_every_preset_and_shows_toml(capsys):
  assert cli.main(["presets"]) == 0
  listed = capsys.readouterr().out
  assert all(name in listed for name in presets.names())
  assert cli.main(["presets", "--show", "lu2021-code-tc"]) == 0
  assert 'fc_init = "randn_unit_diag"' in capsys.readouterr().out
  assert cli.main(["presets", "--show", ""]) == 2
  assert "--preset '' is not allowed" in capsys.readouterr().err


def test_console_script_runs_and_fails_cleanly(tiny_run, script_run):
  proc, out = script_run
  stdout, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 0, stderr
  assert "Attn-TC" in stdout and "test acc" in stdout
  assert (out / "summary.json").is_file() and (out / "notes.txt").read_text() == "mine"
  assert "gd/score" in np.load(out / "trajectories.npz", allow_pickle=False).files
  bad = subprocess.run([_console_script(), "run", "--preset", "quick", "--out", str(out),
                        "--set", "ode.kind=euler"], capture_output=True, text=True, timeout=300)
  assert bad.returncode == 2
  assert bad.stderr.startswith("attndyn: error: ode.kind = 'euler' is not allowed")
  assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
