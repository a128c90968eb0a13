// measure_cuda_cluster and measure_cuda_gpus_cluster in a build without CUDA: every call is refused.
#include <string>
#include <vector>

#include "model/error.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"

namespace trainsim {

Cluster measure_cuda_cluster(int device, int64_t workers, const CudaProbeOptions&) {
  const std::string spelled = "cuda:" + std::to_string(device) + (workers == 1 ? "" : "x" + std::to_string(workers));
  throw InputError("--device", "'" + spelled + "': this trainsim was built without CUDA",
                   "a build with -DTRAINSIM_WITH_CUDA=ON");
}

Cluster measure_cuda_gpus_cluster(const std::vector<int>&, const CudaProbeOptions&) {
  throw InputError("--device", "cuda: this trainsim was built without CUDA", "a build with -DTRAINSIM_WITH_CUDA=ON");
}

}  // namespace trainsim
