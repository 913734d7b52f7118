"""The library's layers: protocols never reach into workloads, experiments, oracles or the job machinery."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "scribe_spark"
PROTOCOLS = ("pastry", "scribe", "tno")
# what a protocol may not import: what experiments feed it, the experiments, the test oracles, the jobs'
# parameters, command line, registry and reports
ABOVE_PROTOCOLS = ("workloads", "experiments", "reference", "config", "loader", "capacity", "cli", "registry",
                   "report", "papers", "reproduce")


def imported(path: Path) -> set[str]:
    """Every scribe_spark module a file imports, at top level or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("scribe_spark.")}


def layer(module: str) -> str:
    """The top-level part of the library a module belongs to (`pastry`, `config`, ...)."""
    return module.split(".")[1]


@pytest.mark.parametrize("folder", PROTOCOLS)
def test_protocols_import_no_workload_experiment_oracle_or_job_code(folder):
    files = sorted((PACKAGE / folder).glob("*.py"))
    assert files
    wrong = {f"{f.name} -> {m}" for f in files for m in imported(f) if layer(m) in ABOVE_PROTOCOLS}
    assert wrong == set()


@pytest.mark.parametrize("folder", ["workloads", "reference"])
def test_workloads_and_oracles_import_no_experiment(folder):
    wrong = {f"{f.name} -> {m}" for f in sorted((PACKAGE / folder).glob("*.py")) for m in imported(f)
             if layer(m) in ("experiments", "cli", "registry")}
    assert wrong == set()


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from scribe_spark.experiments import churn\n")
    assert layer(sorted(imported(f))[0]) == "experiments"
