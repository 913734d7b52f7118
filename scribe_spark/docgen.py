"""The docs' tables that the code declares: each experiment's parameters and outputs, and the SCRIBE_* knobs.

A page holds a generated block between `<!-- generated: KIND NAME -->` and `<!-- end generated -->`;
`python -m scribe_spark.docgen` rewrites every block under docs/ from the declarations, and
`--check` (run by the tests) names the blocks that differ, so the pages cannot drift from the code.
KIND is `parameters` or `outputs` (NAME an experiment) or `environment` (NAME `knobs`).
"""
from __future__ import annotations

import re
import sys
import tomllib
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from scribe_spark import loader
from scribe_spark.cli.args import project_root
from scribe_spark.experiments.registry import JOBS
from scribe_spark.knobs import Knob, declared, default_of

BLOCK = re.compile(r"(<!-- generated: (\w+) (\w+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def parameters(name: str) -> str:
    """The parameter table of experiment `name`: key, default (its conf/ file's), unit, values, meaning."""
    job = JOBS[name]
    conf = tomllib.loads((project_root() / "conf" / f"{name}.toml").read_text())
    rows = ["| key | default | unit | values | meaning |", "|---|---|---|---|---|"]
    rows += _rows(job.params, conf, "")
    return "\n".join(rows) + "\n"


def _rows(cls: type, conf: dict, at: str) -> list[str]:
    hints, knobs, out = typing.get_type_hints(cls), declared(cls), []
    own = getattr(cls, "__annotations__", {})
    # the experiment's own knobs first, then those it shares (Pastry's, the topic workload's), tables last
    order = sorted(fields(cls), key=lambda f: (is_dataclass(hints[f.name]), f.name not in own))
    for f in order:
        k: Knob = knobs[f.name]
        if is_dataclass(hints[f.name]):
            out.append(f"| `[{at}{f.name}]` | | | | {_cell(k.doc)} |")
            out += _rows(hints[f.name], conf.get(f.name, {}), f"{at}{f.name}.")
            continue
        value = conf.get(f.name, default_of(f))
        allowed = k.bounds()
        if k.only_with:
            allowed = "; ".join(filter(None, [allowed, f"only with {k.only_with[0]} = {k.only_with[1]!r}"]))
        out.append(f"| `{at}{f.name}` | `{_toml(value)}` | {k.unit} | {_cell(allowed)} | {_cell(k.doc)} |")
    return out


def _toml(value: Any) -> str:
    return loader._toml_value(tuple(value) if isinstance(value, list) else value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def outputs(name: str) -> str:
    """The tables experiment `name` writes: one heading and one column table each."""
    out = []
    for table in JOBS[name].outputs.values():
        out += [f"**`{table.file}`** — {_cell(table.doc)}", "",
                "| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.unit} | {_cell(c.doc)} |" for c in table.columns]
        out.append("")
    return "\n".join(out)


def environment(_: str) -> str:
    """The SCRIBE_* knobs: name, default, who reads it and what it sets."""
    from scribe_spark.cli.environment import KNOBS
    scope = {"job": "every run", "cluster-job": "runs on a cluster master", "cluster": "`./run.sh cluster`"}
    rows = ["| variable | default | read by | meaning |", "|---|---|---|---|"]
    rows += [f"| `{k.name}` | `{k.default}` | {scope[k.scope]} | {_cell(k.doc)} |" for k in KNOBS.values()]
    return "\n".join(rows) + "\n"


MAKERS = {"parameters": parameters, "outputs": outputs, "environment": environment}


def regenerate(text: str) -> str:
    """`text` with every generated block made anew."""
    return BLOCK.sub(lambda m: m[1] + MAKERS[m[2]](m[3]) + m[5], text)


def pages() -> list[Path]:
    """Every Markdown page that may hold generated blocks."""
    root = project_root()
    return sorted((root / "docs").rglob("*.md")) + [root / "README.md"]


def stale() -> list[str]:
    """The pages whose generated blocks differ from what the declarations give."""
    return [str(p.relative_to(project_root())) for p in pages() if regenerate(p.read_text()) != p.read_text()]


def main(argv: list[str]) -> int:
    """Rewrite the generated blocks (or, with --check, name the stale pages and return 1)."""
    if argv == ["--check"]:
        old = stale()
        for page in old:
            print(f"{page}: generated tables differ from the code; run python -m scribe_spark.docgen")
        return 1 if old else 0
    for page in pages():
        text = page.read_text()
        new = regenerate(text)
        if new != text:
            page.write_text(new)
            print(f"rewrote {page.relative_to(project_root())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
