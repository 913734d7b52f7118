"""The README documents every parameter a job takes, in that job's own section."""
import dataclasses
import re

import pytest

from scribe_spark import registry
from tests.helpers import ROOT


@pytest.mark.parametrize("name", sorted(registry.JOBS))
def test_every_parameter_of_a_job_is_named_in_its_section(name):
    sections = re.split(r"^## ", (ROOT / "README.md").read_text(), flags=re.M)
    own = [s for s in sections if f"`{name}`" in s.split("\n", 1)[0]]
    assert own, f"no README section titled with `{name}`"
    text = "\n".join(own)
    missing = [f.name for f in dataclasses.fields(registry.JOBS[name].params)
               if f"`{f.name}`" not in text and f"`[{f.name}]`" not in text]
    assert not missing, f"README's section on {name} does not name {missing}"


TABLE_ROW = re.compile(r"^\| `([a-z_]+)` \| `([^`]*)` \|", re.M)   # | `key` | `default` | meaning |


@pytest.mark.parametrize("name", sorted(set(registry.JOBS) - {"scribe_small_groups"}))   # S1's table
def test_the_defaults_a_parameter_table_gives_are_what_the_job_runs_with(name):
    import tomllib
    sections = re.split(r"^## ", (ROOT / "README.md").read_text(), flags=re.M)
    text = "\n".join(s for s in sections if f"`{name}`" in s.split("\n", 1)[0])
    conf = tomllib.loads((ROOT / "conf" / f"{name}.toml").read_text())
    fields = {f.name: f for f in dataclasses.fields(registry.JOBS[name].params)}
    for key, shown in TABLE_ROW.findall(text):
        assert key in fields, f"README's {name} table names `{key}`, which the job does not take"
        runs = conf.get(key, fields[key].default)
        runs = list(runs) if isinstance(runs, tuple) else runs
        assert tomllib.loads(f"v = {shown}")["v"] == runs, (name, key, shown, runs)
