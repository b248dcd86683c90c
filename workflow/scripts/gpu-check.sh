#!/usr/bin/env bash
# `make gpu OUT=DIR`: every GPU path of Sylvie in one call, on a machine with CUDA, PyTorch, numba, numba-cuda and
# pyarrow and nothing else of ours (no DGL, no Snakemake, no network needed):
#   1. installs this checkout without dependencies (plus the wheels `make gpu-wheels` put in .whl/, for what the
#      machine lacks, into a folder of their own on PYTHONPATH),
#   2. runs the GPU test tier (pytest -m gpu on tests/test_gpu_*.py; each test bounded),
#   3. runs GAT on 2 ranks taken apart (benchmarks/gat_two_ranks.py) and the GPU benchmarks: benchmarks/lowbit.py
#      --device cuda, benchmarks/gather.py, benchmarks/gpu_epoch.py --profile, benchmarks/feature_store.py,
# each step bounded by `timeout`, the whole within GPU_CHECK_BUDGET_S seconds (default 470), and writes under DIR at
# most 9 files: summary.md (what ran, what was skipped and why, the tables, the wall time), setup.log,
# gpu-tests.log, simulator.log (no GPU only), gat-two-ranks.log, lowbit.log, gather.log, gpu-epoch.log,
# feature-store.log.
# Without a CUDA device it runs what the CPU allows (the CUDA simulator tests), reports every GPU test as skipped
# with its reason and the benchmarks as not run, and exits 0. Exit status: 1 if a step failed or ran out of time.
set -u -o pipefail

OUT=${1:?usage: gpu-check.sh OUT_DIR [PYTHON]}
PY=${2:-python3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUDGET=${GPU_CHECK_BUDGET_S:-470}
START=$(date +%s)
cd "$REPO" || exit 2
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
rm -f "$OUT"/summary.md "$OUT"/setup.log "$OUT"/gpu-tests.log "$OUT"/simulator.log "$OUT"/lowbit.log \
  "$OUT"/gather.log "$OUT"/gpu-epoch.log "$OUT"/feature-store.log "$OUT"/gat-two-ranks.log
SUMMARY=$OUT/summary.md
FAILED=0
export PYTHONUNBUFFERED=1

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - START )); }

# step NAME LIMIT_S LOG CMD...: run CMD bounded by LIMIT_S (or by what is left of the budget), output to LOG; one
# line of the step table (and 1 into FAILED on a failure or a timeout).
STEPS=()
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local left=$(( BUDGET - $(elapsed) ))
  (( limit > left )) && limit=$left
  if (( limit < 10 )); then
    STEPS+=("| $name | not run: the budget of ${BUDGET} s is spent | | |"); FAILED=1; return 1
  fi
  local t0; t0=$(date +%s)
  echo "== $name (at most ${limit} s): $*" | tee -a "$log"
  timeout -k 15 "$limit" "$@" >>"$log" 2>&1
  local rc=$? took=$(( $(date +%s) - t0 ))
  local what="ok"
  if (( rc == 124 || rc == 137 )); then what="TIMED OUT after ${limit} s"; FAILED=1
  elif (( rc != 0 )); then what="FAILED (exit $rc)"; FAILED=1; fi
  echo "== $name: $what in ${took} s" | tee -a "$log"
  STEPS+=("| $name | $what | ${took} s | $(basename "$log") |")
  return $rc
}

: >"$SUMMARY"
say "# make gpu: $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""

# ---- 1. install: the carried wheels (only where a module they bring is missing), then this checkout, no deps
SETUP=$OUT/setup.log
: >"$SETUP"
NEEDED="jsonschema pymetis yaml tqdm pyarrow numba torch pytest"
missing() { for m in $NEEDED; do "$PY" -c "import $m" >/dev/null 2>&1 || printf '%s ' "$m"; done; }
MISSING=$(missing)
WHEELS=""
if [ -n "$MISSING" ] && compgen -G ".whl/*.whl" >/dev/null; then
  SITE=${GPU_CHECK_SITE:-${TMPDIR:-/tmp}/sylvie-gpu-site}
  WHEELS=$(cd .whl && ls -- *.whl | tr '\n' ' ')
  step "install carried wheels" 60 "$SETUP" "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
  MISSING=$(missing)
fi
PYEXE=$("$PY" -c 'import sys; print(sys.executable)')
BIN=$(dirname "$PYEXE")
here=$("$PY" -c 'import os, sylvie; print(os.path.dirname(os.path.dirname(os.path.abspath(sylvie.__file__))))' \
  2>/dev/null || true)
before=$FAILED
if [ "$here" = "$REPO" ] && [ -x "$BIN/sylvie" ]; then
  INSTALL="already installed from this checkout ($BIN/sylvie)"
elif step "install sylvie (no deps)" 90 "$SETUP" "$PY" -m pip install -q --no-deps --no-build-isolation \
    --no-index -e .; then
  INSTALL="pip install --no-deps --no-build-isolation -e ."
else  # e.g. a setuptools too old for pyproject.toml: this checkout on PYTHONPATH and a `sylvie` script beside python
  export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
  FAILED=$before  # the fallback stands in for pip; the tests show whether it works
  if printf '#!%s\nimport sys\nsys.path.insert(0, %s)\nfrom sylvie.cli import main\nsys.exit(main())\n' "$PYEXE" \
      "'$REPO'" >"$BIN/sylvie" && chmod +x "$BIN/sylvie"; then
    INSTALL="pip could not install it (setup.log): $REPO on PYTHONPATH and a script $BIN/sylvie"
  else
    INSTALL="NOT INSTALLED: pip failed (setup.log) and $BIN is not writable"; FAILED=1
  fi
fi
"$PY" - >>"$SETUP" 2>&1 <<'EOF'
import importlib, platform
print(f"python {platform.python_version()}")
for m in ("torch", "numba", "numba.cuda", "pyarrow", "jsonschema", "pymetis", "yaml", "tqdm", "pytest",
          "pytest_timeout", "xdist", "torch_geometric", "pyg_lib", "torch_sparse", "dgl", "sylvie"):
    try:
        mod = importlib.import_module(m)
        print(f"{m} {getattr(mod, '__version__', '')} {getattr(mod, '__file__', '')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m}: not importable ({type(e).__name__}: {e})")
EOF
CUDA=$("$PY" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "")' \
  2>>"$SETUP")
DEVICE=${CUDA:-none: $("$PY" -c 'import torch; print(f"torch {torch.__version__} sees no CUDA device")' 2>&1)}
say "Device: $DEVICE"
say "Software: $("$PY" -c 'import platform, torch; print(f"Python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda})")' 2>&1)"
say "Installed: $INSTALL${WHEELS:+; carried wheels: $WHEELS}"
[ -n "$MISSING" ] && say "Still missing: $MISSING(run \`make gpu-wheels\` where PyPI is reachable and carry .whl)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$SETUP" 2>&1

# ---- 2. the GPU test tier (and, without a GPU, the CUDA simulator's tests)
PYTEST=("$PY" -m pytest -p no:cacheprovider -o addopts= -v -rfEs --durations=10)
"$PY" -c 'import pytest_timeout' 2>/dev/null && PYTEST+=(--timeout 240)
if [ -n "$CUDA" ] && "$PY" -c 'import xdist' 2>/dev/null; then PYTEST+=(-n 3 --dist loadfile); fi
step "GPU test tier: pytest -m gpu" 270 "$OUT/gpu-tests.log" "${PYTEST[@]}" -m gpu tests/test_gpu_lowbit.py \
  tests/test_gpu_features.py tests/test_gpu_models.py tests/test_gpu_training.py
if [ -z "$CUDA" ]; then
  step "CUDA simulator and PTX tests (no GPU here)" 300 "$OUT/simulator.log" "${PYTEST[@]}" -m slow \
    -k "simulator or compile_for_a_real_gpu" tests/test_lowbit.py tests/test_feature_store.py
fi

# ---- 3. the GPU benchmarks
if [ -n "$CUDA" ]; then
  step "benchmarks/gat_two_ranks.py (GAT's gradient on 2 ranks, taken apart)" 60 "$OUT/gat-two-ranks.log" "$PY" \
    benchmarks/gat_two_ranks.py --device cuda --out "$(mktemp -d)"
  step "benchmarks/lowbit.py --device cuda" 50 "$OUT/lowbit.log" "$PY" benchmarks/lowbit.py --device cuda \
    --markdown --repeats 5
  step "benchmarks/gather.py (GPU)" 70 "$OUT/gather.log" "$PY" benchmarks/gather.py --table-gb 3 \
    --widths 400 512 2408 --counts 1000 10000 \
    100000 1000000 --rounds 5
  step "benchmarks/gpu_epoch.py --profile" 130 "$OUT/gpu-epoch.log" "$PY" benchmarks/gpu_epoch.py --profile
  step "benchmarks/feature_store.py" 60 "$OUT/feature-store.log" "$PY" benchmarks/feature_store.py
fi

# ---- the summary: steps, tests, tables
say ""
say "## Steps"
say ""
say "| step | result | wall | log |"
say "| --- | --- | --- | --- |"
for s in "${STEPS[@]}"; do say "$s"; done
if [ -z "$CUDA" ]; then
  say "| GPU benchmarks (lowbit.py --device cuda, gather.py, gpu_epoch.py) | not run: no CUDA device | | |"
fi
tests_summary() {  # LOG TITLE: the count line, the skip reasons, the failures, then every test's outcome
  [ -f "$1" ] || return 0
  say ""
  say "## $2"
  say ""
  say "$(grep -E '^=+ .*(passed|failed|skipped|error).* =+$' "$1" | tail -1 | sed -E 's/^=+ //; s/ =+$//')"
  local reasons failures
  reasons=$(grep -E '^SKIPPED \[[0-9]+\] ' "$1" | sed -E 's/^SKIPPED \[([0-9]+)\] ([^:]+)(:[0-9]+)?: /\1\t\2\t/' \
    | awk -F'\t' '{n[$2 "\t" $3] += $1} END {for (k in n) {split(k, a, "\t"); print "- " a[1] ": " n[k] " skipped: " a[2]}}' \
    | sort)
  [ -n "$reasons" ] && { say ""; say "Skipped, with the reason:"; say ""; say "$reasons"; }
  failures=$(grep -E '^(FAILED|ERROR) ' "$1" | sed 's/^/- /')
  [ -n "$failures" ] && { say ""; say "Failures (the log has the tracebacks):"; say ""; say "$failures"; }
  say ""
  say "<details><summary>every test</summary>"
  say ""
  grep -E '::' "$1" | grep -E ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)( |$)' | grep -vE '^(FAILED|ERROR|SKIPPED) ' \
    | sed -E 's/^\[gw[0-9]+\] +\[ *[0-9]+%\] +//; s/ +\[ *[0-9]+%\]$//; s/^/    /' >>"$SUMMARY"
  say ""
  say "</details>"
}
tests_summary "$OUT/gpu-tests.log" "GPU test tier"
tests_summary "$OUT/simulator.log" "CUDA simulator and PTX tests"
table() {  # LOG TITLE: the Markdown tables a benchmark printed (lines starting with '|', and the lines around them)
  [ -f "$1" ] || return 0
  say ""
  say "## $2"
  say ""
  say "$(grep -vE '^== ' "$1" | awk '/^\|/ {print; table=1; next} table && NF==0 {print; table=0; next}
    /^(Low-bit|CPU,|GPU|One training|Feature store|N = |PyG|Measured|No GPU|graph:|Host-to-device)/ {print}')"
}
if [ -f "$OUT/gat-two-ranks.log" ]; then  # its per-step lines: the weights' agreement and every error over its bound
  say ""
  say "## GAT's gradient on 2 ranks, taken apart (benchmarks/gat_two_ranks.py; how to read it: its docstring)"
  say ""
  say "$(grep -E '^(devices|step [0-9])|over$' "$OUT/gat-two-ranks.log" | sed 's/^/    /')"
fi
table "$OUT/lowbit.log" "Low-bit Module on the GPU (benchmarks/lowbit.py --device cuda)"
table "$OUT/gather.log" "Feature row gather (benchmarks/gather.py)"
table "$OUT/gpu-epoch.log" "Training epochs, ours beside PyG (benchmarks/gpu_epoch.py)"
table "$OUT/feature-store.log" "The feature store's tiers (benchmarks/feature_store.py)"
say ""
say "Total wall time: $(elapsed) s (budget ${BUDGET} s). Files: $(cd "$OUT" && ls | tr '\n' ' ')"
exit $FAILED
