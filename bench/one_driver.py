"""spark-submit script for bench/determinism.py and the tests: several jobs one after another in one driver.

    spark-submit [spark options] bench/one_driver.py OUT JOB [--set key=value ...] [-- JOB ...]

Each job runs on conf/tiny/<job>.toml with its overrides and writes to OUT/<job>; one JVM start-up for all.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scribe_spark import cli  # noqa: E402


def main(argv: list[str]) -> int:
    out, rest = argv[0], argv[1:]
    groups, current = [], []
    for a in rest + ["--"]:
        if a == "--":
            if current:
                groups.append(current)
            current = []
        else:
            current.append(a)
    for name, *sets in groups:
        rc = cli.main(name, ["--conf", str(ROOT / "conf" / "tiny" / f"{name}.toml"), "--out", out, *sets])
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
