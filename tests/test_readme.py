"""The README documents every parameter a job takes, in that job's own section, with its default."""
import dataclasses
import re
import tomllib

import pytest

from scribe_spark.experiments import registry
from tests.helpers import ROOT

TABLE_ROW = re.compile(r"^\| ([^|]+) \| ([^|]+) \|", re.M)   # | `key`, … | `default`, … | meaning |
CODE = re.compile(r"`([^`]*)`")


def _section(name: str) -> str:
    """The README's sections whose title names the job (S1 and S2 share one)."""
    sections = re.split(r"^## ", (ROOT / "README.md").read_text(), flags=re.M)
    own = [s for s in sections if f"`{name}`" in s.split("\n", 1)[0]]
    assert own, f"no README section titled with `{name}`"
    return "\n".join(own)


@pytest.mark.parametrize("name", sorted(registry.JOBS))
def test_every_parameter_of_a_job_is_named_in_its_section(name):
    text = _section(name)
    missing = [f.name for f in dataclasses.fields(registry.JOBS[name].params)
               if f"`{f.name}`" not in text and f"`[{f.name}]`" not in text]
    assert not missing, f"README's section on {name} does not name {missing}"


def _table_defaults(text: str) -> list[tuple[str, str]]:
    """(key, default as written) for each table row that gives as many backquoted defaults as keys."""
    pairs = []
    for keys, defaults in TABLE_ROW.findall(text):
        keys, defaults = CODE.findall(keys), CODE.findall(defaults)
        if keys and len(keys) == len(defaults) and not any(k.startswith("[") for k in keys):
            pairs += zip(keys, defaults)
    return pairs


@pytest.mark.parametrize("name", sorted(set(registry.JOBS) - {"scribe_small_groups", "churn"}))
def test_the_defaults_a_parameter_table_gives_are_what_the_job_runs_with(name):
    # S2's section shows S1's defaults; churn gives its defaults in prose
    conf = tomllib.loads((ROOT / "conf" / f"{name}.toml").read_text())
    fields = {f.name: f for f in dataclasses.fields(registry.JOBS[name].params)}
    pairs = _table_defaults(_section(name))
    assert pairs, f"README's section on {name} has no parameter table with defaults"
    for key, shown in pairs:
        assert key in fields, f"README's {name} table names `{key}`, which the job does not take"
        runs = conf.get(key, fields[key].default)
        runs = list(runs) if isinstance(runs, tuple) else runs
        assert tomllib.loads(f"v = {shown}")["v"] == runs, (name, key, shown, runs)
