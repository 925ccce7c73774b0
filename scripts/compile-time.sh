#!/usr/bin/env bash
# Compile time of a small user program: benchmarks/compile_time/keel_example.cpp (includes
# <keel/keel.hpp>, a GradientTape example) against the same program written with libtorch
# (benchmarks/compile_time/torch_example.cpp), compiled with `g++ -O2 -c`, alternately, 3 times
# each in one run; prints both medians and their ratio (and peak compiler memory when
# /usr/bin/time is present).
#
#   bash scripts/compile-time.sh              (from any directory)
#   RUNS=5 CXX=g++-12 bash scripts/compile-time.sh
#   KEEL_TORCH_CXXFLAGS="-I/opt/libtorch/include -I/opt/libtorch/include/torch/csrc/api/include" \
#     bash scripts/compile-time.sh           # a libtorch that is not Debian's libtorch-dev
#
# libtorch is not installed by scripts/setup.sh (about 1 GB); without it only keel is measured.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CXX="${CXX:-g++}"
RUNS="${RUNS:-3}"
KEEL_SRC=benchmarks/compile_time/keel_example.cpp
TORCH_SRC=benchmarks/compile_time/torch_example.cpp
KEEL_FLAGS=(-std=c++20 -O2 -I "$ROOT/include")
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

step() { printf '\n==== %s ====\n' "$*"; }

torch_installed() {
  [[ -n "${KEEL_TORCH_CXXFLAGS:-}" ]] ||
    dpkg-query -W -f='${Status}' libtorch-dev 2> /dev/null | grep -q "install ok installed"
}

# Include flags for Debian's libtorch-dev: the directory holding torch/torch.h (the C++
# frontend) and the one holding ATen/ (when not already a default include directory).
torch_flags() {
  if [[ -n "${KEEL_TORCH_CXXFLAGS:-}" ]]; then
    echo "$KEEL_TORCH_CXXFLAGS"
    return
  fi
  local files header dir flags=""
  files="$(dpkg -L libtorch-dev 2> /dev/null || true)"
  header="$(grep -m1 '/csrc/api/include/torch/torch\.h$' <<< "$files" ||
    grep -m1 '/torch/torch\.h$' <<< "$files" || true)"
  for dir in "${header%/torch/torch.h}" \
    "$(dirname "$(dirname "$(grep -m1 '/ATen/ATen\.h$' <<< "$files" || echo /usr/include/x/x)")")"; do
    case "$dir" in
      "" | /usr/include | /usr/local/include) ;;  # -I of a system directory breaks #include_next
      *) flags+=" -I$dir" ;;
    esac
  done
  echo "$flags -D_GLIBCXX_USE_CXX11_ABI=1"
}

# compile_once NAME SRC FLAGS...: prints "seconds peak_kib" (peak 0 when unknown).
compile_once() {
  local name=$1 src=$2
  shift 2
  local t0 t1 peak=0
  t0=$(date +%s%N)
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f '%M' -o "$TMP/$name.mem" "$CXX" "$@" -c "$src" -o "$TMP/$name.o" \
      2> "$TMP/$name.err" || { cat "$TMP/$name.err" >&2; return 1; }
    peak=$(tail -n1 "$TMP/$name.mem")
  else
    "$CXX" "$@" -c "$src" -o "$TMP/$name.o" 2> "$TMP/$name.err" || { cat "$TMP/$name.err" >&2; return 1; }
  fi
  t1=$(date +%s%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }') $peak"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

have_torch=0
if torch_installed; then
  have_torch=1
else
  echo "libtorch-dev is not installed, so only keel is measured."
  echo "To compare against libtorch (about 1 GB of packages):  apt-get install -y libtorch-dev"
  if [[ -t 0 && -t 1 ]]; then
    read -r -p "Install libtorch-dev now? [y/N] " answer
    if [[ "$answer" == [yY]* ]]; then
      SUDO=""
      if [[ "$(id -u)" -ne 0 ]]; then SUDO="sudo"; fi
      $SUDO apt-get install -y libtorch-dev && have_torch=1
    fi
  fi
fi

TORCH_FLAGS=()
if ((have_torch)); then
  read -r -a TORCH_FLAGS <<< "-std=c++17 -O2 $(torch_flags)"
fi

step "compiler: $("$CXX" --version | head -n1)"
echo "keel:  $CXX ${KEEL_FLAGS[*]} -c $KEEL_SRC"
((have_torch)) && echo "torch: $CXX ${TORCH_FLAGS[*]} -c $TORCH_SRC"

keel_times=() keel_mem=() torch_times=() torch_mem=()
for ((i = 1; i <= RUNS; i++)); do
  read -r t m < <(compile_once keel "$KEEL_SRC" "${KEEL_FLAGS[@]}") || {
    echo "FAILED to compile $KEEL_SRC" >&2
    exit 1
  }
  keel_times+=("$t") keel_mem+=("$m")
  line="run $i: keel ${t} s"
  if ((have_torch)); then
    read -r t m < <(compile_once torch "$TORCH_SRC" "${TORCH_FLAGS[@]}") || {
      echo "FAILED to compile $TORCH_SRC (set KEEL_TORCH_CXXFLAGS to libtorch's include flags)" >&2
      exit 1
    }
    torch_times+=("$t") torch_mem+=("$m")
    line+=", libtorch ${t} s"
  fi
  echo "$line"
done

step "medians of $RUNS runs (g++ -O2 -c, one translation unit)"
# report NAME MEDIAN_SECONDS PEAK_KIB...
report() {
  local name=$1 seconds=$2 peak
  shift 2
  peak=$(median "$@")
  if ((peak > 0)); then
    printf '%-9s %6.2f s   peak compiler memory %5d MiB\n' "$name" "$seconds" $((peak / 1024))
  else
    printf '%-9s %6.2f s\n' "$name" "$seconds"
  fi
}
keel_median=$(median "${keel_times[@]}")
report keel "$keel_median" "${keel_mem[@]}"
if ((have_torch)); then
  torch_median=$(median "${torch_times[@]}")
  report libtorch "$torch_median" "${torch_mem[@]}"
  awk -v k="$keel_median" -v t="$torch_median" \
    'BEGIN { printf "ratio     libtorch / keel = %.1fx\n", (k > 0 ? t / k : 0) }'
fi
