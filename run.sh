#!/usr/bin/env bash
# scribe-spark launcher.
#   ./run.sh                       set up the environment if missing, run the quick tour
#   ./run.sh test [PYTEST ARGS]    run the test suite
#   ./run.sh EXPERIMENT [--conf FILE] [--out DIR] [--set key=value ...] [--master URL] [--resume] [--pdf] [--debug]
#   ./run.sh cluster start|stop|status   a Spark standalone master + 2 workers on 127.0.0.1
#   ./run.sh package               build the --py-files zip of the library (prints its path)
#   ./run.sh docs                  build the docs site into data/site/ (offline)
#   ./run.sh list                  list the experiments
#   ./run.sh reproduce [--out DIR] [--published FILE.csv] [--confs DIR] [--resume] [--metrics] [--master URL] [--pdf]
#                                  every paper-scale setup, then the paper-vs-simulation report
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.scribe-spark-installed"

die() { echo "run.sh: $*" >&2; exit 1; }
bad_input() { echo "run.sh: $*" >&2; exit 2; }   # as the jobs' own check: one line, exit 2

find_python() {
  for py in python3.11 python3.12 python3.13 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  die "Python 3.11 or newer is required (python3.11 not found)"
}

check_java() {
  local java="java"
  [ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
  command -v "$java" >/dev/null 2>&1 || die "Java 17+ is required by Spark but no 'java' was found. Install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
  local ver major
  ver=$("$java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
  major=${ver%%.*}
  [ "$major" = "1" ] && major=$(echo "$ver" | cut -d. -f2)
  [[ "$major" =~ ^[0-9]+$ ]] && [ "$major" -ge 17 ] || die "Java 17+ is required by Spark 4; found version '$ver'. Install openjdk-17 or newer, or point JAVA_HOME at it."
}

ensure_env() {
  local want
  want=$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)
  if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    return 0
  fi
  local py; py=$(find_python)
  if [ ! -x "$VENV/bin/python" ]; then
    echo "run.sh: creating $VENV with $py" >&2
    "$py" -m venv "$VENV"
  fi
  echo "run.sh: installing scribe-spark and its pinned dependencies into .venv (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[test]"
  echo "$want" > "$STAMP"
}

setup() {
  check_java
  ensure_env
  export PYSPARK_PYTHON="$VENV/bin/python"
  export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
  export PATH="$VENV/bin:$PATH"
}

experiments() { for f in jobs/*.py; do [ "$f" = jobs/tour.py ] || basename "$f" .py; done; }

run_experiment() {
  local name="$1"; shift
  [ -f "jobs/$name.py" ] || bad_input "unknown experiment '$name' (available: $(experiments | tr '\n' ' '))"
  local master="local[*]" debug=0 args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --master) [ $# -ge 2 ] || bad_input "--master needs a URL"; master="$2"; shift 2 ;;
      --master=*) master="${1#--master=}"; shift ;;
      --debug) debug=1; args+=("$1"); shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  # every parameter and SCRIBE_* knob, the master and the output folder are checked before the JVM
  # starts (exit 2: bad input; 5 and 6: the master; 10: nothing to run, as --resume found the run
  # already complete or --help was asked)
  local rc=0
  SCRIBE_MASTER="$master" "$VENV/bin/python" -m scribe_spark.cli check "$name" ${args[@]+"${args[@]}"} || rc=$?
  [ $rc -eq 10 ] && return 0
  [ $rc -eq 0 ] || exit $rc
  submit "$debug" "$master" "jobs/$name.py" ${args[@]+"${args[@]}"} || exit $?
}

# A run ends in one line. SIGINT (Ctrl-C) or SIGTERM sent to this script is passed on to the job's
# Python driver, which leaves its folder resumable and says so in one line through $dir/status; a
# second signal kills the job at once (kill -9 of the whole group does too). Without --debug, the job's
# stderr shows only our own lines ("<job>: error: ...", "<job>: warning: ..."): Spark's log lines, and
# the tracebacks its workers print as they are stopped, are not for a user to read. Progress goes to
# stdout (Spark hands the Python driver's stdout and stderr to its own stdout).
submit() {  # submit DEBUG MASTER SCRIPT [ARGS...]
  local debug="$1" master="$2"; shift 2
  local extra=()
  case "$master" in
    local*) ;;
    *)  # executors may be on other machines: ship the library with the job
        extra+=(--py-files "$(package_library)" --executor-memory "${SCRIBE_EXECUTOR_MEMORY:-3g}") ;;
  esac
  # the job's pid and its last line come back through this folder: beside the outputs' disk, not in
  # /tmp, which may be the very disk (Spark's local folder) whose filling the line reports
  mkdir -p "$ROOT/data/run"
  local dir; dir=$(mktemp -d "$ROOT/data/run/scribe-run.XXXXXX")
  mkfifo "$dir/stderr"
  if [ "$debug" = 1 ]; then (trap '' INT; exec cat <"$dir/stderr" >&2) &
  else (trap '' INT; exec grep --line-buffered -E '^[A-Za-z_.]+: (error|warning): ' <"$dir/stderr" >&2) &
  fi
  local filter=$! signals=0 signal="" job=""
  forward() {
    signal="$1"; signals=$((signals + 1))
    [ -n "$job" ] || return 0    # not started yet: it is not started at all (below)
    local driver=""; [ -s "$dir/driver.pid" ] && driver=$(cat "$dir/driver.pid")
    if [ $signals -gt 1 ]; then kill -KILL "$job" $driver 2>/dev/null || true
    elif [ -n "$driver" ]; then kill "-$signal" "$driver" 2>/dev/null || true
    else kill -TERM "$job" 2>/dev/null || true; fi
  }
  trap 'forward INT' INT
  trap 'forward TERM' TERM
  local rc=0
  if [ -z "$signal" ]; then
    SCRIBE_RUN_DIR="$dir" SCRIBE_MASTER="$master" spark-submit --master "$master" ${extra[@]+"${extra[@]}"} \
      --driver-memory "${SCRIBE_DRIVER_MEMORY:-8g}" \
      --conf spark.ui.showConsoleProgress=false \
      --conf spark.sql.shuffle.partitions="${SCRIBE_SHUFFLE_PARTITIONS:-${SHUFFLE_DEFAULT:-8}}" \
      --driver-java-options "-Dlog4j.configurationFile=file:$ROOT/conf/spark/log4j2.properties ${JAVA_QUICK:-}" \
      "$@" 2>"$dir/stderr" &
    job=$!
    while kill -0 "$job" 2>/dev/null; do
      wait "$job" 2>/dev/null || true    # returns early when a signal comes: forward() has run
    done
    wait "$job" || rc=$?                 # the job's own status, whatever ended the waits above
  else
    : >"$dir/stderr" &                   # nothing started: let the filter see the end of its input
  fi
  wait "$filter" 2>/dev/null || true
  trap - INT TERM
  local how=SIGTERM; [ "$signal" = INT ] && how=Ctrl-C
  if [ -s "$dir/status" ]; then
    rc=$(head -n 1 "$dir/status")
    tail -n +2 "$dir/status" >&2   # the job's line: how it ended and what to do
  elif [ -n "$signal" ] && { [ -z "$job" ] || [ ! -s "$dir/driver.pid" ]; }; then
    echo "run.sh: stopped by $how before the run started; nothing was written" >&2
    rc=$((128 + $(kill -l "$signal")))
  elif [ -n "$signal" ]; then
    echo "run.sh: stopped by $how$([ $signals -gt 1 ] && echo ", then killed at once"); if its first" \
         "progress line named a --resume command, that continues it" >&2
    rc=$((128 + $(kill -l "$signal")))
  elif [ $rc -eq 137 ]; then
    echo "run.sh: the job was killed (SIGKILL), most often by the system for lack of memory; the" \
         "--resume command its first line named continues it" >&2
    rc=3
  elif [ $rc -ne 0 ]; then
    echo "run.sh: spark-submit ended with exit $rc before the job could say why; rerun with --debug" \
         "to see Spark's output" >&2
  fi
  rm -rf "$dir"
  return $rc
}

package_library() {
  # zip of the scribe_spark package for --py-files (rebuilt each submit; it is small)
  local zip="$ROOT/data/build/scribe_spark.zip"
  mkdir -p "$ROOT/data/build"
  rm -f "$zip"
  (cd "$ROOT" && "$VENV/bin/python" -c 'import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(pathlib.Path("scribe_spark").rglob("*.py")):
        z.write(f)' "$zip")
  echo "$zip"
}

# -- local standalone cluster ------------------------------------------------------------------
# SCRIBE_CLUSTER_DIR (default data/cluster), SCRIBE_CLUSTER_PORT (7077), SCRIBE_CLUSTER_WEBUI
# (8080; 0 = any free port), SCRIBE_WORKER_MEMORY (4g) and SCRIBE_WORKER_CORES (1) per worker.
CLUSTER_DIR="${SCRIBE_CLUSTER_DIR:-$ROOT/data/cluster}"
CLUSTER_PORT="${SCRIBE_CLUSTER_PORT:-7077}"
CLUSTER_URL="spark://127.0.0.1:$CLUSTER_PORT"

spark_home() { "$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

launch() {  # launch NAME CLASS ARGS...: a daemon with its log and pid file under CLUSTER_DIR
  local name="$1" cls="$2"; shift 2
  SPARK_LOG_DIR="$CLUSTER_DIR" SPARK_WORKER_DIR="$CLUSTER_DIR/work-$name" \
    setsid nohup "$(spark_home)/bin/spark-class" "$cls" "$@" >"$CLUSTER_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$CLUSTER_DIR/$name.pid"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit="$1" what="$2"; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $end ] || { cluster_stop >/dev/null 2>&1; die "cluster: timed out after ${limit}s waiting for $what (logs in $CLUSTER_DIR)"; }
    sleep 1
  done
}

master_up() { (exec 3<>"/dev/tcp/127.0.0.1/$CLUSTER_PORT") 2>/dev/null; }
workers_up() { [ "$(grep -c 'Registering worker' "$CLUSTER_DIR/master.log" 2>/dev/null)" -ge 2 ]; }

cluster_start() {
  "$VENV/bin/python" -m scribe_spark.cli env cluster || exit $?
  mkdir -p "$CLUSTER_DIR"
  if alive "$CLUSTER_DIR/master.pid"; then
    echo "cluster: already running at $CLUSTER_URL (./run.sh cluster stop first)"; return 0
  fi
  master_up && die "cluster: port $CLUSTER_PORT is already in use by another process; set SCRIBE_CLUSTER_PORT"
  launch master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$CLUSTER_PORT" \
    --webui-port "${SCRIBE_CLUSTER_WEBUI:-8080}"
  wait_for 90 "the master on port $CLUSTER_PORT" master_up
  for i in 1 2; do
    mkdir -p "$CLUSTER_DIR/work-worker$i"
    launch "worker$i" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 \
      --cores "${SCRIBE_WORKER_CORES:-1}" --memory "${SCRIBE_WORKER_MEMORY:-4g}" \
      --work-dir "$CLUSTER_DIR/work-worker$i" --webui-port 0 "$CLUSTER_URL"
  done
  wait_for 90 "2 workers to register" workers_up
  echo "cluster: master $CLUSTER_URL with 2 workers (logs and pids in $CLUSTER_DIR)"
  echo "cluster: submit with ./run.sh EXPERIMENT --master $CLUSTER_URL; stop with ./run.sh cluster stop"
}

cluster_stop() {
  local stopped=0 pidf pid
  for pidf in "$CLUSTER_DIR"/worker*.pid "$CLUSTER_DIR"/master.pid; do
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      stopped=$((stopped + 1))
    fi
    rm -f "$pidf"
  done
  echo "cluster: stopped $stopped process(es)"
}

cluster_status() {
  local pidf any=0
  for pidf in "$CLUSTER_DIR"/master.pid "$CLUSTER_DIR"/worker*.pid; do
    [ -f "$pidf" ] || continue
    any=1
    if alive "$pidf"; then echo "$(basename "$pidf" .pid): running (pid $(cat "$pidf"))"
    else echo "$(basename "$pidf" .pid): not running (stale pid file)"; fi
  done
  [ $any -eq 1 ] || echo "cluster: not started"
}

ensure_chromium() {  # the run page's test renders it in Chromium: Debian's package, installed where missing
  command -v chromium >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    echo "run.sh: installing Chromium from the system packages (for the run page's browser test)" >&2
    { apt-get install -y -q --no-install-recommends chromium || { apt-get update -q && \
      apt-get install -y -q --no-install-recommends chromium; }; } >/dev/null 2>&1 && return 0
  fi
  echo "run.sh: no Chromium here and it could not be installed: the browser test is skipped" >&2
}

quick_tour() {
  local out="data/out/quick-$(date +%Y%m%d-%H%M%S)"
  local title="scribe-spark quick tour ($(basename "$out"))"
  local start=$SECONDS rc=0
  # every job's parameters checked first, then all jobs in one Spark session (scribe_spark/cli/tour.py)
  "$VENV/bin/python" -m scribe_spark.cli check-tour "$out" || exit $?
  # the tour's jobs are small: Spark planning and the JVM's start-up compilation dominate them, so the
  # JVM compiles quickly only and shuffles go to 2 partitions (the tables do not depend on either)
  SHUFFLE_DEFAULT=2 JAVA_QUICK="-XX:TieredStopAtLevel=1" submit 0 "local[*]" jobs/tour.py "$out" "$title" \
    || exit $?
  echo
  echo "Quick tour finished in $((SECONDS - start))s. Outputs under $out:"
  find "$out" -maxdepth 2 \( -name '*.png' -o -name '*.csv' -o -name 'summary.md' \) | sort | sed 's/^/  /'
  echo "Every summary, plot and table on one page: $out/index.html"
}

cmd="${1:-tour}"
case "$cmd" in
  -h|--help|help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
setup
[ "$cmd" = list ] && exec "$VENV/bin/python" -m scribe_spark.experiments.registry
case "$cmd" in
  tour) quick_tour ;;
  reproduce) shift; exec "$VENV/bin/python" -m scribe_spark.reproduce "$@" ;;
  package) package_library ;;   # the --py-files zip for non-local masters (prints its path)
  docs)   # the docs as a static site in data/site/, built offline
    "$VENV/bin/python" -m mkdocs build --strict --quiet --site-dir "$ROOT/data/site" || exit 1
    echo "run.sh: docs built; open $ROOT/data/site/index.html" ;;
  cluster)
    case "${2:-}" in
      start) cluster_start ;;
      stop) cluster_stop ;;
      status) cluster_status ;;
      *) bad_input "usage: ./run.sh cluster start|stop|status" ;;
    esac ;;
  test)
    shift
    "$VENV/bin/ruff" check . || { echo "run.sh: ruff found problems (see above); fix them before the tests run" >&2; exit 1; }
    ensure_chromium
    set +e
    "$VENV/bin/python" -m pytest "$@"
    rc=$?
    set -e
    [ $rc -eq 5 ] && { echo "run.sh: pytest collected no tests" >&2; exit 1; }
    exit $rc ;;
  *) shift; run_experiment "$cmd" "$@" ;;
esac
