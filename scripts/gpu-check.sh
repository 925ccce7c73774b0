#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (built for the H200's architecture, sm_90):
#   1. nvidia-smi
#   2. build-gpu/: a Release build with -DKEEL_CUDA=ON, CUDA code for sm_90 only, and only the
#      targets the check needs (test_cuda, bench_cuda), with every core
#   3. the [cuda] tests: ctest -L cuda (one CTest entry per area, several at once)
#   4. bench_cuda with a short --benchmark_min_time
#   5. a summary: tests passed/failed per area, each benchmark's throughput and its ratio to the
#      direct cuBLAS / cuDNN / cudaMemcpy baseline
# Made to finish in a few minutes on a 16-core machine. Exit status non-zero when the build, a
# test or the benchmark run failed (a [cuda] test reporting itself skipped counts as a failure
# here: this script is only run where a GPU is expected).
#
#   bash scripts/gpu-check.sh
#   KEEL_GPU_ARCH=80 KEEL_BENCH_MIN_TIME=0.3 bash scripts/gpu-check.sh    # another GPU, longer runs
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
ARCH="${KEEL_GPU_ARCH:-90}"
MIN_TIME="${KEEL_BENCH_MIN_TIME:-0.1}"
BUILD=build-gpu
START=$SECONDS
FAILED=0
STAGES=()

step() { printf '\n==== [%s, %ds] %s ====\n' "$(date +%H:%M:%S)" "$((SECONDS - START))" "$*"; }
record() {  # record NAME RC T0
  if (($2 == 0)); then STAGES+=("PASS  $1 ($((SECONDS - $3))s)"); else STAGES+=("FAIL  $1 (exit $2, $((SECONDS - $3))s)"); FAILED=1; fi
}

# ---- 1. the GPU ----------------------------------------------------------------------------------
step "nvidia-smi"
t0=$SECONDS
rc=0
nvidia-smi || rc=$?
record "nvidia-smi" $rc $t0

# ---- 2. build ------------------------------------------------------------------------------------
step "configure $BUILD (Release, KEEL_CUDA=ON, CUDA architecture $ARCH)"
t0=$SECONDS
GENERATOR=()
if [[ ! -f $BUILD/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
rc=0
cmake -S . -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release -DKEEL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DKEEL_BUILD_TESTS=ON -DKEEL_BUILD_BENCHMARKS=ON \
  -DKEEL_BUILD_SAMPLES=OFF -DKEEL_BUILD_FUZZERS=OFF -DKEEL_SANITIZE=OFF || rc=$?
record "configure" $rc $t0
BUILD_OK=0
if ((rc == 0)); then
  step "build test_cuda and bench_cuda with $JOBS jobs"
  t0=$SECONDS
  rc=0
  cmake --build "$BUILD" -j "$JOBS" --target test_cuda bench_cuda || rc=$?
  record "build" $rc $t0
  ((rc == 0)) && BUILD_OK=1
fi

# ---- 3. the [cuda] tests -------------------------------------------------------------------------
TEST_SUMMARY="$ROOT/$BUILD/cuda-test-summary.txt"
CTEST_LOG="$ROOT/$BUILD/cuda-ctest.log"
BENCH_LOG="$ROOT/$BUILD/bench-cuda.log"
rm -f "$TEST_SUMMARY" "$CTEST_LOG" "$BENCH_LOG"
if ((BUILD_OK)); then
  step "[cuda] tests (ctest -L cuda)"
  t0=$SECONDS
  rc=0
  # Several areas at once: the GPU has room, and each entry is its own process.
  # --no-tests=error: a configuration without the entries must not pass silently.
  KEEL_TEST_SUMMARY="$TEST_SUMMARY" ctest --test-dir "$BUILD" -L cuda --output-on-failure -j 4 \
    --no-tests=error --timeout 180 2>&1 | tee "$CTEST_LOG"
  rc=${PIPESTATUS[0]}
  # CTest counts "skipped" (exit 77: no GPU found) as passed; here it is a failure.
  if grep -q "Skipped" "$CTEST_LOG"; then
    echo "gpu-check: [cuda] tests reported themselves skipped: keel found no usable GPU"
    ((rc == 0)) && rc=1
  fi
  record "[cuda] tests" $rc $t0

  # ---- 4. benchmarks -----------------------------------------------------------------------------
  step "bench_cuda --benchmark_min_time=$MIN_TIME"
  t0=$SECONDS
  rc=0
  timeout 150 "$BUILD/benchmarks/bench_cuda" --benchmark_min_time="$MIN_TIME" 2>&1 | tee "$BENCH_LOG"
  rc=${PIPESTATUS[0]}
  if ((rc == 0)) && grep -q "ERROR OCCURRED" "$BENCH_LOG"; then
    echo "gpu-check: a benchmark stopped with an error (see above)"
    rc=1
  fi
  record "bench_cuda" $rc $t0
else
  STAGES+=("SKIP  [cuda] tests (no build)" "SKIP  bench_cuda (no build)")
fi

# ---- 5. summary ----------------------------------------------------------------------------------
step "summary"
if [[ -f $CTEST_LOG ]]; then
  echo "[cuda] tests, per CTest entry (test cases passed / failed, assertions failed):"
  printf '  %-26s %-10s %8s %8s %10s\n' "entry" "result" "passed" "failed" "assertions"
  total_pass=0
  total_fail=0
  # CTest lines look like "  3/8 Test #594: cuda_tests.linalg ......   Passed   12.34 sec".
  while read -r name result; do
    filter="[${name#cuda_tests.}]"
    [[ $name == cuda_tests ]] && filter="(other)"
    counts="- - -"
    if [[ -f $TEST_SUMMARY ]]; then
      # The first field is the entry's tag filter: "[area]", or "[cuda]~[area]~..." for the rest.
      if [[ $name == cuda_tests ]]; then
        line=$(awk -F'|' 'index($1, "[cuda]~") == 1' "$TEST_SUMMARY" | tail -1)
      else
        line=$(awk -F'|' -v f="$filter" '$1 == f' "$TEST_SUMMARY" | tail -1)
      fi
      if [[ -n $line ]]; then
        IFS='|' read -r _ p f _ af <<<"$line"
        counts="$p $f $af"
        total_pass=$((total_pass + p))
        total_fail=$((total_fail + f))
      fi
    fi
    read -r p f af <<<"$counts"
    printf '  %-26s %-10s %8s %8s %10s\n' "$name" "$result" "$p" "$f" "$af"
  done < <(sed -n 's/.*Test *#[0-9]*: \(cuda_tests[^ ]*\) \.*[* ]*\([A-Za-z]*\).*/\1 \2/p' "$CTEST_LOG")
  echo "  test cases in total: $total_pass passed, $total_fail failed (a crashed entry reports no counts)"
fi
if [[ -f $BENCH_LOG ]]; then
  echo
  if grep -q "== bench_cuda summary ==" "$BENCH_LOG"; then
    sed -n '/== bench_cuda summary ==/,/== end of summary ==/p' "$BENCH_LOG"
    echo "  (ratio: keel / baseline; rates above 1.00x beat the direct call; us/op above 1.00x is slower)"
  else
    echo "bench_cuda printed no summary"
    FAILED=1
  fi
fi
echo
printf '%s\n' "${STAGES[@]}"
echo "gpu-check: $((SECONDS - START))s in total"
if ((FAILED)); then
  echo "gpu-check: FAILED"
  exit 1
fi
echo "gpu-check: all passed"
