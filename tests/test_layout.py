"""The library's layers: protocols never reach into workloads, experiments, oracles or the job machinery."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "scribe_spark"
PROTOCOLS = ("pastry", "scribe", "tno")
# what a protocol may not import: what experiments feed it, the experiments, the test oracles, the jobs'
# parameters, command line, registry and reports
ABOVE_PROTOCOLS = ("workloads", "experiments", "reference", "config", "loader", "capacity", "cli", "report",
                   "papers", "reproduce", "docgen")


def imported(path: Path) -> set[str]:
    """Every scribe_spark module a file imports: at top level, inside a function, or, in a file that
    imports `importlib`, named in a string (a constant, or an f-string's constant start)."""
    out, tree = set(), ast.parse(path.read_text())
    by_name = any(isinstance(n, (ast.Import, ast.ImportFrom)) and "importlib" in
                  ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
                  for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif by_name and isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value.strip().split(":")[0])
        elif by_name and isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0],
                                                                                        ast.Constant):
            out.add(str(node.values[0].value).rstrip("."))
    return {m for m in out if m.startswith("scribe_spark.") and " " not in m}


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


def _layer_graph() -> dict[str, set[str]]:
    """Which top-level parts of the library import which others (a part's imports of itself aside)."""
    graph: dict[str, set[str]] = {}
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(PACKAGE).with_suffix("")
        if rel.parts[0] == "__init__":
            continue
        graph.setdefault(rel.parts[0], set()).update(layer(m) for m in imported(f))
    return {part: deps - {part} for part, deps in graph.items()}


def test_the_parts_of_the_library_import_each_other_in_one_direction():
    graph = _layer_graph()
    cycles, done, path = [], set(), []

    def visit(node: str) -> None:
        if node in path:
            cycles.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            visit(dep)
        path.pop()
        done.add(node)
    for node in sorted(graph):
        visit(node)
    assert cycles == []


def test_experiments_never_import_the_run_machinery_and_config_nothing_above_it():
    graph = _layer_graph()
    assert "cli" not in graph["experiments"]
    assert graph["config"] <= {"knobs", "laws", "sessions", "sizes", "topology"}


def test_a_module_named_in_a_string_is_an_edge(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('import importlib\nJOB = "scribe_spark.experiments.churn"\n'
                 'def g(x):\n    return importlib.import_module(f"scribe_spark.cli.{x}")\n')
    assert {layer(m) for m in imported(f)} == {"experiments", "cli"}
