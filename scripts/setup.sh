#!/usr/bin/env bash
# Installs every Debian package keel's build, tests and benchmarks need.
# Idempotent: packages already present are not reinstalled, and nothing is printed for them.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libxsimd-dev libfmt-dev nlohmann-json3-dev
  libopenblas-openmp-dev libdnnl-dev
  catch2 libbenchmark-dev zlib1g-dev
  libpng-dev libjpeg62-turbo-dev
  xtensor-dev
  libprotobuf-dev protobuf-compiler python3-protobuf
  ccache lld
  dataset-fashion-mnist
  clang libclang-rt-14-dev libomp-dev
  libhdf5-dev libopenmpi-dev openmpi-bin libcpp-httplib-dev
  python3-torch python3-onnx python3-h5py python3-numpy
)
# Node.js runs the ONNX Runtime and TensorFlow.js oracles. A machine that already has a Node.js
# with its own npm (NodeSource's nodejs, which conflicts with Debian's npm) keeps it.
if ! command -v npm > /dev/null 2>&1; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "keel setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The npm packages of the oracle tests (tests/node/package.json), into tests/node/node_modules.
# --ignore-scripts: onnxruntime-node's install script only fetches GPU extras.
node_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/node"
if [ -f "$node_dir/package.json" ] && [ ! -f "$node_dir/node_modules/.keel-installed" ]; then
  echo "keel setup: npm install in tests/node"
  (cd "$node_dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error > /dev/null &&
    touch node_modules/.keel-installed)
fi

