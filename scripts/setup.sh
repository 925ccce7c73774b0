#!/usr/bin/env bash
# Installs every Debian package keel's build, tests and benchmarks need.
# Idempotent: packages already present are not reinstalled, and nothing is printed for them.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libxsimd-dev libfmt-dev nlohmann-json3-dev
  libopenblas-openmp-dev libdnnl-dev
  catch2 libbenchmark-dev zlib1g-dev
  libpng-dev libjpeg62-turbo-dev
  xtensor-dev
  libprotobuf-dev protobuf-compiler python3-protobuf
  ccache
  dataset-fashion-mnist
  clang libclang-rt-14-dev libomp-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "keel setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
