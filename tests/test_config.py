"""Run configs: TOML round trips, presets, --set overrides, and one clear error per bad input."""
import dataclasses
import math
import tomllib

import pytest

from attndyn import config, overrides, presets, tomlwrite
from attndyn.tasks.errors import ConfigError


def _quick(*sets) -> config.RunConfig:
  return config.RunConfig.from_dict(overrides.apply(presets.preset("quick"), sets))


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_validates_and_round_trips_through_dict_and_toml(name, tmp_path):
  cfg = config.RunConfig.from_dict(presets.preset(name))
  assert config.RunConfig.from_dict(cfg.to_dict()) == cfg
  text = tomlwrite.dumps(cfg.to_dict())
  assert config.RunConfig.from_dict(tomllib.loads(text)) == cfg
  path = tmp_path / "run.toml"
  path.write_text(text)
  assert config.load(path) == cfg
  assert presets.describe(name)


def test_round_trip_keeps_grid_unset_values_and_types():
  cfg = _quick('sweep.grid={"train.lr"=[0.05, 1], "model.embed_std"=[0.001]}', "sweep.seeds=[3, 7]",
               "model.query_norm=none", "sweep.chunk_size=4", "precision=float64")
  again = config.RunConfig.from_dict(cfg.to_dict())
  assert again == cfg
  assert cfg.sweep.grid == (("train.lr", (0.05, 1.0)), ("model.embed_std", (0.001,)))
  assert isinstance(cfg.sweep.grid[0][1][1], float)
  assert cfg.model.query_norm is None and cfg.sweep.chunk_size == 4
  assert config.RunConfig.from_dict(tomllib.loads(tomlwrite.dumps(cfg.to_dict()))) == cfg


def test_text_preset_is_the_papers_section_5_1():
  cfg = config.RunConfig.from_dict(presets.preset("lu2021-text-fc"))
  t, m = cfg.task, cfg.model
  assert (t.n_topics, t.words_per_topic, t.vocab_size, t.n_nontopic) == (4, 2, 5000, 20)
  assert (t.n_train, t.n_test) == (800, 200)
  assert (m.embed_dim, m.key_dim, m.classifier, m.fc_init) == (15, 15, "fc", "orthonormal")
  assert math.isclose(m.embed_std ** 2, 1e-6) and m.key_std == 0.0 and m.query_norm == 1.0
  assert (cfg.train.optimizer, cfg.train.lr, cfg.train.steps) == ("gd", 0.1, 5000)
  assert cfg.sweep.seeds == (0, 1, 2, 3, 4) and cfg.ode.kinds == ("reduced", "gradient_flow")
  assert cfg.precision == "float32"


def test_code_preset_is_the_authors_pytorch_settings():
  cfg = config.RunConfig.from_dict(presets.preset("lu2021-code-fc"))
  m = cfg.model
  assert (cfg.task.n_train, cfg.task.n_test) == (3999, 950)       # 5000 split [0.8, 0.81, 1]
  assert (m.embed_dim, m.key_dim, m.fc_init) == (10, 10, "randn_unit_diag")
  assert (m.embed_std, m.query_std, m.key_std) == (1e-6, 0.3, 0.0)
  # the code seeds torch once: one query of norm 1.1967 for every run (docs/usage.md, Presets)
  assert (m.query_seed, m.query_norm) == (0, 1.1967)


def test_overrides_set_values_lists_tables_and_bare_words():
  cfg = _quick("train.lr=0.05", 'model.freeze=["keys"]', "ode.form=exact", "model.classifier=fc",
               "precision=float64", "sweep.seeds=4", "sweep.grid.train.lr=[0.1, 0.2]",
               "sweep.grid.model.query_std=[0.5]")
  assert cfg.train.lr == 0.05 and cfg.model.freeze == ("keys",) and cfg.model.classifier == "fc"
  assert cfg.precision == "float64" and cfg.sweep.seeds == (0, 1, 2, 3)
  assert cfg.sweep.grid == (("train.lr", (0.1, 0.2)), ("model.query_std", (0.5,)))
  assert cfg.sweep.n_points == 1 * 2 * 1 * 4


def test_points_are_data_seed_by_grid_by_seed():
  cfg = _quick("sweep.seeds=2", "sweep.data_seeds=[5, 6]", 'sweep.grid={"train.lr"=[0.1, 0.2]}')
  points = cfg.sweep.points()
  assert len(points) == cfg.sweep.n_points == 8
  assert points[:3] == [{"seed": 0, "data_seed": 5, "train.lr": 0.1},
                        {"seed": 1, "data_seed": 5, "train.lr": 0.1},
                        {"seed": 0, "data_seed": 5, "train.lr": 0.2}]
  assert points[-1] == {"seed": 1, "data_seed": 6, "train.lr": 0.2}


def test_missing_sections_take_the_defaults():
  cfg = config.RunConfig.from_dict({})
  assert cfg.task == config.TopicTaskConfig() and cfg.ode.kind == "none"
  assert dataclasses.replace(cfg.model) == cfg.model


# (--set items, text the message must name: the field, then what is allowed)
BAD = [
    (["modle.embed_dim=3"], ["[modle]", '"model"']),                                  # section
    (["model.embd_dim=3"], ["model.embd_dim", '"embed_dim"']),                       # key
    (["model.n_words=3"], ["model.n_words", "derived from the task"]),
    (["model.embed_dim=true"], ["model.embed_dim", "an integer"]),                   # bool vs int
    (['train.lr="0.1"'], ["train.lr", "a number"]),                                  # str vs number
    (["task.n_train=800.0"], ["task.n_train", "an integer"]),
    (["model.train_query=1"], ["model.train_query", "true or false"]),
    (['model.freeze="keys"'], ["model.freeze", "a list of strings"]),
    (["model=3"], ["[model]", "a table"]),
    (["task.vocab_size=-5"], ["task.vocab_size", ">= 1"]),                           # sizes
    (["task.n_test=0"], ["task.n_test", ">= 1"]),
    (["task.n_topics=1"], ["task.n_topics", ">= 2"]),
    (["model.embed_dim=0"], ["model.embed_dim", "a positive integer"]),
    (["task.n_nontopic=0"], ["task.n_nontopic", "m >= 1"]),                          # m < 1
    (["task.n_train=3"], ["task.n_train", "at least n_topics*words_per_topic = 8"]),
    (["train.lr=0"], ["train.lr", "a finite number > 0"]),                           # lr <= 0
    (["train.lr=-0.1"], ["train.lr", "a finite number > 0"]),
    (["train.lr=nan"], ["train.lr", "a finite number > 0"]),                         # NaN
    (["train.lr=inf"], ["train.lr", "a finite number > 0"]),
    (["model.embed_std=-1e-3"], ["model.embed_std", "a finite number >= 0"]),
    (["model.query_std=0"], ["model.query_std", "a finite number > 0"]),
    (["model.query_norm=-1"], ["model.query_norm", "a finite number > 0"]),
    (["model.classifier=cnn"], ["model.classifier", "one of fc, tc, tl"]),
    (["model.fc_init=eye"], ["model.fc_init", "orthonormal"]),
    (["model.classifier=fc", "model.embed_dim=2"], ["model.embed_dim", "at least n_classes"]),
    (['model.freeze=["key"]'], ["model.freeze", "embeddings, keys, query, classifier"]),
    (["train.optimizer=adamx"], ["train.optimizer", "one of gd, sgd"]),
    (["train.steps=101"], ["train.steps", "a multiple of train.record_every"]),
    (["train.batch_size=10"], ["train.batch_size", "use optimizer 'sgd'"]),
    (["train.optimizer=sgd", "train.batch_size=9999", "ode.kind=none"],
     ["train.batch_size", "at most task.n_train"]),
    (["ode.kind=euler"], ["ode.kind", "none, reduced, extended, gradient_flow, both, "
                                      "reduced_extended, all"]),
    (["ode.form=lemma3"], ["ode.form", "lemma2, exact"]),
    (["ode.solver=rk4"], ["ode.solver", "tsit5"]),
    (["ode.rtol=0"], ["ode.rtol", "a finite number > 0"]),
    (["ode.max_steps=0"], ["ode.max_steps", "a positive integer"]),
    (["train.optimizer=adam"], ["ode.kind", 'train.optimizer = "gd"']),
    (["model.train_query=true", "ode.kind=reduced"], ["ode.kind", "model.train_query = false"]),
    (['model.freeze=["keys"]'], ["ode.kind", "form='exact'"]),
    (["precision=float16"], ["precision", "float32, float64"]),
    (["precison=float64"], ["precison", '"precision"']),
    (["task.kind=sst"], ["task.kind", "one of topic"]),
    (["sweep.seeds=0"], ["sweep.seeds", "an integer n >= 1"]),
    (["sweep.seeds=[1, 1]"], ["sweep.seeds", "distinct"]),
    (["sweep.seeds=[-1]"], ["sweep.seeds", "0..2**32-1"]),
    (["sweep.data_seeds=2.5"], ["sweep.data_seeds", "an integer n >= 1"]),
    (["sweep.chunk_size=0"], ["sweep.chunk_size", "a positive integer"]),
    (['sweep.grid={"train.lrr"=[0.1]}'], ['"train.lrr"', '"train.lr"', "model.embed_std"]),
    (['sweep.grid={"task.n_train"=[10]}'], ['"task.n_train"', "train.lr, model.embed_std"]),
    (['sweep.grid={"train.lr"=[]}'], ['sweep.grid["train.lr"]', "a non-empty list of numbers"]),
    (['sweep.grid={"train.lr"=["a"]}'], ['sweep.grid["train.lr"]', "finite numbers"]),
    (['sweep.grid={"model.embed_std"=[0.1, -1]}'], ['sweep.grid["model.embed_std"]', ">= 0"]),
    (["sweep.grid=3"], ["sweep.grid", "a table of field name"]),
]


@pytest.mark.parametrize("sets,expected", BAD, ids=[" ".join(s) for s, _ in BAD])
def test_bad_input_is_one_config_error_naming_field_and_allowed(sets, expected):
  with pytest.raises(ConfigError) as err:
    _quick(*sets)
  message = str(err.value)
  for text in expected:
    assert text in message, message
  assert "\n" not in message


@pytest.mark.parametrize("item", ["train.lr", "=0.1", "train..lr=1", "train.lr=", "tr ain.lr=1",
                                  "model.freeze=[keys]", "train.lr.x=1"])
def test_bad_set_syntax_is_a_config_error(item):
  with pytest.raises(ConfigError, match="--set"):
    overrides.apply(presets.preset("quick"), [item])


def test_unknown_preset_suggests_the_closest_name():
  with pytest.raises(ConfigError, match='Did you mean "lu2021-text-tc"'):
    presets.preset("lu2021-text-tcc")


def test_bad_toml_and_missing_files_are_config_errors(tmp_path):
  bad = tmp_path / "bad.toml"
  bad.write_text("[train]\nlr = = 0.1\n")
  with pytest.raises(ConfigError, match="not valid TOML"):
    config.load(bad)
  with pytest.raises(ConfigError, match="does not exist"):
    config.load(tmp_path / "missing.toml")


# A bad argument of each layer's own configs: (constructor, kwargs, the argument it names).
def _lower_layer_cases():
  from attndyn import dynamics
  from attndyn import models
  from attndyn import tasks
  from attndyn.models import seq2seq, transformer_tagger
  from attndyn.tasks.copying import CopyingConfig
  lu = {"n_words": 10, "n_classes": 2}
  return [
      (tasks.TopicTaskConfig, {"n_topics": 1}, "n_topics"),
      (tasks.MarkovPairsConfig, {"sentence_length": 1}, "sentence_length"),
      (CopyingConfig, {"distribution": "perm"}, "distribution"),
      (models.LuModelConfig, {**lu, "classifier": "cnn"}, "classifier"),
      (models.LuModelConfig, {**lu, "query_std": 0.0}, "query_std"),
      (models.CNNAttentionConfig, {**lu, "conv_bias": 1}, "conv_bias"),
      (seq2seq.Seq2SeqConfig, {"src_vocab": 5, "tgt_vocab": 5, "attention": "x"}, "attention"),
      (transformer_tagger.TaggerConfig, {"n_words": 5, "n_pos": 3, "n_tags": 3, "block": "x"},
       "block"),
      (dynamics.TrainConfig, {"lr": -1.0}, "lr"),
      (dynamics.TrainConfig, {"steps": 101, "record_every": 25}, "steps"),
  ]


@pytest.mark.parametrize("make, kwargs, field", _lower_layer_cases(),
                         ids=lambda x: getattr(x, "__name__", None))
def test_lower_layers_name_their_own_arguments_not_toml_paths(make, kwargs, field):
  with pytest.raises(ConfigError) as err:
    make(**kwargs)
  assert err.value.field == field
  assert str(err.value).startswith(f"{field} = "), str(err.value)
  assert not any(f"{s}." in str(err.value) for s in ("task", "model", "train", "ode", "sweep"))


def test_the_config_layer_names_the_toml_path_and_the_related_fields():
  with pytest.raises(ConfigError) as err:
    _quick("train.steps=101", "train.record_every=25")
  assert str(err.value) == ("train.steps = 101 is not allowed: a multiple of "
                            "train.record_every = 25.")
  assert err.value.field == "train.steps"


@pytest.mark.parametrize("item, expected", [
    ("cnn.task.n_topics=1", "cnn.task.n_topics = 1 is not allowed: an integer >= 2."),
    ("cnn.model.query_std=0", "cnn.model.query_std = 0"),
    ("cnn.steps=110", "cnn.steps = 110 is not allowed: a multiple of cnn.record_every = 20."),
])
def test_a_reproduction_setting_is_named_by_its_own_path_before_anything_runs(item, expected):
  from attndyn.reproduce import runner
  from attndyn.reproduce.lu2021 import cnn
  with pytest.raises(ConfigError) as err:
    runner.settings_for(cnn, quick=True, items=[item])
  assert str(err.value).startswith(expected), str(err.value)


def test_results_reads_back_the_odes_each_kind_solves():
  """analysis.results' copy of the kind -> ODEs table (analysis does not import attndyn) is
  attndyn.config's."""
  from attndyn.analysis import results
  from attndyn import config
  assert set(results._ODE_KINDS) == set(config.ODE_KINDS)
  for kind in config.ODE_KINDS:
    assert results._ODE_KINDS[kind] == config.ODEConfig(kind=kind).kinds, kind
