// CudaNetwork in a build without CUDA: constructing one says so.
#include "exec/cuda/cuda_device_store.hpp"
#include "exec/cuda/cuda_network.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {
struct NetworkState {};
}  // namespace cuda

void check_cuda_device(const Model&, int, const std::string& flag, bool) {
  throw InputError(flag, "cuda: this trainsim was built without CUDA", "a build with -DTRAINSIM_WITH_CUDA=ON");
}

CudaNetwork::CudaNetwork(const Model&, const Weights&, int64_t, int, const CudaNetworkOptions&) {
  throw InputError("--device", "cuda: this trainsim was built without CUDA", "a build with -DTRAINSIM_WITH_CUDA=ON");
}
CudaNetwork::~CudaNetwork() = default;

// Unreachable: no CudaNetwork exists in this build.
std::string CudaNetwork::device_name() const { return {}; }
int64_t CudaNetwork::captured_passes() const { return 0; }
int64_t CudaNetwork::batch() const { return 0; }
void CudaNetwork::set_batch(const Tensor&, std::span<const int32_t>) {}
double CudaNetwork::forward_and_loss() { return 0; }
void CudaNetwork::backward() {}
void CudaNetwork::update(const SgdOptions&) {}
GpuPassTimes CudaNetwork::timed_pass(const SgdOptions&) { return {}; }
Tensor CudaNetwork::output(int64_t) const { return {}; }
bool CudaNetwork::has_input_gradient(int64_t) const { return false; }
Tensor CudaNetwork::input_gradient(int64_t) const { return {}; }
Gradients CudaNetwork::gradients() const { return {}; }
Weights CudaNetwork::weights() const { return {}; }
void CudaNetwork::load_weights(const Weights&, int64_t, int64_t) {}
void CudaNetwork::load_layers(const Weights&, std::span<const int64_t>) {}
void CudaNetwork::forward_range(const Network&, int64_t, int64_t, const Tensor*) {}
PendingLoss CudaNetwork::forward_range_loss(const Network&, int64_t, int64_t, const Tensor*, std::span<const int32_t>,
                                            float) {
  return PendingLoss(0.0);
}
std::vector<std::vector<Tensor>> CudaNetwork::batch_statistics(int64_t, int64_t) const { return {}; }
void CudaNetwork::backward_range(const Network&, int64_t, int64_t, const Tensor*, Gradients&) {}
void CudaNetwork::load_kept_weights(int64_t, std::span<KeptValues* const>) {}
void CudaNetwork::fold_statistics(int64_t, KeptValues&, KeptValues&) {}
Tensor CudaNetwork::cut_values(const Network&, int64_t) { return {}; }
Tensor CudaNetwork::cut_gradients(const Network&, int64_t) { return {}; }
std::shared_ptr<KeptValues> CudaNetwork::export_cut(const Network&, int64_t, bool, DeviceStore&) { return nullptr; }
void CudaNetwork::queue_after(RangeNetwork&) {}
std::shared_ptr<WorkMark> CudaNetwork::mark() { return nullptr; }
void CudaNetwork::wait_for(const Tensor&) {}
std::shared_ptr<DeviceStore> make_cuda_device_store(int, std::shared_ptr<MemoryBudget>) { return nullptr; }
bool peer_gpus(int, int) { return false; }
int64_t cuda_convolution_searches() { return 0; }

}  // namespace trainsim
