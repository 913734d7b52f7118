"""README and the docs: a short README that points inside the repository, pages whose generated tables match
the code, and a site that builds with every link resolved."""
import re
import shutil
import subprocess
import sys

import pytest

from scribe_spark import docgen
from scribe_spark.experiments import registry
from tests.helpers import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_the_readme_is_short_and_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "./run.sh        #" in text and "./run.sh test   #" in text


def test_every_experiment_has_its_page_linked_from_the_readme():
    text = (ROOT / "README.md").read_text()
    for name in registry.JOBS:
        page = ROOT / "docs" / "experiments" / f"{name}.md"
        assert page.is_file() and f"(docs/experiments/{name}.md)" in text, name
        body = page.read_text()
        for kind in ("parameters", "outputs"):
            assert f"<!-- generated: {kind} {name} -->" in body, (name, kind)


def test_the_generated_tables_are_those_the_code_declares():
    assert docgen.stale() == []


PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
                              if "history" not in p.parts)]


@pytest.mark.parametrize("page", PAGES)
def test_nothing_a_user_reads_points_outside_the_repository(page):
    text = (ROOT / page).read_text()
    assert "../shared" not in text and "SPEC" not in text
    for target, _ in LINK.findall(text):
        if not re.match(r"^[a-z]+:", target):
            assert ((ROOT / page).parent / target).resolve().is_relative_to(ROOT), (page, target)
            assert ((ROOT / page).parent / target).exists(), (page, target)


@pytest.mark.skipif(shutil.which("mkdocs", path=str(ROOT / ".venv" / "bin")) is None and
                    shutil.which("mkdocs") is None, reason="mkdocs is not installed")
def test_the_docs_site_builds_with_every_link_resolved(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (tmp_path / "site" / "experiments" / "pastry_hops.html").is_file()
