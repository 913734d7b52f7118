#!/usr/bin/env bash
# scribe-spark launcher.
#   ./run.sh                       set up the environment if missing, run the quick tour
#   ./run.sh test [PYTEST ARGS]    run the test suite
#   ./run.sh EXPERIMENT [--conf FILE] [--out DIR] [--set key=value ...] [--master URL]
#   ./run.sh list                  list the experiments
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.scribe-spark-installed"

die() { echo "run.sh: $*" >&2; exit 1; }

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

experiments() { for f in jobs/*.py; do basename "$f" .py; done; }

run_experiment() {
  local name="$1"; shift
  [ -f "jobs/$name.py" ] || die "unknown experiment '$name' (available: $(experiments | tr '\n' ' '))"
  local master="local[*]" args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --master) [ $# -ge 2 ] || die "--master needs a URL"; master="$2"; shift 2 ;;
      --master=*) master="${1#--master=}"; shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  spark-submit --master "$master" \
    --driver-memory "${SCRIBE_DRIVER_MEMORY:-8g}" \
    --conf spark.ui.showConsoleProgress=false \
    --conf spark.sql.shuffle.partitions="${SCRIBE_SHUFFLE_PARTITIONS:-8}" \
    --driver-java-options "-Dlog4j.configurationFile=file:$ROOT/conf/spark/log4j2.properties" \
    "jobs/$name.py" ${args[@]+"${args[@]}"}
}

quick_tour() {
  local out="data/out/quick-$(date +%Y%m%d-%H%M%S)"
  local start=$SECONDS
  for name in $(experiments); do
    [ -f "conf/quick/$name.toml" ] || continue
    echo "== $name (conf/quick/$name.toml)"
    run_experiment "$name" --conf "conf/quick/$name.toml" --out "$out"
  done
  echo
  echo "Quick tour finished in $((SECONDS - start))s. Outputs under $out:"
  find "$out" -maxdepth 2 \( -name '*.png' -o -name '*.csv' -o -name 'summary.md' \) | sort | sed 's/^/  /'
}

cmd="${1:-tour}"
case "$cmd" in
  -h|--help|help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  list) experiments; exit 0 ;;
esac
setup
case "$cmd" in
  tour) quick_tour ;;
  test)
    shift
    set +e
    "$VENV/bin/python" -m pytest "$@"
    rc=$?
    set -e
    [ $rc -eq 5 ] && { echo "run.sh: pytest collected no tests" >&2; exit 1; }
    exit $rc ;;
  *) shift; run_experiment "$cmd" "$@" ;;
esac
