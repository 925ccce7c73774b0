#pragma once
// Device time for the profiler: marks on keel's stream of a device (a CUDA event recorded where
// the stream's queued work has reached), and the time between two marks as the device ran it.
// Plain C++17 with no CUDA header (cuda/device_timer.cu).
namespace keel::cuda::timing {

// Records a mark on keel's stream of `device`; returns its number. Marks come from a pool of
// timing events that reset() makes reusable.
int mark(int device);
// Microseconds from mark `from` to mark `to` (one device), as the device
// ran the work between them; waits until the device has passed `to`.
double elapsed_us(int from, int to);
// Every mark is free again (a profile starts).
void reset();

}  // namespace keel::cuda::timing
