#!/usr/bin/env bash
# Fuzzes keel's file readers: builds keel and the libFuzzer targets of tests/fuzz/ with clang in
# build-fuzz/ (AddressSanitizer + UndefinedBehaviorSanitizer + libFuzzer coverage on keel itself,
# CPU only), then runs each target for a bounded number of inputs, starting from its committed seed
# corpus tests/fuzz/corpus/<target>/. A target may only ever see keel::Error from a reader; a
# crash, another exception, a sanitizer report or a leak fails the run, and the input that did it
# is kept in build-fuzz/artifacts/.
#
#   bash scripts/fuzz.sh                   build, then run every target (20000 inputs each)
#   bash scripts/fuzz.sh --available       exit 0 when clang with libFuzzer can build keel here
#   KEEL_FUZZ_RUNS=200000 KEEL_FUZZ_TARGETS="npz keel_config" bash scripts/fuzz.sh
#   KEEL_FUZZ_SECONDS=20 bash scripts/fuzz.sh   each target stops at 20000 inputs or 20 s, whichever
#                                          comes first (scripts/test.sh's setting)
#   KEEL_FUZZ_BUILD=build-asan bash scripts/fuzz.sh   reuse a tree configured with clang and
#                                          -DKEEL_BUILD_FUZZERS=ON (scripts/test.sh's sanitizer
#                                          tree, which also holds the tests): no configure step
#
# Needs clang, its libFuzzer runtime and clang's OpenMP (Debian: clang libclang-rt-14-dev
# libomp-dev). Without them it says what is missing and exits 0 without fuzzing.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CXX_FUZZ="${KEEL_FUZZ_CXX:-clang++}"
RUNS="${KEEL_FUZZ_RUNS:-20000}"
SECONDS_CAP="${KEEL_FUZZ_SECONDS:-0}"  # > 0: each target also stops after this many seconds
TARGETS="${KEEL_FUZZ_TARGETS:-safetensors npy npz idx cifar10 keel keel_config image pytorch}"
BUILD="${KEEL_FUZZ_BUILD:-build-fuzz}"
JOBS="${KEEL_FUZZ_JOBS:-$(nproc)}"

# Whether clang can build a libFuzzer target with OpenMP here; prints what is missing if not.
available() {
  if ! command -v "$CXX_FUZZ" > /dev/null 2>&1; then
    echo "fuzz: $CXX_FUZZ not found (Debian: apt-get install clang libclang-rt-14-dev libomp-dev)"
    return 1
  fi
  local probe rc=0
  probe="$(mktemp -d)"
  printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n' \
    > "$probe/f.cpp"
  if ! "$CXX_FUZZ" -fsanitize=fuzzer,address "$probe/f.cpp" -o "$probe/f" > /dev/null 2>&1; then
    echo "fuzz: $CXX_FUZZ cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-14-dev)"
    rc=1
  elif ! printf 'int main() {\n#pragma omp parallel\n{}\n}\n' > "$probe/o.cpp" ||
    ! "$CXX_FUZZ" -fopenmp "$probe/o.cpp" -o "$probe/o" > /dev/null 2>&1; then
    echo "fuzz: $CXX_FUZZ has no OpenMP runtime, which keel needs (Debian: apt-get install libomp-dev)"
    rc=1
  fi
  rm -rf "$probe"
  return "$rc"
}

if [[ "${1:-}" == "--available" ]]; then
  available
  exit $?
fi
if ! available; then
  echo "fuzz: skipped"
  exit 0
fi

# Coverage instrumentation on keel's own translation units (tests/fuzz/CMakeLists.txt adds
# fuzzer-no-link to the library and -fsanitize=fuzzer to the targets). A tree configured that way
# already (scripts/test.sh's sanitizer tree) is reused as it is.
mkdir -p "$BUILD"
if grep -q '^KEEL_BUILD_FUZZERS:BOOL=ON' "$BUILD/CMakeCache.txt" 2> /dev/null; then
  echo "==== reusing ${BUILD}/ (configured with the fuzz targets)"
else
  echo "==== configure ${BUILD}/ (clang, ASan+UBSan, libFuzzer)"
  # shellcheck source=scripts/generator.sh
  source "$ROOT/scripts/generator.sh"
  cmake -S . -B "$BUILD" -G "$(keel_generator "$BUILD")" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DKEEL_SANITIZE=ON -DKEEL_CUDA=OFF -DKEEL_BUILD_FUZZERS=ON -DKEEL_BUILD_TESTS=OFF \
    -DKEEL_BUILD_BENCHMARKS=OFF -DKEEL_BUILD_SAMPLES=OFF -DKEEL_BUILD_SERVE=OFF > "$BUILD/configure.log" 2>&1 || {
    cat "$BUILD/configure.log"
    exit 1
  }
fi
targets=()
for t in $TARGETS; do targets+=("fuzz_$t"); done
echo "==== build ${targets[*]} (-j${JOBS})"
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" || exit 1

# Inputs larger than any real use of a reader here fail allocation (and the reader must turn that
# into keel::Error) instead of exhausting the machine; leaks are findings too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=512:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$BUILD/artifacts"
failed=()
for t in $TARGETS; do
  seeds="tests/fuzz/corpus/$t"
  found="$BUILD/corpus/$t"  # what libFuzzer adds goes here, never into the committed seeds
  mkdir -p "$found"
  echo "==== fuzz_$t: $RUNS inputs from $seeds"
  if "$BUILD/tests/fuzz/fuzz_$t" "$found" "$seeds" -runs="$RUNS" -max_total_time="$SECONDS_CAP" -seed=1 -max_len=16384 -timeout=30 \
    -rss_limit_mb=2560 -malloc_limit_mb=2048 -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 \
    > "$BUILD/fuzz_$t.log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units)" "$BUILD/fuzz_$t.log" | tail -1
  else
    tail -40 "$BUILD/fuzz_$t.log"
    failed+=("$t")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $BUILD/artifacts/, logs in $BUILD/fuzz_<target>.log)"
  exit 1
fi
echo "fuzz: every target ran $RUNS inputs with keel::Error only"
