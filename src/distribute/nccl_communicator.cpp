// keel::distribute's NCCL transport: collectives on GPU buffers run on NCCL (cuda/nccl.cu), on
// keel's stream of the replica's device; host buffers (the strategy's own small exchanges:
// shape checks, logs), barriers and NCCL's bootstrap go to the MPI communicator it wraps.
#include "distribute/communicator.hpp"

#include <fmt/core.h>

#include "backend/collectives.hpp"
#include "keel/core/error.hpp"

namespace keel::distribute::detail {

namespace nccl = backend::nccl;

bool nccl_built() { return nccl::built() && mpi_built(); }
std::string nccl_version() { return nccl_built() ? nccl::version() : ""; }

namespace {

nccl::Op nccl_op(Combine op) {
  return op == Combine::max ? nccl::Op::max : op == Combine::min ? nccl::Op::min : nccl::Op::sum;
}

class NcclCollective final : public PendingCollective {
 public:
  explicit NcclCollective(std::unique_ptr<nccl::Pending> p) : pending_(std::move(p)) {}
  bool test() override { return pending_->done(); }
  void wait() override { pending_->wait(); }

 private:
  std::unique_ptr<nccl::Pending> pending_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<Communicator> host, int device, double timeout_s)
      : host_(std::move(host)), device_(device) {
    // Rank 0 makes the id; MPI hands it to the others (with the host transport's deadline).
    nccl::UniqueId id{};
    if (host_->rank() == 0) id = nccl::unique_id();
    host_->broadcast(id.data(), id.size(), 0);
    nccl_ = nccl::join(id, host_->size(), host_->rank(), device_, timeout_s);
  }

  int size() const override { return host_->size(); }
  int rank() const override { return host_->rank(); }

  void all_reduce(void* buf, std::size_t count, DType dtype, Combine op) override {
    if (!on_gpu(buf)) return host_->all_reduce(buf, count, dtype, op);
    nccl_->all_reduce(buf, buf, count, dtype, nccl_op(op))->wait();
  }

  void all_reduce_into(const void* in, void* out, std::size_t count, DType dtype, Combine op) override {
    if (!on_gpu(in) || !on_gpu(out)) return host_->all_reduce_into(in, out, count, dtype, op);
    nccl_->all_reduce(in, out, count, dtype, nccl_op(op))->wait();
  }

  std::unique_ptr<PendingCollective> start_all_reduce(void* buf, std::size_t count, DType dtype,
                                                      Combine op) override {
    if (!on_gpu(buf)) return host_->start_all_reduce(buf, count, dtype, op);
    return std::make_unique<NcclCollective>(nccl_->all_reduce(buf, buf, count, dtype, nccl_op(op)));
  }

  void broadcast(void* buf, std::size_t bytes, int root) override {
    if (!on_gpu(buf)) return host_->broadcast(buf, bytes, root);
    nccl_->broadcast(buf, bytes, root)->wait();
  }

  void barrier() override { host_->barrier(); }
  std::string transport() const override { return "nccl"; }
  Device buffer_device() const override { return Device::cuda(device_); }

 private:
  bool on_gpu(const void* p) const { return nccl::on_device(p, device_); }

  std::shared_ptr<Communicator> host_;
  int device_;
  std::shared_ptr<nccl::Comm> nccl_;
};

}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host, int device,
                                                     double timeout_s) {
  if (!nccl_built())
    throw ValueError("distribute: keel was built without NCCL (it needs the CUDA backend, a CUDA toolkit with nccl.h "
                     "and libnccl, and MPI)");
  if (device < 0 || device >= cuda_device_count())
    throw DeviceError(fmt::format("distribute: NCCL needs a GPU; cuda:{} does not exist (this machine has {})", device,
                                  cuda_device_count()));
  return std::make_shared<NcclCommunicator>(std::move(host), device, timeout_s);
}

}  // namespace keel::distribute::detail
