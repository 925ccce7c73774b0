#!/usr/bin/env bash
# keel against libtorch on the same training steps, measured in one run on this machine:
# the seed CIFAR-10 CNN (batch 64, Adam) and LSTM(50) + Dense(1) (batch 32, seq 3 and 50, Adam),
# each at 1 and 2 threads. keel runs benchmarks/bench_train_step (the GradientTape step); libtorch
# runs the peer suite's `peer_torch` (its CNN step with oneDNN on, and its LSTM step). The two
# alternate, ROUNDS times each, and the table gives the medians and keel's speed-up
# (libtorch ms / keel ms; above 1 is keel faster).
#
#   bash scripts/bench-vs-peer.sh            quiet machine
#   bash scripts/bench-vs-peer.sh --busy     also with one core kept busy by a spinning process,
#                                            and each step's busy/quiet time
#   ROUNDS=5 KEEL_PEER_DIR=/path/to/peer KEEL_BENCH_BUILD=build-dev bash scripts/bench-vs-peer.sh
#   KEEL_BASELINE_BUILD=/path/to/older/build bash scripts/bench-vs-peer.sh
#                                            also an older keel build's bench_train_step, in the
#                                            same rounds: "keel before" columns (before / after)
#
# Needs Debian's libtorch-dev for the libtorch side (not installed by scripts/setup.sh: about
# 1 GB); without it only keel is measured. KEEL_PEER_DIR (default: ../shared/peer beside the
# checkout) holds the peer benchmark sources; they are built into build-peer/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${ROUNDS:-3}"
BUILD="${KEEL_BENCH_BUILD:-build-bench}"  # an existing Release build with benchmarks is reused as is
PEER_DIR="${KEEL_PEER_DIR:-$ROOT/../shared/peer}"
BASELINE="${KEEL_BASELINE_BUILD:-}"
BUSY=0
[[ "${1:-}" == "--busy" ]] && BUSY=1
TMP="$(mktemp -d)"
SPINNER=""
cleanup() {
  [[ -n "$SPINNER" ]] && kill "$SPINNER" 2> /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

step() { printf '\n==== %s ====\n' "$*" >&2; }

step "machine"
{
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx2|fma|avx512f|avx512bw|avx512_vnni|avx512_bf16|amx_tile' | tr '\n' ' ')"
} | tee "$TMP/machine" >&2

step "build keel ($BUILD)"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKEEL_CUDA=OFF -DKEEL_BUILD_TESTS=OFF \
    -DKEEL_BUILD_SAMPLES=OFF -DKEEL_BUILD_BENCHMARKS=ON > "$TMP/cmake.log"
fi
cmake --build "$BUILD" -j"$(nproc)" --target bench_train_step > "$TMP/build.log"

HAVE_TORCH=0
if [[ -d "$PEER_DIR" ]] && dpkg-query -W -f='${Status}' libtorch-dev 2> /dev/null | grep -q "install ok installed"; then
  step "build peer_torch (build-peer)"
  cmake -S "$PEER_DIR" -B build-peer -DCMAKE_BUILD_TYPE=Release > "$TMP/peer-cmake.log"
  cmake --build build-peer -j"$(nproc)" --target peer_torch > "$TMP/peer-build.log"
  HAVE_TORCH=1
else
  echo "libtorch-dev or the peer sources ($PEER_DIR) are missing: measuring keel alone" >&2
fi

# One round of each side; appends "model threads ms" lines to $1.
run_keel() {
  "${KEEL_BENCH_BIN:-$BUILD/benchmarks/bench_train_step}" --benchmark_filter='_tape/' --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true --benchmark_format=json 2> /dev/null |
    python3 -c '
import json, sys
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    name = b["run_name"].split("/")
    args = dict(p.split(":") for p in name[1:] if ":" in p)
    model = "cnn" if name[0] == "cnn_tape" else "lstm_seq" + args["seq"]
    print(model, args["threads"], b["ms_per_step"])' >> "$1"
}
run_base() {
  [[ -n "$BASELINE" ]] || return 0
  KEEL_BENCH_BIN="$BASELINE/benchmarks/bench_train_step" run_keel "$1"
}
run_torch() {
  build-peer/peer_torch --only=de 1 2 | awk -F'|' '
    /^## threads = / { split($0, w, " "); t = w[4] }
    $2 ~ /train step \(oneDNN on\)/ { gsub(/ /, "", $5); print "cnn", t, $5 }
    $2 ~ /LSTM train step, seq len/ { n = $2; sub(/.*seq len /, "", n); gsub(/ /, "", n); gsub(/ /, "", $5);
                                      print "lstm_seq" n, t, $5 }' >> "$1"
}

measure() {  # measure OUT_PREFIX
  local r
  for ((r = 1; r <= ROUNDS; ++r)); do
    step "round $r of $ROUNDS${2:+ ($2)}"
    run_keel "$1.keel"
    run_base "$1.base"
    ((HAVE_TORCH)) && run_torch "$1.torch"
  done
  return 0
}

# Medians of "model threads ms" lines: prints "model threads median".
medians() {
  [[ -f "$1" ]] || return 0
  sort -k1,1 -k2,2n -k3,3g "$1" | awk '
    function flush() { if (n) { m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; print key, m } n = 0 }
    { k = $1 " " $2; if (k != key) { flush(); key = k } v[++n] = $3 }
    END { flush() }'
}

table() {  # table PREFIX TITLE
  medians "$1.keel" > "$1.keel.med"
  medians "$1.torch" > "$1.torch.med"
  medians "$1.base" > "$1.base.med"
  echo
  echo "### $2 (medians of $ROUNDS rounds, ms per step)"
  echo
  echo "| training step | libtorch 1 thread | libtorch 2 threads | keel 1 thread | keel 2 threads | keel speed-up 1 thread | keel speed-up 2 threads | keel 2-thread scaling |"
  echo "|---|---|---|---|---|---|---|---|"
  awk 'FNR == NR { t[$1 " " $2] = $3; next } { k[$1 " " $2] = $3; m[$1] = 1 }
    END {
      label["cnn"] = "seed CIFAR-10 CNN, batch 64, Adam"
      label["lstm_seq3"] = "LSTM(1->50) + Dense(1), batch 32, seq 3, Adam"
      label["lstm_seq50"] = "LSTM(1->50) + Dense(1), batch 32, seq 50, Adam"
      split("cnn lstm_seq3 lstm_seq50", order, " ")
      for (i = 1; i <= 3; ++i) {
        x = order[i]; if (!(x in m)) continue
        t1 = t[x " 1"]; t2 = t[x " 2"]; k1 = k[x " 1"]; k2 = k[x " 2"]
        r1 = (t1 != "") ? sprintf("%.2fx", t1 / k1) : "-"
        r2 = (t2 != "") ? sprintf("%.2fx", t2 / k2) : "-"
        printf "| %s | %s | %s | %.2f | %.2f | %s | %s | %.2fx |\n", label[x], (t1 != "" ? sprintf("%.2f", t1) : "-"),
          (t2 != "" ? sprintf("%.2f", t2) : "-"), k1, k2, r1, r2, k1 / k2
      }
    }' "$1.torch.med" "$1.keel.med"
  if [[ -s "$1.base.med" ]]; then
    echo
    echo "keel before ($BASELINE) and now, same rounds:"
    echo
    echo "| training step | threads | keel before | keel now | before / now |"
    echo "|---|---|---|---|---|"
    join <(awk '{print $1 "/" $2, $3}' "$1.base.med" | sort) <(awk '{print $1 "/" $2, $3}' "$1.keel.med" | sort) |
      awk '{ split($1, p, "/"); printf "| %s | %s | %.2f | %.2f | %.2fx |\n", p[1], p[2], $2, $3, $2 / $3 }'
  fi
}

measure "$TMP/quiet"
if ((BUSY)); then
  # One core kept busy by another process for the whole measurement.
  sh -c 'while :; do :; done' &
  SPINNER=$!
  measure "$TMP/busy" "one core busy"
  kill "$SPINNER"
  SPINNER=""
fi

echo
cat "$TMP/machine"
table "$TMP/quiet" "quiet machine"
if ((BUSY)); then
  table "$TMP/busy" "one core kept busy by a spinning process"
  echo
  echo "### busy / quiet time per step (1.0 = unaffected)"
  echo
  echo "| step | threads | keel | libtorch |"
  echo "|---|---|---|---|"
  join <(awk '{print $1 "/" $2, $3}' "$TMP/quiet.keel.med" | sort) <(awk '{print $1 "/" $2, $3}' "$TMP/busy.keel.med" | sort) > "$TMP/k"
  join <(awk '{print $1 "/" $2, $3}' "$TMP/quiet.torch.med" | sort) <(awk '{print $1 "/" $2, $3}' "$TMP/busy.torch.med" | sort) > "$TMP/t" || true
  awk 'FNR == NR { t[$1] = $3 / $2; next }
       { split($1, p, "/"); printf "| %s | %s | %.2fx | %s |\n", p[1], p[2], $3 / $2, ($1 in t) ? sprintf("%.2fx", t[$1]) : "-" }' "$TMP/t" "$TMP/k"
fi
