"""Compare the tables of two runs folder by folder: the proof that a refactor kept behaviour.

    .venv/bin/python bench/compare_runs.py BEFORE AFTER

BEFORE and AFTER are output folders holding one subfolder per experiment (a quick tour's
`data/out/quick-<timestamp>`, or one experiment's `--out`). Every table (CSV bytes, Parquet
schema and rows; `timings.csv` aside) must be byte-identical and both sides must hold the
same experiments and tables. Prints one line per experiment; exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scribe_spark.report import comparable_tables  # noqa: E402


def compare(before: Path, after: Path) -> list[str]:
    """Return one line per experiment found on either side; 'DIFFER' starts a line that differs."""
    lines = []
    names = sorted({p.name for p in before.iterdir() if p.is_dir() and not p.name.startswith(".")}
                   | {p.name for p in after.iterdir() if p.is_dir() and not p.name.startswith(".")})
    for name in names:
        a, b = comparable_tables(before / name), comparable_tables(after / name)
        if not a and not b:
            lines.append(f"DIFFER {name}: no tables on either side")
            continue
        differ = sorted(t for t in a.keys() | b.keys() if a.get(t) != b.get(t))
        if differ:
            lines.append(f"DIFFER {name}: {', '.join(differ)}")
        else:
            lines.append(f"same   {name}: {len(a)} tables byte-identical")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    a = ap.parse_args()
    for d in (a.before, a.after):
        if not d.is_dir():
            print(f"compare_runs: {d} is not a folder", file=sys.stderr)
            return 2
    lines = compare(a.before, a.after)
    print("\n".join(lines))
    return 1 if any(line.startswith("DIFFER") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
