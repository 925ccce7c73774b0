#!/usr/bin/env bash
# Checks tests/consumer/consumer.cpp the three ways a downstream CMake project uses keel:
#   add_subdirectory   tests/consumer/add_subdirectory: keel's source tree added to the build
#   FetchContent       tests/consumer/fetchcontent: FetchContent_Declare(keel SOURCE_DIR ...)
#                      (FetchContent_MakeAvailable is add_subdirectory underneath)
#     both configured and generated (with the CUDA backend where the toolkit is installed), and
#     their generated build checked to link the consumer against keel's library: compiling the
#     library again in them would check only what the Release build already compiled
#   find_package       tests/consumer/find_package: keel built (static, as by default),
#                      `cmake --install`ed into a prefix, then find_package(keel CONFIG REQUIRED);
#                      the consumer built, linked through the installed package's link
#                      interface, and run
# The installed library is built as the Release build of scripts/test.sh builds it
# (KEEL_CUDA=AUTO: with the CUDA backend where the toolkit is installed, so that the installed
# package config must find CUDA and cuDNN for its consumer). With KEEL_CONSUMER_INSTALL_FROM naming a configured Release
# tree that has been built (test.sh passes build/), find_package consumes an install of that tree
# instead of building the library a third time. All work happens in a temporary folder, removed on
# success and kept (and named) on failure.
#
#   bash scripts/consumer-check.sh [WORK_DIR]      (from any directory)
#   KEEL_CONSUMER_INSTALL_FROM=build bash scripts/consumer-check.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
if [[ $# -ge 1 ]]; then
  WORK="$1"
  KEEP=1
  mkdir -p "$WORK"
else
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/keel-consumer.XXXXXX")"
  KEEP=${KEEL_KEEP_WORK:-0}
fi
WORK="$(cd "$WORK" && pwd)"
LIB_OPTIONS=(-DCMAKE_BUILD_TYPE=Release -DKEEL_CUDA=AUTO)
INSTALL_FROM="${KEEL_CONSUMER_INSTALL_FROM:-}"
# shellcheck source=scripts/generator.sh
source "$ROOT/scripts/generator.sh"

RESULTS=()
FAILED=0

step() { printf '\n---- [%s] consumer: %s ----\n' "$(date +%H:%M:%S)" "$*"; }

# run LOG COMMAND...: runs quietly into a log; on failure shows the log's tail.
run() {
  local log=$1
  shift
  echo "\$ $*"
  if "$@" > "$log" 2>&1; then
    return 0
  fi
  echo "FAILED (log: $log); last lines:"
  tail -n 40 "$log" | sed 's/^/    /'
  return 1
}

record() {  # record NAME STATUS
  if (($2 == 0)); then
    RESULTS+=("PASS  $1")
  else
    RESULTS+=("FAIL  $1")
    FAILED=1
  fi
}

# configure one consumer project.
configure_consumer() {  # configure_consumer NAME EXTRA_CMAKE_ARGS...
  local name=$1 dir="$WORK/$1"
  shift
  run "$WORK/$name.configure.log" cmake -S "$ROOT/tests/consumer/$name" -B "$dir" -G "$(keel_generator "$dir")" \
    -DCMAKE_BUILD_TYPE=Release "$@"
}
# configure + build + run one consumer project.
consumer() {  # consumer NAME EXTRA_CMAKE_ARGS...
  local name=$1 dir="$WORK/$1"
  configure_consumer "$@" &&
    run "$WORK/$name.build.log" cmake --build "$dir" -j"$JOBS" &&
    echo "\$ $dir/consumer" && "$dir/consumer"
}

echo "consumer checks in $WORK"

# The generated build must link the consumer against keel's library (Ninja lists the commands
# that would make it; Makefiles keep the link line in the target's link.txt).
links_keel() {
  local dir=$1
  if [[ -f "$dir/build.ninja" ]]; then
    # Captured first: grep -q stops reading at its match, and under pipefail the SIGPIPE that
    # ninja then gets would fail the check whenever the command list is long.
    local commands
    commands=$(ninja -C "$dir" -t commands consumer) || return 1
    grep -q "libkeel" <<<"$commands"
  else
    grep -q "libkeel" "$dir/CMakeFiles/consumer.dir/link.txt"
  fi
}

step "add_subdirectory (configure and generate)"
configure_consumer add_subdirectory -DKEEL_SOURCE_DIR="$ROOT" -DKEEL_CUDA=AUTO && links_keel "$WORK/add_subdirectory"
record "add_subdirectory (configured, generated)" $?

step "FetchContent (configure and generate)"
configure_consumer fetchcontent -DKEEL_SOURCE_DIR="$ROOT" -DKEEL_CUDA=AUTO && links_keel "$WORK/fetchcontent"
record "FetchContent (local SOURCE_DIR; configured, generated)" $?

step "find_package (install tree)"
install_and_consume() {
  local build="$WORK/keel-build" prefix="$WORK/prefix" config
  if [[ -n "$INSTALL_FROM" ]]; then
    build="$(cd "$INSTALL_FROM" && pwd)"
    echo "installing the library of $build"
    run "$WORK/keel.build.log" cmake --build "$build" -j"$JOBS" || return 1  # up to date: a no-op
  else
    run "$WORK/keel.configure.log" cmake -S "$ROOT" -B "$build" -G "$(keel_generator "$build")" "${LIB_OPTIONS[@]}" \
      -DKEEL_BUILD_TESTS=OFF -DKEEL_BUILD_BENCHMARKS=OFF -DKEEL_BUILD_SAMPLES=OFF || return 1
    run "$WORK/keel.build.log" cmake --build "$build" -j"$JOBS" || return 1
  fi
  run "$WORK/keel.install.log" cmake --install "$build" --prefix "$prefix" || return 1
  # The installed package must be relocatable and must not ask for keel's private build deps.
  config="$(find "$prefix" -name keelConfig.cmake -print -quit)"
  if [[ -z "$config" ]]; then
    echo "FAILED: no keelConfig.cmake under $prefix"
    return 1
  fi
  if grep -l -F -e "$ROOT" -e "$build" "$(dirname "$config")"/*.cmake; then
    echo "FAILED: the installed CMake files above name the source or build tree"
    return 1
  fi
  if grep -l -w xsimd "$(dirname "$config")"/keelTargets*.cmake; then
    echo "FAILED: the installed keel::keel target requires xsimd (a private build dependency)"
    return 1
  fi
  echo "installed package: $config"
  consumer find_package -DCMAKE_PREFIX_PATH="$prefix"
}
install_and_consume
record "find_package (after cmake --install)" $?

step "results"
for line in "${RESULTS[@]}"; do echo "  $line"; done
if ((FAILED)); then
  echo "consumer checks FAILED; work folder kept: $WORK"
  exit 1
fi
if ((KEEP)); then
  echo "consumer checks passed; work folder kept: $WORK"
else
  rm -rf "$WORK"
  echo "consumer checks passed"
fi
