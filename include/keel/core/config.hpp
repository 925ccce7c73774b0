#pragma once
// Process-wide settings of keel itself (never of the user's other libraries).
#include <cstddef>
#include <cstdint>

namespace keel::config {

// Threads keel's CPU kernels (and the BLAS it calls) may use. Default: hardware threads.
void set_num_threads(int n);
int num_threads();

// Whether keel's CPU kernels run on fewer threads while other processes keep cores of this
// process's CPU set busy: min(num_threads(), the cores left to it), from the system's CPU
// accounting, refreshed every 100 ms. A parallel region waits for its slowest thread, and a
// thread sharing its core with another process waits whole time slices for it. Default true;
// KEEL_YIELD_BUSY_CORES=0 in the environment makes it false at start-up. With it false, the
// number of threads (and so the bits of the few kernels whose sums split by thread) stays fixed.
void set_yield_busy_cores(bool enabled);
bool yield_busy_cores();

// Whether float32 matmuls and convolutions on CUDA may use TF32 tensor cores (10-bit mantissa
// products, float32 accumulation). Default false, so results match the CPU to float32 rounding.
// No effect on the CPU.
void set_tf32(bool enabled);
bool tf32();

// The CUDA caching allocator's counters for one device (all zero without CUDA).
struct CudaMemoryStats {
  std::size_t allocated_bytes = 0;       // held by live tensors and scratch buffers now
  std::size_t peak_allocated_bytes = 0;  // the most allocated_bytes has been
  std::size_t reserved_bytes = 0;        // obtained from cudaMalloc and not yet released
  std::size_t cached_bytes = 0;          // reserved but free, kept for reuse
  std::int64_t device_mallocs = 0;       // cudaMalloc calls so far
  std::int64_t cache_hits = 0;           // allocations served from the cache
  std::int64_t oom_retries = 0;          // times the cache was emptied to retry a failed cudaMalloc
};
CudaMemoryStats cuda_memory_stats(int device = 0);
// The same counters for host tensors of 1 KiB and more (the host caching allocator; smaller
// buffers come from malloc and are not counted), and a restart of its peak at the bytes held
// now: peak memory of a piece of work is the peak after a reset, less what was held before.
CudaMemoryStats host_memory_stats();
void reset_host_peak_memory();
// Returns every cached (free) block to the driver; live tensors are untouched.
void empty_cache();

}  // namespace keel::config
