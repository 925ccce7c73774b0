#!/usr/bin/env bash
# The main job: install the build dependencies, build keel (Release) into build/, and run the
# sample trainer (TensorFlow's "basic training loops" tutorial in keel).
#
#   bash scripts/run.sh            (from any directory)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"

step() { printf '\n==== [%s] %s ====\n' "$(date +%H:%M:%S)" "$*"; }

step "1/4 setup: Debian packages (scripts/setup.sh)"
bash scripts/setup.sh

step "2/4 configure: cmake -S . -B build (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_SAMPLES=ON

step "3/4 build: cmake --build build -j${JOBS}"
cmake --build build -j"${JOBS}"

step "4/4 run: build/samples/linear_regression"
build/samples/linear_regression

step "done"
