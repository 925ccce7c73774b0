#!/usr/bin/env bash
# Throughput and latency of keel-serve on loopback, with and without server-side batching.
#   scripts/bench-serve.sh BUILD_DIR [CLIENTS] [REQUESTS]
# Builds nothing: BUILD_DIR must hold serve/keel-serve, serve/save_demo_model and
# serve/keel-serve-bench (cmake --build BUILD_DIR --target keel-serve save_demo_model keel-serve-bench).
# Each run: 32 client threads (keep-alive connections) x 20000 single-instance predict requests
# in total on the demo model (Dense 3 -> 2), every answer checked; prints one JSON line per mode.
set -euo pipefail
build=${1:?usage: bench-serve.sh BUILD_DIR [CLIENTS] [REQUESTS]}
clients=${2:-32}
requests=${3:-20000}
serve=$build/serve/keel-serve
save=$build/serve/save_demo_model
bench=$build/serve/keel-serve-bench
for f in "$serve" "$save" "$bench"; do
  [[ -x $f ]] || { echo "bench-serve.sh: $f is missing: build it first" >&2; exit 2; }
done
work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
"$save" "$work/demo/1"

run() {  # run MODE_NAME EXTRA_FLAGS...
  local mode=$1; shift
  : > "$work/log"
  "$serve" --model_name=demo --model_base_path="$work/demo" --rest_api_port=0 --rest_api_bind_address=127.0.0.1 \
    --rest_api_num_threads=$((clients + 8)) "$@" 2> "$work/log" &
  pid=$!
  local port=
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*Exporting HTTP\/REST API at:[^:]*:\([0-9]*\).*/\1/p' "$work/log" | head -1)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$work/log" >&2; echo "keel-serve did not start" >&2; exit 1; }
  local result
  result=$(timeout 300 "$bench" --port="$port" --model=demo --clients="$clients" --requests="$requests" \
           --expect='{"predictions":[[4.5,4.5]]}')
  local batches
  batches=$(curl -s "http://127.0.0.1:$port/monitoring/prometheus/metrics" 2>/dev/null |
            sed -n 's/^keel_serve_batches_total{model="demo"} //p' || true)
  kill -TERM "$pid"; wait "$pid"; pid=
  echo "{\"mode\": \"$mode\", \"model_calls_batched\": \"${batches:-0}\", \"result\": $result}"
}

run no_batching
run batching --enable_batching --max_batch_size=32 --batch_timeout_micros=500
