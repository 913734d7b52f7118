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
