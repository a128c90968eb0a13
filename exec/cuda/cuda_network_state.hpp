// Inside CudaNetwork: its context, layers and buffers, shared by the whole
// passes (cuda_network.cpp) and the passes over a range of layers that the
// interpreter's GPU device runs (cuda_network_range.cpp). Host code only.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/cuda/cuda_layer.hpp"
#include "exec/tensor/range_network.hpp"

namespace trainsim::cuda {

// Pinned host memory and the event after the copies in or out of it: a
// range's input from the host staged on its way up, a loss on its way down
// (refill, record_copies).
struct PinnedBuffer {
  float* host = nullptr;
  size_t capacity = 0;
  cudaEvent_t copied = nullptr;
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (copied != nullptr) {
      cudaEventSynchronize(copied);  // a copy may still be landing in `host`
      cudaEventDestroy(copied);
    }
    if (host != nullptr) cudaFreeHost(host);
  }
};

// A network's loss slots not in use; a slot goes back when the loss read
// from it (or dropped unread) lets it go.
struct LossSlots {
  std::mutex mu;
  std::vector<std::unique_ptr<PinnedBuffer>> idle;
};

struct NetworkState {
  Context context;
  std::vector<std::unique_ptr<GpuLayer>> layers;
  std::vector<std::vector<int32_t>> inputs;  // per layer, the tensors it reads (-1: the model's input)
  std::vector<DeviceArray<float>> grad_buffers;  // per tensor + 1 that roots a gradient, else empty
  std::string device_name;
  std::vector<uint8_t> cuts;  // per cut: its tensors held (CudaNetworkOptions::held); empty: every cut
  bool steps = true;          // CudaNetworkOptions::steps
  int64_t batch = 0;
  int64_t positions = 0, classes = 0;  // of the loss
  DeviceArray<float> input, loss, dlogits;
  DeviceArray<int32_t> labels;
  std::vector<cudaEvent_t> events;  // one before the pass, then one after each timed piece
  cudaEvent_t queued = nullptr;     // recorded where another network's work goes after this one's (queue_after)
  // Pinned host memory a range pass's parameter gradients or statistics
  // come back through, all of them on one synchronization (pinned_home).
  float* home = nullptr;
  size_t home_floats = 0;
  std::shared_ptr<LossSlots> loss_slots = std::make_shared<LossSlots>();
  // A range's input and labels, and the weights loaded from the host (64 MiB
  // at most at a time), go up through these (from pageable memory, a copy
  // may wait for the whole stream before it).
  PinnedBuffer input_up, labels_up, weights_up;

  ~NetworkState() {
    cudaSetDevice(context.device);  // the thread letting it go may have another GPU current
    // Its queued work done before its memory goes (a network let go to make
    // room for another may still have some: cudaStreamDestroy does not wait).
    if (context.stream != nullptr) cudaStreamSynchronize(context.stream);
    if (home != nullptr) cudaFreeHost(home);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (queued != nullptr) cudaEventDestroy(queued);
    if (context.dnn != nullptr) cudnnDestroy(context.dnn);
    if (context.blas != nullptr) cublasDestroy(context.blas);
    if (context.stream != nullptr) cudaStreamDestroy(context.stream);
  }
};

// Values the GPU device keeps (cuda_device_store.cpp): a gradient's sum, a
// parameter's weights or velocity, in device memory on `gpu`, and the event
// after the last work on them (a zeroing, a backward's add, a step, a
// network's load); any stream waits for it before its own work on them and
// records it after.
struct KeptArray : KeptValues {
  int gpu = 0;
  DeviceArray<float> values;
  cudaEvent_t written = nullptr;
};

// The mean over the positions of the loss the last forward computed
// (waits for the network's stream).
double mean_loss(const NetworkState& s);
// The same, copied on the network's stream into a slot of its own and read
// (waiting for that copy alone) when the host first asks.
PendingLoss pending_loss(NetworkState& s);
// Pinned host memory `buffer` of `capacity` floats holding at least
// `floats` (grown, its values lost, where it held fewer).
float* grown_pinned(float*& buffer, size_t& capacity, size_t floats);
// s.home holding at least `floats` (grown_pinned).
float* pinned_home(NetworkState& s, size_t floats);
// After a range's backward (CudaNetwork::backward_range): each parameter
// gradient of layers [first, last] added into `grads`: on the GPU into the
// sum a dense one's tensor names as resident, else into its host values;
// an embedding bag's sparse rows appended, built from its ids and dy as
// exec/tensor's (cuda_range_gradients.cpp). The host's come back through
// pinned memory on one wait.
void pass_range_gradients(NetworkState& s, int64_t first, int64_t last, Gradients& grads);
// `buffer` holding at least `floats`, to be written once the copies out of
// it queued before are done (a wait for those alone, not for the stream).
float* refill(PinnedBuffer& buffer, size_t floats);
// After the copies in or out of `buffer` are queued on `stream`.
void record_copies(PinnedBuffer& buffer, cudaStream_t stream);
// Host to device and back on `stream`; download waits for the copy.
void upload(float* to, const Tensor& from, cudaStream_t stream);
Tensor download(const float* from, std::vector<int64_t> shape, cudaStream_t stream);
std::vector<int64_t> batched(int64_t batch, const std::vector<int64_t>& shape);
// Token ids of `x` checked against each embedding that reads the model's input;
// or of `count` rows `stride` floats apart, `tokens` ids at the start of each.
void check_token_ids(const NetworkState& s, const Tensor& x);
void check_token_ids(const NetworkState& s, const float* rows, int64_t count, int64_t tokens, int64_t stride);

}  // namespace trainsim::cuda
