#pragma once
// Process-wide settings of keel itself (never of the user's other libraries).
namespace keel::config {

// Threads keel's CPU kernels (and the BLAS it calls) may use. Default: hardware threads.
void set_num_threads(int n);
int num_threads();

}  // namespace keel::config
