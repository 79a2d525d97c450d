"""docs/usage.md's config reference is the one generated from the schema, and names every key."""
import dataclasses
import re

from attndyn import config, config_reference, schema


def _readme() -> str:
  return config_reference.REFERENCE.read_text(encoding="utf-8")


def test_usage_holds_the_generated_table():
  block = config_reference.readme_block(_readme())
  assert block, "docs/usage.md lost the config-reference markers"
  assert block == config_reference.block(), (
      "docs/usage.md's config reference differs from the schema's: run "
      "`python -m attndyn.config_reference --write`")


def test_every_key_the_schema_accepts_has_a_row():
  """Each row's key (top level, then under its **[section]** row) is exactly the schema's keys."""
  section, rows = "", []
  for line in config_reference.readme_block(_readme()).splitlines():
    if m := re.match(r"\| \*\*\[(\w+)\]\*\* \|", line):
      section = m.group(1)
    elif m := re.match(r"\| `(\w+)` \| (\S.*?) \| (\S.*) \|$", line):
      rows.append(f"{section}.{m.group(1)}" if section else m.group(1))
  expected = list(schema.TOP_LEVEL) + [f"{s}.{k}" for s, t in schema.SECTIONS.items() for k in t]
  assert rows == expected
  assert "model.normaliser" in rows


def test_the_schema_is_every_field_of_the_config():
  """A dataclass field missing from the schema (or the other way round) fails here too."""
  defaults = config.RunConfig.from_dict({}).to_dict()
  assert {k for k, v in defaults.items() if not isinstance(v, dict)} == set(schema.TOP_LEVEL)
  for section, table in schema.SECTIONS.items():
    assert set(defaults[section]) == set(table), section
  fields = {f.name for f in dataclasses.fields(config.RunConfig)}
  assert fields == set(schema.SECTIONS) | set(schema.TOP_LEVEL)


def test_every_field_has_a_documented_meaning():
  for key in config_reference.keys():
    section, _, name = key.rpartition(".")
    if key not in config_reference.NOT_A_FIELD:
      assert name in config_reference.attributes(config_reference.CLASSES[section]), key
    assert len(config_reference.meaning(key)) > 1, key
