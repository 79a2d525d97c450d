"""Every config field × every class of bad value: one ConfigError naming the field, the value and
what is allowed, and through the CLI one stderr line, exit code 2 and no traceback."""
import numpy as np
import pytest

from attndyn import models
from attndyn import cli, config, overrides, presets
from attndyn.tasks.errors import ConfigError

INT = "an integer (at most 2**31-1)"
POS = "a positive integer"
FIN_POS = "a finite number > 0"
FIN_NONNEG = "a finite number >= 0"
SEEDS = "an integer n >= 1 (seeds 0..n-1) or a list of distinct integers in 0..2**32-1"

# (--set items on the quick preset, fragments the message must hold: field, value, allowed).
BAD = [
    # top level: unknown names, wrong types, unknown keys and sections
    (["precision=float16"], ["precision = 'float16'", "one of float32, float64"]),
    (["precision=64"], ["precision = 64", "a string"]),
    (["precison=float64"], ['"precison"', 'Did you mean "precision"', "Allowed: gd_path, model, ode"]),
    (["foo=1"], ['unknown key "foo" in the top level', "Allowed: gd_path, model, ode, precision"]),
    (["gd_path=quick"], ["gd_path = 'quick'", "one of auto, generic, fast"]),
    (["gd_path=fast", "model.train_query=true", "model.key_std=0.1", "ode.kind=none"],
     ["gd_path = 'fast'", '"auto" or "generic" here', "the query is trained", "key_std"]),
    (["gd_path=fast", "sweep.data_seeds=2"], ["gd_path = 'fast'", "several data seeds"]),
    (["modle.embed_dim=3"], ["[modle]", 'Did you mean "model"', "Allowed sections: task"]),
    # [task]
    (["task=3"], ["[task] = 3", "a table of key = value pairs"]),
    (["task.kind=sst"], ["task.kind = 'sst'", "one of topic"]),
    (["task.kind=1"], ["task.kind = 1", "a string"]),
    (["task.n_topics=-1"], ["task.n_topics = -1", "an integer >= 2"]),
    (["task.n_topics=0"], ["task.n_topics = 0", "an integer >= 2"]),
    (["task.n_topics=1"], ["task.n_topics = 1", "an integer >= 2"]),
    (["task.n_topics=2.5"], ["task.n_topics = 2.5", INT]),
    (['task.n_topics="4"'], ["task.n_topics = '4'", INT]),
    (["task.n_topics=true"], ["task.n_topics = True", INT]),
    (["task.n_topics=nan"], ["task.n_topics = nan", INT]),
    (["task.n_topics=inf"], ["task.n_topics = inf", INT]),
    (["task.words_per_topic=-1"], ["task.words_per_topic = -1", "an integer >= 1"]),
    # integers past int32 (they would overflow inside the compiled programs)
    (["task.n_nontopic=4294967296"], ["task.n_nontopic = 4294967296", INT]),
    (["task.n_train=99999999999999999999"], ["task.n_train = 99999999999999999999", INT]),
    (["model.embed_dim=2147483648"], ["model.embed_dim = 2147483648", INT]),
    (["train.steps=2147483650", "train.record_every=2147483650"], ["train.steps = 2147483650", INT]),
    (["ode.max_steps=99999999999999999999"], ["ode.max_steps = 99999999999999999999", INT]),
    (["sweep.chunk_size=3000000000"], ["sweep.chunk_size = 3000000000", INT]),
    # numbers past the run's precision (1e308 became inf in float32 with only a warning)
    (["model.embed_std=1e308"], ["model.embed_std = 1e+308", 'precision = "float32"',
                                 "at most 3.403e+38", 'use precision = "float64"']),
    (["train.lr=1e39"], ["train.lr = 1e+39", "at most 3.403e+38"]),
    (['sweep.grid={"model.query_std"=[1.0, 1e300]}'],
     ['sweep.grid["model.query_std"] = 1e+300', "the largest float32"]),
    (["task.words_per_topic=0"], ["task.words_per_topic = 0", "an integer >= 1"]),
    (["task.words_per_topic=1.5"], ["task.words_per_topic = 1.5", INT]),
    (["task.vocab_size=-5"], ["task.vocab_size = -5", "an integer >= 1"]),
    (["task.vocab_size=0"], ["task.vocab_size = 0", "an integer >= 1"]),
    (["task.vocab_size=1e3"], ["task.vocab_size = 1000.0", INT]),
    (["task.n_nontopic=-1"], ["task.n_nontopic = -1", "an integer m >= 1"]),
    (["task.n_nontopic=0"], ["task.n_nontopic = 0", "an integer m >= 1"]),         # m < 1
    (["task.n_nontopic=2.0"], ["task.n_nontopic = 2.0", INT]),
    (["task.n_train=-1"], ["task.n_train = -1", "an integer >= 1"]),
    (["task.n_train=0"], ["task.n_train = 0", "an integer >= 1"]),
    (["task.n_train=3"], ["task.n_train = 3", "at least n_topics*words_per_topic = 8"]),
    (["task.n_train=800.0"], ["task.n_train = 800.0", INT]),
    (["task.n_test=-1"], ["task.n_test = -1", "an integer >= 1"]),
    (["task.n_test=0"], ["task.n_test = 0", "an integer >= 1"]),
    (['task.n_test="x"'], ["task.n_test = 'x'", INT]),
    (["task.n_topics=65536", "task.words_per_topic=65536"],                       # too many topic
     ["task.n_topics*words_per_topic + vocab_size = 4294967796",                  # words for the
      "at most 2147483647 words in all (word ids are int32)"]),                   # vocabulary
    (["task.n_topic=4"], ['"task.n_topic"', 'Did you mean "n_topics"', "Allowed: kind"]),
    # [model]
    (["model=3"], ["[model] = 3", "a table of key = value pairs"]),
    (["model.classifier=cnn"], ["model.classifier = 'cnn'", "one of fc, tc, tl"]),
    (["model.classifier=3"], ["model.classifier = 3", "a string"]),
    (["model.normaliser=softer"], ["model.normaliser = 'softer'", "one of softmax, sparsemax, entmax15"]),
    # Lemma 2's reduced ODE is softmax's; GD and the gradient flow take any normaliser.
    (["model.normaliser=sparsemax", "ode.kind=reduced"],
     ["model.normaliser = 'sparsemax'", "Lemma 2's reduced ODE", 'ode.kind = "gradient_flow"']),
    (["model.fc_init=eye"], ["model.fc_init = 'eye'", "one of orthonormal, randn_unit_diag"]),
    (["model.fc_init=0"], ["model.fc_init = 0", "a string"]),
    (["model.embed_dim=0"], ["model.embed_dim = 0", POS]),
    (["model.embed_dim=-3"], ["model.embed_dim = -3", POS]),
    (["model.embed_dim=2.5"], ["model.embed_dim = 2.5", INT]),
    (['model.embed_dim="4"'], ["model.embed_dim = '4'", INT]),
    (["model.classifier=fc", "model.embed_dim=2"], ["model.embed_dim = 2", "at least n_classes = 4"]),
    (["model.key_dim=0"], ["model.key_dim = 0", POS]),
    (["model.key_dim=-1"], ["model.key_dim = -1", POS]),
    (["model.key_dim=4.0"], ["model.key_dim = 4.0", INT]),
    (["model.hidden_dim=0"], ["model.hidden_dim = 0", POS]),
    (["model.hidden_dim=-2"], ["model.hidden_dim = -2", POS]),
    (["model.hidden_dim=1.5"], ["model.hidden_dim = 1.5", INT]),
    (["model.embed_std=-1e-3"], ["model.embed_std = -0.001", FIN_NONNEG]),
    (["model.embed_std=nan"], ["model.embed_std = nan", FIN_NONNEG]),
    (["model.embed_std=inf"], ["model.embed_std = inf", FIN_NONNEG]),
    (['model.embed_std="0.1"'], ["model.embed_std = '0.1'", "a number"]),
    (["model.key_std=-1"], ["model.key_std = -1.0", FIN_NONNEG]),
    (["model.key_std=nan"], ["model.key_std = nan", FIN_NONNEG]),
    (["model.key_std=inf"], ["model.key_std = inf", FIN_NONNEG]),
    (["model.key_std=true"], ["model.key_std = True", "a number"]),
    (["model.query_std=0"], ["model.query_std = 0.0", FIN_POS, "Lemma 1 needs q ≠ 0"]),
    (["model.query_std=-1"], ["model.query_std = -1.0", FIN_POS]),
    (["model.query_std=nan"], ["model.query_std = nan", FIN_POS]),
    (["model.query_std=inf"], ["model.query_std = inf", FIN_POS]),
    (["model.query_norm=0"], ["model.query_norm = 0.0", FIN_POS + ", or unset"]),
    (["model.query_norm=-1"], ["model.query_norm = -1.0", FIN_POS]),
    (["model.query_norm=nan"], ["model.query_norm = nan", FIN_POS]),
    (["model.query_norm=inf"], ["model.query_norm = inf", FIN_POS]),
    (['model.query_norm="big"'], ["model.query_norm = 'big'", 'a number, or "none" (unset)']),
    (["model.query_seed=-1"], ["model.query_seed = -1", "an integer in 0..2**32-1, or unset"]),
    (['model.query_seed="a"'], ["model.query_seed = 'a'", 'an integer (at most 2**31-1), or "none"']),
    (["model.train_query=1"], ["model.train_query = 1", "true or false"]),
    (['model.train_query="yes"'], ["model.train_query = 'yes'", "true or false"]),
    (['model.freeze="keys"'], ["model.freeze = 'keys'", 'a list of strings, e.g. ["keys"]']),
    (['model.freeze=["key"]'], ["model.freeze = ('key',)", "embeddings, keys, query, classifier"]),
    (["model.freeze=[1]"], ["model.freeze = [1]", "a list of strings"]),
    (["model.n_words=3"], ['"model.n_words" cannot be set', "derived from the task"]),
    (["model.n_classes=3"], ['"model.n_classes" cannot be set', "derived from the task"]),
    (["model.embd_dim=3"], ['"model.embd_dim"', 'Did you mean "embed_dim"', "Allowed: classifier"]),
    # [train]
    (["train=[1]"], ["[train] = [1]", "a table of key = value pairs"]),
    (["train.optimizer=adamx"], ["train.optimizer = 'adamx'", "one of gd, sgd, momentum"]),
    (["train.optimizer=1"], ["train.optimizer = 1", "a string"]),
    (["train.lr=0"], ["train.lr = 0.0", FIN_POS]),                                  # lr <= 0
    (["train.lr=-0.1"], ["train.lr = -0.1", FIN_POS]),
    (["train.lr=nan"], ["train.lr = nan", FIN_POS]),                                # NaN
    (["train.lr=inf"], ["train.lr = inf", FIN_POS]),
    (["train.lr=-inf"], ["train.lr = -inf", FIN_POS]),
    (['train.lr="0.1"'], ["train.lr = '0.1'", "a number"]),
    (["train.lr=true"], ["train.lr = True", "a number"]),
    (["train.flow_time=0"], ["train.flow_time = 0.0", "a finite number > 0, or unset"]),
    (["train.flow_time=500"], ["train.steps = 1500", "at least 5000 = train.flow_time / lr"]),
    (["train.steps=0"], ["train.steps = 0", POS]),
    (["train.steps=-10"], ["train.steps = -10", POS]),
    (["train.steps=10.5"], ["train.steps = 10.5", INT]),
    (["train.steps=101"], ["train.steps = 101", "a multiple of train.record_every = 25"]),
    (["train.record_every=0"], ["train.record_every = 0", POS]),
    (["train.record_every=-1"], ["train.record_every = -1", POS]),
    (["train.record_every=2.5"], ["train.record_every = 2.5", INT]),
    (["train.record_every=3000"], ["train.steps = 1500", "a multiple of train.record_every = 3000"]),
    (["train.batch_size=-1"], ["train.batch_size = -1", "a positive integer, or 0 / unset"]),
    (["train.batch_size=1.5"], ["train.batch_size = 1.5", 'an integer (at most 2**31-1), or "none" (unset)']),
    (["train.batch_size=10"], ["train.batch_size = 10", "use optimizer 'sgd' for minibatches"]),
    (["train.optimizer=sgd", "train.batch_size=9999", "ode.kind=none"],
     ["train.batch_size = 9999", "at most task.n_train = 200"]),
    (["train.sampling=bootstrap"], ["train.sampling = 'bootstrap'", "one of shuffle, replacement"]),
    (["train.sampling=1"], ["train.sampling = 1", "a string"]),
    (["train.learning_rate=0.1"], ['"train.learning_rate"', "Allowed: batch_size, flow_time, lr"]),
    # [sweep]
    (["sweep=1"], ["[sweep] = 1", "a table of key = value pairs"]),
    (["sweep.seeds=0"], ["sweep.seeds = 0", SEEDS]),
    (["sweep.seeds=-1"], ["sweep.seeds = -1", SEEDS]),
    (["sweep.seeds=[]"], ["sweep.seeds = []", SEEDS]),
    (["sweep.seeds=[1, 1]"], ["sweep.seeds = [1, 1]", "distinct integers (no repeats)"]),
    (["sweep.seeds=[-1]"], ["sweep.seeds = [-1]", SEEDS]),
    (["sweep.seeds=[4294967296]"], ["sweep.seeds = [4294967296]", SEEDS]),
    (["sweep.seeds=2.5"], ["sweep.seeds = 2.5", SEEDS]),
    (['sweep.seeds="3"'], ["sweep.seeds = '3'", SEEDS]),
    (["sweep.seeds=[0.5]"], ["sweep.seeds = [0.5]", SEEDS]),
    (["sweep.data_seeds=0"], ["sweep.data_seeds = 0", SEEDS]),
    (["sweep.data_seeds=[-3]"], ["sweep.data_seeds = [-3]", SEEDS]),
    (["sweep.data_seeds=2.5"], ["sweep.data_seeds = 2.5", SEEDS]),
    (["sweep.data_seeds=[2, 2]"], ["sweep.data_seeds = [2, 2]", "no repeats"]),
    (["sweep.seeds=1000", "sweep.data_seeds=1001"],
     ["sweep points (data_seeds × grid × seeds) = 1001000", "at most 1000000"]),
    (["sweep.grid=3"], ["sweep.grid = 3", "a table of field name -> list of numbers"]),
    (['sweep.grid={"train.lrr"=[0.1]}'], ['sweep.grid field "train.lrr"', 'Did you mean "train.lr"',
                                          "Allowed: train.lr, model.embed_std"]),
    (['sweep.grid={"task.n_train"=[10]}'], ['sweep.grid field "task.n_train"', "Allowed: train.lr"]),
    (['sweep.grid={"train.lr"=[]}'], ['sweep.grid["train.lr"] = []', "a non-empty list of numbers"]),
    (['sweep.grid={"train.lr"=0.1}'], ['sweep.grid["train.lr"] = 0.1', "a non-empty list"]),
    (['sweep.grid={"train.lr"=["a"]}'], ['sweep.grid["train.lr"] = [\'a\']', "finite numbers"]),
    (['sweep.grid={"train.lr"=[nan]}'], ['sweep.grid["train.lr"] = [nan]', "finite numbers"]),
    (['sweep.grid={"train.lr"=[inf]}'], ['sweep.grid["train.lr"] = [inf]', "finite numbers"]),
    (['sweep.grid={"train.lr"=[-1]}'], ['sweep.grid["train.lr"] holds -1.0', FIN_POS]),
    (['sweep.grid={"model.embed_std"=[0.1, -1]}'], ['sweep.grid["model.embed_std"] holds -1.0',
                                                    FIN_NONNEG]),
    (['sweep.grid={"model.key_std"=[-2]}'], ['sweep.grid["model.key_std"] holds -2.0', FIN_NONNEG]),
    (['sweep.grid={"model.query_std"=[0]}'], ['sweep.grid["model.query_std"] holds 0.0', FIN_POS]),
    (['sweep.grid={"model.query_norm"=[0]}'], ['sweep.grid["model.query_norm"] holds 0.0', FIN_POS]),
    (["sweep.chunk_size=0"], ["sweep.chunk_size = 0", "a positive integer, or unset"]),
    (["sweep.chunk_size=-1"], ["sweep.chunk_size = -1", "a positive integer, or unset"]),
    (["sweep.chunk_size=1.5"], ["sweep.chunk_size = 1.5", 'an integer (at most 2**31-1), or "none"']),
    (["sweep.chunk_size=true"], ["sweep.chunk_size = True", 'an integer (at most 2**31-1), or "none"']),
    (["sweep.checkpoint_every=-1"], ["sweep.checkpoint_every = -1", "an integer >= 0"]),
    (["sweep.checkpoint_every=1.5"], ["sweep.checkpoint_every = 1.5", INT]),
    (['sweep.checkpoint_every="x"'], ["sweep.checkpoint_every = 'x'", INT]),
    (["sweep.seed=3"], ['"sweep.seed"', 'Did you mean "seeds"', "Allowed: checkpoint_every"]),
    # [ode]
    (["ode=true"], ["[ode] = True", "a table of key = value pairs"]),
    (["ode.kind=euler"], ["ode.kind = 'euler'", "one of none, reduced, extended, gradient_flow, both, reduced_extended, all"]),
    (["ode.kind=1"], ["ode.kind = 1", "a string"]),
    (["ode.form=lemma3"], ["ode.form = 'lemma3'", "one of lemma2, exact"]),
    (["ode.solver=rk4"], ["ode.solver = 'rk4'", "one of tsit5, dopri5"]),
    (["ode.rtol=0"], ["ode.rtol = 0.0", FIN_POS]),
    (["ode.rtol=-1"], ["ode.rtol = -1.0", FIN_POS]),
    (["ode.rtol=nan"], ["ode.rtol = nan", FIN_POS]),
    (["ode.rtol=inf"], ["ode.rtol = inf", FIN_POS]),
    (['ode.rtol="x"'], ["ode.rtol = 'x'", "a number"]),
    (["ode.atol=0"], ["ode.atol = 0.0", FIN_POS]),
    (["ode.atol=nan"], ["ode.atol = nan", FIN_POS]),
    (["ode.atol=inf"], ["ode.atol = inf", FIN_POS]),
    (["ode.max_steps=0"], ["ode.max_steps = 0", POS]),
    (["ode.max_steps=-1"], ["ode.max_steps = -1", POS]),
    (["ode.max_steps=1.5"], ["ode.max_steps = 1.5", INT]),
    (["ode.dtmin=0"], ["ode.dtmin = 0.0", FIN_POS + ", or unset"]),
    (["ode.dtmin=-0.1"], ["ode.dtmin = -0.1", FIN_POS]),
    (["ode.dtmin=inf"], ["ode.dtmin = inf", FIN_POS]),
    (['ode.dtmin="small"'], ["ode.dtmin = 'small'", 'a number, or "none" (unset)']),
    (["train.optimizer=adam"], ["ode.kind = 'both'", '"none" when train.optimizer = "adam"']),
    (["model.train_query=true", "ode.kind=reduced"], ['ode.kind = "reduced"',
                                                      "set model.train_query = false"]),
    (['model.freeze=["keys"]'], ['ode.kind = "both"', "use form='exact'"]),
    (["ode.tol=1e-6"], ['"ode.tol"', 'Did you mean "rtol"', "Allowed: atol, dtmin, form"]),
]


@pytest.mark.parametrize("sets,expected", BAD, ids=[" ".join(s) for s, _ in BAD])
def test_bad_config_value_is_one_error_naming_field_value_and_allowed(sets, expected, tmp_path,
                                                                     capsys):
  with pytest.raises(ConfigError) as err:
    config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))
  message = str(err.value)
  for text in expected:
    assert text in message, message
  args = [a for item in sets for a in ("--set", item)]
  code = cli.main(["run", "--preset", "quick", *args, "--out", str(tmp_path / "out")])
  assert code == 2
  assert capsys.readouterr().err == f"attndyn: error: {message}\n"
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag,expected", [
    (["--chunk-size", "0"], "sweep.chunk_size = 0 is not allowed: a positive integer"),
    (["--checkpoint-every", "-2"], "sweep.checkpoint_every = -2 is not allowed: an integer >= 0"),
])
def test_bad_command_line_flags_are_config_errors(flag, expected, tmp_path, capsys):
  assert cli.main(["run", "--preset", "quick", *flag, "--out", str(tmp_path / "o")]) == 2
  assert expected in capsys.readouterr().err


@pytest.mark.parametrize("argv,expected", [
    (["run", "--preset", "quick", "--chunk-size", "abc", "--out", "o"],
     "argument --chunk-size: invalid int value: 'abc'"),
    (["run", "--preset", "quick"], "the following arguments are required: --out"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_command_line_usage_errors_are_one_line_too(argv, expected, capsys):
  with pytest.raises(SystemExit) as exit_:
    cli.main(argv)
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and err.startswith("attndyn: error: ") and err.count("\n") == 1
  assert expected in err, err


def test_every_schema_field_has_a_bad_value_in_the_table():
  from attndyn import schema
  covered = {item.split("=")[0] for sets, _ in BAD for item in sets}
  fields = {f"{section}.{key}" for section, keys in schema.SECTIONS.items() for key in keys}
  fields |= set(schema.TOP_LEVEL)
  assert fields <= covered, sorted(fields - covered)


# --- Malformed config files: the file and the line -------------------------------------------

@pytest.mark.parametrize("content,expected", [
    (b"[train]\nlr = = 0.1\n", "is not valid TOML: Invalid value (at line 2, column 6)"),
    (b"[train]\nlr = 0.1\n# caf\xe9\n", "line 3 is not UTF-8 text (byte 0xe9)"),
    (b"", "is empty"),
    (b"  \n\n", "is empty"),
    (b"[train]\nlr = 0.1\n[train]\n", "is not valid TOML"),
    (b"[train]\nlearning_rate = 0.1\n", 'unknown key "train.learning_rate"'),
    (b"\xef\xbb\xbf[train]\nlearning_rate = 0.1\n", 'unknown key "train.learning_rate"'),  # BOM
])
def test_a_malformed_config_file_names_the_file_and_line(content, expected, tmp_path, capsys):
  path = tmp_path / "run.toml"
  path.write_bytes(content)
  assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and expected in err, err
  if "unknown key" not in expected:
    assert str(path) in err


# --- Public functions: shapes at the boundary -------------------------------------------------

def test_a_query_whose_length_is_not_key_dim_is_a_config_error():
  params = {"embeddings": np.ones((10, 3)), "keys": np.ones((10, 4)), "query": np.ones(4)}
  assert models.word_scores(params).shape == (10,)
  with pytest.raises(ConfigError, match=r"params\['query'\].shape = \(5,\) is not allowed: "
                                        r"\(4,\): one entry per key dimension \(key_dim = 4"):
    models.word_scores({**params, "query": np.ones(5)})
  with pytest.raises(ConfigError, match=r"params\['embeddings'\].shape = \(9, 3\)"):
    models.word_scores({**params, "embeddings": np.ones((9, 3))})
