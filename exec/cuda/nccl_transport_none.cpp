// The NCCL transports in a build without CUDA: making one says so.
#include "exec/cuda/nccl_transport.hpp"
#include "model/error.hpp"

namespace trainsim {

std::shared_ptr<NcclCommunicators> make_nccl_communicators() { return nullptr; }

std::unique_ptr<Transport> make_nccl_transport(const std::vector<int>& gpu_of_worker, double,
                                               std::shared_ptr<NcclCommunicators>) {
  check_nccl_gpu(gpu_of_worker.empty() ? 0 : gpu_of_worker.front());
  return nullptr;
}

std::unique_ptr<LibraryMember> make_nccl_rank_member(int gpu, int, int) {
  check_nccl_gpu(gpu);
  return nullptr;
}

void check_nccl_gpu(int) {
  throw InputError("--devices", "cuda: this trainsim was built without CUDA", "a build with -DTRAINSIM_WITH_CUDA=ON");
}

std::string nccl_library_error() { return "built without CUDA"; }
std::string nccl_version_text() { return ""; }

}  // namespace trainsim
