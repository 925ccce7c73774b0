#!/usr/bin/env bash
# The whole test suite:
#   1. setup (Debian packages)
#   2. build/       Release build (g++, libkeel static as users get it by default) with tests,
#                   benchmarks and samples; ctest; the sample trainer
#   3. consumer checks: keel used via add_subdirectory, FetchContent and find_package (the last
#                   one built and run against an install of build/)
#   4. build-asan/  clang with AddressSanitizer + UndefinedBehaviorSanitizer (CPU only, libkeel
#                   shared so ~100 instrumented test programs do not each carry a copy of it), which
#                   also holds the libFuzzer targets of tests/fuzz (libFuzzer's coverage on keel):
#                   one instrumented build of the library serves both. ctest, then
#   5. fuzzing: each target run over its seed corpus for a bounded number of inputs
#      (scripts/fuzz.sh on build-asan/; setup installs clang and libFuzzer, and the stage fails
#      when they are still missing)
# Every stage runs even when an earlier one failed (except what depends on a failed build);
# a summary follows, and the exit status is non-zero when anything failed.
#
#   bash scripts/test.sh                 (from any directory)
#   KEEL_TEST_SKIP="asan consumer" bash scripts/test.sh    # skip stages: asan consumer sample fuzz
#
# Builds use Ninja when it is installed (setup.sh installs it) and ccache; keel's sources compile in
# unity batches (KEEL_UNITY_BUILD) and the test programs at -O1: the whole run stays well under
# 45 minutes on two cores.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
SKIP=" ${KEEL_TEST_SKIP:-} "
START=$SECONDS

SUMMARY=()
FAILED=0

step() { printf '\n==== [%s] %s ====\n' "$(date +%H:%M:%S)" "$*"; }

# stage NAME COMMAND...: runs one stage under a header and records PASS/FAIL with its time.
stage() {
  local name=$1 t0=$SECONDS rc=0
  shift
  step "$name"
  "$@" || rc=$?
  if ((rc == 0)); then
    SUMMARY+=("PASS  $name ($((SECONDS - t0))s)")
  else
    SUMMARY+=("FAIL  $name (exit $rc, $((SECONDS - t0))s)")
    FAILED=1
  fi
  return "$rc"
}
not_run() { SUMMARY+=("SKIP  $1 ($2)"); }
# failed_tests DIR: adds the tests ctest last recorded as failed in DIR to the summary, so that
# the end of the log (all a CI page may show) names them.
failed_tests() {
  local log="$1/Testing/Temporary/LastTestsFailed.log" line
  [[ -s "$log" ]] || return 0
  while IFS= read -r line; do SUMMARY+=("        failed: ${line#*:}"); done < <(head -n 20 "$log")
}
wanted() { [[ "$SKIP" != *" $1 "* ]]; }

summary() {
  step "summary"
  local line
  for line in "${SUMMARY[@]}"; do echo "  $line"; done
  echo
  if ((FAILED)); then
    echo "keel test suite: FAILED ($((SECONDS - START))s)"
  else
    echo "keel test suite: PASSED ($((SECONDS - START))s)"
  fi
}

# LeakSanitizer needs ptrace-like access that some containers deny; probe it once.
asan_options() {
  local probe_dir opts="detect_leaks=1:check_initialization_order=1"
  probe_dir="$(mktemp -d)"
  printf 'int main() { return 0; }\n' > "$probe_dir/p.cpp"
  if "$SAN_CXX" -fsanitize=address "$probe_dir/p.cpp" -o "$probe_dir/p" 2> /dev/null &&
    ! "$probe_dir/p" > /dev/null 2>&1; then
    echo "note: LeakSanitizer does not work here; running ASan with detect_leaks=0" >&2
    opts="detect_leaks=0:check_initialization_order=1"
  fi
  rm -rf "$probe_dir"
  echo "$opts"
}

# 1. setup -------------------------------------------------------------------------------------
# Open MPI, which test_distributed's and test_parameter_server's in-process cases initialise,
# leaks at exit: those cases run without leak checks (their mpirun entries set the same
# themselves), everything else with them.
# LLVM's OpenMP runtime (libomp, which the clang build links) registers each process in
# /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid>. A process killed earlier on this machine leaves its
# file, and a test process that gets the same pid finds it and aborts at start-up ("OMP: Error
# #15 ... found unknown library already initialized"). Files of pids no longer running go.
remove_stale_omp_registrations() {
  local f pid
  for f in /dev/shm/__KMP_REGISTERED_LIB_*; do
    [[ -e "$f" ]] || continue
    pid="${f#/dev/shm/__KMP_REGISTERED_LIB_}"
    pid="${pid%%_*}"
    kill -0 "$pid" 2> /dev/null || rm -f "$f" 2> /dev/null || true
  done
}

asan_ctest() {
  local rc=0
  remove_stale_omp_registrations
  ctest --test-dir build-asan --output-on-failure -j2 --no-tests=error -E '^test_(distributed|parameter_server):' ||
    { rc=1; failed_tests build-asan; }
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    ctest --test-dir build-asan --output-on-failure -j2 -R '^test_(distributed|parameter_server):' || { rc=1; failed_tests build-asan; }
  return "$rc"
}

if ! stage "setup: Debian packages (scripts/setup.sh)" bash scripts/setup.sh; then
  summary
  exit 1
fi

# Every build below goes through ccache when it is there (setup.sh installs it), so that a second
# run, or a tree configured again, recompiles only what changed. CMake reads these variables as
# the launchers' defaults.
if command -v ccache > /dev/null 2>&1; then
  export CCACHE_DIR="${CCACHE_DIR:-$ROOT/.ccache}"
  # Paths under the checkout hashed relative to the build directory: build trees in other folders
  # (their generated-proto include directories) share the cache.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CUDA_COMPILER_LAUNCHER="${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}"
fi

# shellcheck source=scripts/generator.sh
source "$ROOT/scripts/generator.sh"
# The sanitizer tree is built with clang: libFuzzer needs it, and the same instrumented library
# then serves the tests and the fuzz targets.
SAN_CXX="${KEEL_SANITIZER_CXX:-clang++}"

# 2. the Release build -------------------------------------------------------------------------
if stage "configure build/ (Release, tests on)" \
  cmake -S . -B build -G "$(keel_generator build)" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_TESTS=ON \
  -DKEEL_SANITIZE=OFF; then
  if stage "build build/ (-j${JOBS})" cmake --build build -j"${JOBS}"; then
    stage "ctest build/" ctest --test-dir build --output-on-failure -j2 --no-tests=error || failed_tests build
    if wanted sample; then
      stage "sample: build/samples/linear_regression" build/samples/linear_regression
    else
      not_run "sample" "KEEL_TEST_SKIP"
    fi
  else
    not_run "ctest build/" "build failed"
  fi
fi

# 3. downstream use ----------------------------------------------------------------------------
# find_package consumes an install of build/ (KEEL_CONSUMER_INSTALL_FROM): no third library build.
if wanted consumer; then
  if [[ -f build/CMakeCache.txt ]]; then export KEEL_CONSUMER_INSTALL_FROM="$ROOT/build"; fi
  stage "consumer checks: add_subdirectory, FetchContent, find_package" bash scripts/consumer-check.sh
else
  not_run "consumer checks" "KEEL_TEST_SKIP"
fi

# 4. sanitizers (and the fuzz targets, in the same tree) -----------------------------------------
san_built=0
if wanted asan || wanted fuzz; then
  if ! reason="$(KEEL_FUZZ_CXX="$SAN_CXX" bash scripts/fuzz.sh --available)"; then
    # setup.sh installs clang and its fuzzer runtime: missing after setup is a failure, not a skip.
    SUMMARY+=("FAIL  sanitizer/fuzz tree ($reason)")
    FAILED=1
  elif stage "configure build-asan/ (clang, ASan+UBSan, libFuzzer targets, CPU only)" \
    cmake -S . -B build-asan -G "$(keel_generator build-asan)" -DCMAKE_CXX_COMPILER="$SAN_CXX" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DKEEL_SANITIZE=ON -DKEEL_BUILD_FUZZERS=ON -DKEEL_BUILD_TESTS=ON -DBUILD_SHARED_LIBS=ON -DKEEL_TEST_OPT_LEVEL=-O0 \
    -DKEEL_BUILD_BENCHMARKS=OFF -DKEEL_BUILD_SAMPLES=OFF -DKEEL_CUDA=OFF; then
    if stage "build build-asan/ (-j${JOBS})" cmake --build build-asan -j"${JOBS}"; then
      san_built=1
    fi
  fi
fi
if wanted asan; then
  if ((san_built)); then
    ASAN_OPTIONS="${ASAN_OPTIONS:-$(asan_options)}" \
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
      stage "ctest build-asan/" asan_ctest
  else
    not_run "ctest build-asan/" "sanitizer tree not built"
  fi
else
  not_run "sanitizer tests" "KEEL_TEST_SKIP"
fi

# 5. fuzzing ------------------------------------------------------------------------------------
if wanted fuzz; then
  if ((san_built)); then
    KEEL_FUZZ_BUILD=build-asan KEEL_FUZZ_CXX="$SAN_CXX" KEEL_FUZZ_SECONDS="${KEEL_FUZZ_SECONDS:-20}" \
      stage "fuzz: libFuzzer targets over tests/fuzz/corpus (scripts/fuzz.sh)" bash scripts/fuzz.sh
  else
    not_run "fuzz" "sanitizer tree not built"
  fi
else
  not_run "fuzz" "KEEL_TEST_SKIP"
fi
# The instrumented objects are the largest thing CI writes.
rm -rf build-asan

summary
exit "$FAILED"
