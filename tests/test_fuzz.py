"""Fuzzing our own inputs: every declared parameter of every experiment, and every SCRIBE_* knob.

tests/fuzz_inputs.py makes the bad values from the declarations and checks each with the job's
pre-start check, in a process of its own so that the test can tell whether Spark was loaded.
"""
import json
import subprocess
import sys

from scribe_spark.cli.environment import KNOBS
from scribe_spark.experiments.registry import JOBS
from tests.helpers import ROOT


def test_every_bad_value_is_refused_in_one_line_within_3_s_without_spark(tmp_path):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "fuzz_inputs.py"), str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    *cases, last = rows
    assert last == {"spark_loaded": False}
    assert not out.exists()                                  # nothing written, by any case
    jobs = {r["job"] for r in cases if "job" in r}
    assert jobs == set(JOBS) and len(cases) > 1500
    assert {r["env"] for r in cases if "env" in r} == set(KNOBS) | {"SCRIBE_DRIVER_MEM"}
    wrong = []
    for r in cases:
        who = r.get("job", "pastry_hops") if r.get("env") not in KNOBS or KNOBS[r["env"]].scope != "cluster" \
            else "run.sh"
        named = r.get("key") or r.get("env")
        line = r["err"][0] if len(r["err"]) == 1 else ""
        if not (r["code"] == 2 and line.startswith(f"{who}: error: ") and named in line and r["secs"] < 3):
            wrong.append(r)
    assert wrong == []
