"""Named configurations in TOML shape: the paper's text, the authors' code, and a quick demo.

``lu2021-text-{fc,tc,tl}`` follow Section 5.1 of the paper: J = 4 topics of 2
topic words, M = 5000 non-topic words, m = 20 per sentence, 800 training and
200 test sentences, d = d' = 15, embeddings of variance σ²/d = 1e-6 (std 1e-3),
zero keys (every score starts at 0), a fixed query of unit norm (so the paper's
``v = ‖q‖ν`` is ``ν``), FC's U with orthonormal columns, full-batch gradient
descent with lr 0.1 for 5000 epochs, five init seeds.

``lu2021-code-{fc,tc,tl}`` follow the authors' PyTorch code instead,
github.com/haoyelyu/On_the_Dynamics_of_Training_Attention_Models (read at
commits 9a5e599 / 2f7d5cc), which differs from the text:

* ``exp_config/model_config_{FC,TC,TL}.txt``: ``dimEmb = dimKey = dimQuery = 10``,
  ``embVar = 1e-6``, ``queryVar = 0.3``; ``models/model_parts.py`` passes both
  to ``normal_(0, ·)``, i.e. as standard deviations: ``embed_std = 1e-6``,
  ``query_std = 0.3`` (no rescaling), keys ``uniform_(0, 0)`` (zero);
  ``ClassifyTopic_FC`` is ``torch.randn(d, J).fill_diagonal_(1)`` (fixed);
  TL's hidden width is 10.
* ``exp_config/dataset_config.txt``: ``numSample = 5000``,
  ``nonTopicWordVocSize = 5000``, ``numNonTopicWordPerSent = 20``, 4 uniform
  topics; ``data_gen.py`` gives each topic 2 topic words.
  ``auxilaries/auxilary_function.py`` splits at
  ``floor(int((5000 - 1) * r))`` for ``partition = [0.8, 0.81, 1]``: sentences
  ``[0, 3999)`` train, ``[3999, 4049)`` validation (unused by the synthetic
  experiment), ``[4049, 4999)`` test, so ``n_train = 3999`` and ``n_test = 950``.
* ``exp_config/train_config.txt``: 5000 epochs of full-batch SGD (``torch.optim.SGD``
  on the whole training set), lr 0.1, query fixed, keys and embeddings trained.
* The code seeds torch once, so every run uses the same query, ``‖q‖ = 1.1967``: the
  presets share one query among all seeds (``query_seed = 0``) rescaled to that norm
  (``query_norm``); its direction is JAX's draw, which with zero keys does not enter the
  dynamics (a score moves by ``τ‖q‖²g_w``). Per-seed queries (``‖q‖`` ≈ 0.95 on average,
  learning slower by about ``(1.2/0.95)²``): ``--set model.query_seed=none --set
  model.query_norm=none``.

``quick`` is a small, fast version of the text's TC setup (M = 500, m = 10,
200/100 sentences, 1500 epochs, 3 seeds, both ODEs) for the README and tests.
"""
import copy

from attndyn.tasks.errors import ConfigError
from attndyn.schema import suggest

__all__ = ["AUTHORS_QUERY_NORM", "PRESETS", "names", "describe", "preset", "paper_config"]

_TEXT_TASK = {"kind": "topic", "n_topics": 4, "words_per_topic": 2, "vocab_size": 5000,
              "n_nontopic": 20, "n_train": 800, "n_test": 200}
_TEXT_MODEL = {"embed_dim": 15, "key_dim": 15, "fc_init": "orthonormal", "hidden_dim": 10,
               "embed_std": 1e-3, "key_std": 0.0, "query_std": 1.0, "query_norm": 1.0,
               "train_query": False, "freeze": []}
_GD = {"optimizer": "gd", "lr": 0.1, "steps": 5000, "record_every": 50}
_ODE = {"kind": "both", "form": "lemma2", "solver": "tsit5", "rtol": 1e-6, "atol": 1e-9}

_CODE_TASK = {**_TEXT_TASK, "n_train": 3999, "n_test": 950}
# The authors' code seeds torch once, so every run of it trains with the same query, of norm
# 1.1967 (std 0.3, d' = 10; docs/usage.md, Presets): one query shared by all seeds
# (query_seed) rescaled to that norm. Per-seed draws: model.query_seed = model.query_norm = none.
AUTHORS_QUERY_NORM = 1.1967
_CODE_MODEL = {"embed_dim": 10, "key_dim": 10, "fc_init": "randn_unit_diag", "hidden_dim": 10,
               "embed_std": 1e-6, "key_std": 0.0, "query_std": 0.3,
               "query_norm": AUTHORS_QUERY_NORM, "query_seed": 0,
               "train_query": False, "freeze": []}

_NAMES = {"fc": "Attn-FC (fixed linear classifier)", "tc": "Attn-TC (trainable linear)",
          "tl": "Attn-TL (trainable 2-layer MLP)"}


# TL's ReLU kinks make the adaptive solver take many short steps, so its ODEs get a larger
# step budget (with diffrax's default the text-TL solves stop early, as max_steps). Where the
# flow slides along a kink the controller stalls; a floor of a tenth of a GD step (dtmin)
# lets it step over, at an error far below the GD-vs-ODE tolerance (the synthetic
# reproduction's rows judge what remains). The kinks, where the field is not smooth and a
# higher order buys nothing, set the step size, so TL steps with Bogacki-Shampine 3(2): 3 new
# evaluations of the field a step against Tsit5's 6 (`python -m benchmarks.tl_solver`
# measures both on this preset).
_TL_ODE = {"max_steps": 400_000, "dtmin": 0.1, "solver": "bosh3"}


def _preset(task, model, classifier, seeds, **extra) -> dict:
  ode = dict(_ODE, **(_TL_ODE if classifier == "tl" else {}))
  return {"precision": "float32", "task": dict(task),
          "model": {**model, "classifier": classifier}, "train": dict(_GD),
          "sweep": {"seeds": seeds, "data_seeds": [0]}, "ode": ode, **extra}


PRESETS = {}
for _c in ("fc", "tc", "tl"):
  PRESETS[f"lu2021-text-{_c}"] = (
      f"{_NAMES[_c]}, the paper's text: d=15, embedding var 1e-6, unit query, 800/200, "
      f"GD lr 0.1 x 5000, 5 seeds, both ODEs",
      _preset(_TEXT_TASK, _TEXT_MODEL, _c, 5))
  PRESETS[f"lu2021-code-{_c}"] = (
      f"{_NAMES[_c]}, the authors' code: d=10, embedding std 1e-6, one query of norm "
      f"1.1967 for every seed, "
      f"{'randn U with unit diagonal, ' if _c == 'fc' else ''}3999/950, 5 seeds, both ODEs",
      _preset(_CODE_TASK, _CODE_MODEL, _c, 5))
PRESETS["quick"] = (
    "small, fast Attn-TC demo: M=500, m=10, 200/100, GD lr 0.1 x 1500, 3 seeds, both ODEs",
    {**_preset({**_TEXT_TASK, "vocab_size": 500, "n_nontopic": 10, "n_train": 200,
                "n_test": 100}, _TEXT_MODEL, "tc", 3),
     "train": {**_GD, "steps": 1500, "record_every": 25}})


def names() -> list:
  """Preset names in a stable order."""
  return sorted(PRESETS)


def describe(name: str) -> str:
  """The one-line description of a preset."""
  return PRESETS[_known(name)][0]


def preset(name: str, *, what: str = "preset") -> dict:
  """A fresh copy of a preset's TOML-shaped dict (edit it freely). ``what``: how an
  unknown name is called in the error (the CLI passes ``"--preset"``).

  Raises:
    ConfigError: no preset of that name (with a suggestion).
  """
  return copy.deepcopy(PRESETS[_known(name, what)][1])


def paper_config(name: str, **sections):
  """A preset as the typed configs Python code trains with: ``attndyn.config.RunConfig``.

  ``RunConfig.from_dict`` builds it as ``attndyn run --preset NAME`` does, so
  ``.task`` (:class:`tasks.TopicTaskConfig`), ``.model``
  (:class:`models.LuModelConfig`, its ``n_words``/``n_classes`` taken from the
  task), ``.train`` (:class:`dynamics.TrainConfig`) and ``.ode`` hold the
  paper's settings (``lu2021-text-*``: unit query norm, embedding std 1e-3, ...)
  rather than the config classes' own defaults.

  Args:
    name: a preset name (:func:`names`), e.g. ``"lu2021-text-tc"``.
    **sections: TOML-shaped overrides merged into the preset before validation:
      a dict per section (``train={"steps": 200}``, ``task={"vocab_size": 100}``)
      or a top-level value (``precision="float64"``).

  Returns:
    The validated ``attndyn.config.RunConfig``.

  Raises:
    ConfigError: an unknown preset, section or key, or a bad value.
  """
  from attndyn.config import RunConfig  # imports JAX; `attndyn presets` does not need it
  raw = preset(name)
  for section, value in sections.items():
    if isinstance(value, dict) and isinstance(raw.get(section), dict):
      raw[section] = {**raw[section], **value}
    else:
      raw[section] = value
  return RunConfig.from_dict(raw)


def _known(name: str, what: str = "preset") -> str:
  """``name``, or one line naming it as ``what`` (``preset`` in Python, ``--preset`` for the
  CLI)."""
  if name not in PRESETS:
    raise ConfigError(f"{what} {name!r} is not allowed.{suggest(name, PRESETS)} "
                      f"Allowed: {', '.join(names())} (see `attndyn presets`).")
  return name
