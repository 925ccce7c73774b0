#!/usr/bin/env python3
"""Expected data-parallel scaling from a measured step time and the ring all-reduce cost.

Each worker computes its step (forward, backward, update) in `compute` seconds on its share of the
batch, and the gradients (4 bytes per float32 parameter) are summed with a ring all-reduce, which
moves 2 (N - 1) / N * bytes through each worker's link:

    comm(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency

(the bandwidth term is the ring's volume; the latency term its 2 (N - 1) sequential hops, 5 us
each by default, an RDMA network's order). Without overlap a step takes compute + comm(N); with communication hidden under the backward
pass (as DDP's buckets do), max(compute, comm(N)) at best. The speedup over one worker at the
same per-worker batch is N * compute / step, the efficiency speedup / N.

The step times given are divided by --speedup first: a step measured on a CPU core stands for a
GPU's with --speedup = (GPU throughput / the core's), an assumption the caller states.

    python3 scripts/scaling_model.py --speedup 400 --model "seed CNN" 156074 10.8 \
        --model "100M MLP" 100687872 329

prints a Markdown table (one row per model, network and worker count).
"""
import argparse


def comm_seconds(workers: int, grad_bytes: float, gbit_per_s: float, latency_s: float) -> float:
    if workers <= 1:
        return 0.0
    return 2.0 * (workers - 1) / workers * grad_bytes / (gbit_per_s * 1e9 / 8.0) + 2.0 * (workers - 1) * latency_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", nargs=3, action="append", metavar=("NAME", "PARAMS", "STEP_MS"), required=True,
                    help="a model: its name, its float32 parameter count and its measured step time in ms")
    ap.add_argument("--workers", type=int, nargs="+", default=[8, 64, 512])
    ap.add_argument("--gbps", type=float, nargs="+", default=[100.0, 400.0], help="link bandwidths in Gb/s")
    ap.add_argument("--latency-us", type=float, default=5.0, help="one hop's latency in microseconds")
    ap.add_argument("--speedup", type=float, default=1.0, help="the step times are divided by this")
    args = ap.parse_args()
    if args.speedup <= 0:
        ap.error("--speedup must be positive")

    print("| model | params | step (1 worker) | network | workers | all-reduce | speedup, no overlap "
          "| efficiency | speedup, full overlap | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, params, step_ms in args.model:
        n_params = int(params)
        compute = float(step_ms) / 1e3 / args.speedup
        grad_bytes = 4.0 * n_params
        for gbps in args.gbps:
            for n in args.workers:
                comm = comm_seconds(n, grad_bytes, gbps, args.latency_us * 1e-6)
                serial = n * compute / (compute + comm)
                overlapped = n * compute / max(compute, comm)
                print(f"| {name} | {n_params / 1e6:.2f} M | {compute * 1e3:.3g} ms | {gbps:g} Gb/s | {n} "
                      f"| {comm * 1e3:.3g} ms | {serial:.1f}x | {serial / n:.0%} | {overlapped:.1f}x "
                      f"| {overlapped / n:.0%} |")


if __name__ == "__main__":
    main()
