// NcclTransport in a build without CUDA: making one says so.
#include "exec/cuda/nccl_transport.hpp"
#include "model/error.hpp"

namespace trainsim {

std::unique_ptr<Transport> make_nccl_transport(const std::vector<int>&, double) {
  throw InputError("--devices", "cuda: this trainsim was built without CUDA", "a build with -DTRAINSIM_WITH_CUDA=ON");
}

std::string nccl_library_error() { return "built without CUDA"; }

}  // namespace trainsim
