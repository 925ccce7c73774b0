#pragma once
// The collectives a strategy runs on: an interface over contiguous host buffers, with a
// one-process implementation here and MPI's in mpi_communicator.cpp (compiled when keel is built
// with KEEL_DISTRIBUTED). Internal to keel.
#include <cstddef>
#include <memory>
#include <string>

#include "keel/core/dtype.hpp"
#include "keel/distribute/strategy.hpp"

namespace keel::distribute::detail {

// Reductions the transport does itself (mean is sum, then a division by the strategy).
enum class Combine { sum, max, min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // In place: buf holds count elements of dtype on every rank; afterwards the elementwise
  // combination over the ranks. float16/bfloat16 are combined in float32 (rounded once).
  virtual void all_reduce(void* buf, std::size_t count, DType dtype, Combine op) = 0;
  // root's bytes into every rank's buf.
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // "local", "mpi": for messages.
  virtual std::string transport() const = 0;
};

// A world of one: every collective is the identity.
class LocalCommunicator final : public Communicator {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void all_reduce(void*, std::size_t, DType, Combine) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::string transport() const override { return "local"; }
};

// Whether keel was built with MPI.
bool mpi_built();
// The MPI world (MPI initialised on first use); throws where keel was built without MPI.
std::shared_ptr<Communicator> make_mpi_communicator(double timeout_s);
// The number of processes a launcher (mpirun, srun) says this job has, or 1 when none does.
int launcher_world_size();

}  // namespace keel::distribute::detail
