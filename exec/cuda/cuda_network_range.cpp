// CudaNetwork's passes over a range of layers: the boundary before the range
// comes from the host, the range runs on the network's stream, and the
// boundary after it goes back, as exec/tensor/network_range.cpp cuts them.
// Every tensor the worker's ranges read, write or carry has its buffer here
// (every tensor of the model, without CudaNetworkOptions::held), so a cut's
// tensors land in the buffers the range's layers read, and their gradients
// in those the range's backward adds into.
#include <algorithm>
#include <string>

#include "exec/cuda/cuda_network.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {
namespace {

const std::vector<int64_t>& sample_shape(const Network& network, int32_t t) {
  return t < 0 ? network.input_shape : network.output_shapes[static_cast<size_t>(t)];
}

float* value_of(NetworkState& s, int32_t t) { return t < 0 ? s.input.get() : s.layers[static_cast<size_t>(t)]->y; }

// The buffer the backward reads tensor t's gradient from (the one its
// readers write or add into); tensors an identity layer passes on share it.
float* gradient_of(NetworkState& s, int32_t t) {
  if (t >= 0) return const_cast<float*>(s.layers[static_cast<size_t>(t)]->dy);
  return s.grad_buffers.empty() ? nullptr : s.grad_buffers[0].get();
}

// Layer `layer` computed here, and cut `i`'s tensors held (CudaNetworkOptions::held).
void check_computes(const NetworkState& s, int64_t layer) {
  TRAINSIM_CHECK(layer >= 0 && layer < static_cast<int64_t>(s.layers.size()), "a layer of the network");
  TRAINSIM_CHECK(s.layers[static_cast<size_t>(layer)]->computes,
                 s.layers[static_cast<size_t>(layer)]->name + ": a layer the GPU network does not hold");
}
void check_cut(const NetworkState& s, int64_t i) {
  TRAINSIM_CHECK(i >= 0 && i <= static_cast<int64_t>(s.layers.size()), "a cut of the network");
  TRAINSIM_CHECK(s.cuts.empty() || s.cuts[static_cast<size_t>(i)] != 0,
                 "cut " + std::to_string(i) + ": a boundary the GPU network does not hold");
}

void check_range(const NetworkState& s, const Network& network, int64_t first, int64_t last) {
  TRAINSIM_CHECK(network.layers.size() == s.layers.size() && network.cuts.size() == s.layers.size() + 1,
                 "the GPU network and the exec network are of one model");
  TRAINSIM_CHECK(0 <= first && first <= last && last < static_cast<int64_t>(s.layers.size()),
                 "layer range [" + std::to_string(first) + ", " + std::to_string(last) + "] outside the network");
  for (int64_t i = first; i <= last; ++i) check_computes(s, i);
  check_cut(s, first);
  check_cut(s, last + 1);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));  // the calling thread may be any of its worker's
}

// Cut `i`'s tensors and a packed array of the cut (each sample's row
// holding them side by side): into the array (`out`) from the buffers
// `where` names (zeros for a null one), or from the array into them
// (skipping a null one), device to device on the network's stream after
// the array's last work.
template <typename Where>
void copy_packed(NetworkState& s, const Network& network, int64_t i, KeptValues* values, bool out, Where where) {
  auto* k = dynamic_cast<KeptArray*>(values);
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  int64_t width = 0;
  for (const int32_t t : cut) width += element_count(sample_shape(network, t));
  TRAINSIM_CHECK(k != nullptr && k->gpu == s.context.device, "a boundary exported on another GPU");
  TRAINSIM_CHECK(k->values.size() == s.batch * width, "an exported boundary of " + std::to_string(k->values.size()) +
                                                          " values for a cut of " + std::to_string(s.batch * width));
  TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, k->written, 0));
  int64_t column = 0;
  for (const int32_t t : cut) {
    const int64_t w = element_count(sample_shape(network, t));
    float* buffer = where(t);
    float* packed = k->values.get() + column;
    const size_t pitch = sizeof(float) * static_cast<size_t>(width), row = sizeof(float) * static_cast<size_t>(w);
    if (buffer != nullptr && w > 0) {
      TRAINSIM_CUDA(cudaMemcpy2DAsync(out ? packed : buffer, out ? pitch : row, out ? buffer : packed,
                                      out ? row : pitch, row, static_cast<size_t>(s.batch), cudaMemcpyDeviceToDevice,
                                      s.context.stream));
    } else if (out && w > 0) {  // a gradient without a buffer: zeros
      TRAINSIM_CUDA(cudaMemset2DAsync(packed, pitch, 0, row, static_cast<size_t>(s.batch), s.context.stream));
    }
    column += w;
  }
  TRAINSIM_CUDA(cudaEventRecord(k->written, s.context.stream));
}

// The token ids of cut `i`'s tensors that land in the model input's buffer
// (the input itself, or passed on by identity layers), which an embedding
// reads, as the host gives them: alone, as parts, or packed side by side.
void check_cut_ids(NetworkState& s, const Network& network, int64_t i, const Tensor& x) {
  if (s.input.get() == nullptr) return;
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  const bool packed = cut.size() > 1 && x.parts.empty();
  if (cut.size() > 1 && !packed && x.parts.size() != cut.size()) return;  // upload_cut refuses it
  const int64_t tokens = element_count(network.input_shape);
  int64_t column = 0;
  for (size_t k = 0; k < cut.size(); ++k) {
    const int64_t w = element_count(sample_shape(network, cut[k]));
    if (value_of(s, cut[k]) == s.input.get()) {
      const Tensor& part = cut.size() == 1 || packed ? x : x.parts[k];
      const int64_t offset = packed ? column : 0;
      if (w == tokens && part.size() == s.batch * part.row_size() && part.row_size() >= offset + tokens) {
        check_token_ids(s, part.data.data() + offset, s.batch, tokens, part.row_size());
      }
    }
    column += w;
  }
}

// Copies cut `i` from x into the buffers `where` names (none where it
// names none): from the host tensor through the network's pinned input_up,
// or device to device from the array it was exported into.
template <typename Where>
void upload_cut(NetworkState& s, const Network& network, int64_t i, const Tensor& x, Where where) {
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  TRAINSIM_CHECK(x.rows() == s.batch, "a boundary of " + std::to_string(x.rows()) + " rows for a GPU network of " +
                                          std::to_string(s.batch));
  if (x.exported != nullptr) return copy_packed(s, network, i, x.exported->values.get(), /*out=*/false, where);
  const auto count = [&](int32_t t) { return s.batch * element_count(sample_shape(network, t)); };
  std::vector<float*> into;  // every destination named (or refused) before input_up is refilled
  for (const int32_t t : cut) into.push_back(where(t));
  if (cut.size() == 1 || !x.parts.empty()) {
    TRAINSIM_CHECK(cut.size() == 1 ? x.parts.empty() : x.parts.size() == cut.size(),
                   "a boundary's parts are not its cut's tensors");
    size_t floats = 0;
    for (size_t k = 0; k < cut.size(); ++k) {
      const Tensor& part = cut.size() == 1 ? x : x.parts[k];
      TRAINSIM_CHECK(part.size() == count(cut[k]), "a boundary tensor of the wrong size");
      floats += part.data.size();
    }
    float* up = refill(s.input_up, floats);
    for (size_t k = 0; k < cut.size(); ++k) {
      const Tensor& part = cut.size() == 1 ? x : x.parts[k];
      if (into[k] != nullptr) {
        std::copy(part.data.begin(), part.data.end(), up);
        TRAINSIM_CUDA(
            cudaMemcpyAsync(into[k], up, sizeof(float) * part.data.size(), cudaMemcpyHostToDevice, s.context.stream));
      }
      up += part.data.size();
    }
    record_copies(s.input_up, s.context.stream);
    return;
  }
  const int64_t width = x.row_size();
  int64_t columns = 0;  // checked before any copy is queued from input_up
  for (const int32_t t : cut) columns += element_count(sample_shape(network, t));
  TRAINSIM_CHECK(columns == width,
                 "a packed boundary is " + std::to_string(width) + " values wide, its cut " + std::to_string(columns));
  float* up = refill(s.input_up, x.data.size());
  std::copy(x.data.begin(), x.data.end(), up);
  int64_t column = 0;
  for (size_t k = 0; k < cut.size(); ++k) {  // packed: each sample's row holds the cut's tensors side by side
    const int64_t w = element_count(sample_shape(network, cut[k]));
    if (into[k] != nullptr && w > 0) {
      TRAINSIM_CUDA(cudaMemcpy2DAsync(into[k], sizeof(float) * w, up + column, sizeof(float) * width, sizeof(float) * w,
                                      s.batch, cudaMemcpyHostToDevice, s.context.stream));
    }
    column += w;
  }
  record_copies(s.input_up, s.context.stream);
}

// Cut `i` back from the buffers `where` names: a lone tensor as itself,
// several as the boundary's parts (zeros where a buffer is missing).
template <typename Where>
Tensor download_cut(NetworkState& s, const Network& network, int64_t i, Where where) {
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  const auto one = [&](int32_t t) {
    const float* from = where(t);
    std::vector<int64_t> shape = batched(s.batch, sample_shape(network, t));
    return from == nullptr ? Tensor(shape) : download(from, std::move(shape), s.context.stream);
  };
  if (cut.size() == 1) return one(cut[0]);
  Tensor boundary;
  boundary.shape = batched(s.batch, network.cut_shapes[static_cast<size_t>(i)]);
  for (const int32_t t : cut) boundary.parts.push_back(one(t));
  return boundary;
}

// Two tensors of one cut sharing a gradient buffer (an identity layer's
// input and output, both read past the cut) would need their gradients summed.
void check_distinct_gradients(NetworkState& s, const Network& network, int64_t i) {
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  for (size_t a = 0; a < cut.size(); ++a) {
    for (size_t b = a + 1; b < cut.size(); ++b) {
      if (gradient_of(s, cut[a]) == gradient_of(s, cut[b])) {
        throw InputError(network.model + ": " + network.layer_names[static_cast<size_t>(cut[b])],
                         "passes on a tensor also read past the boundary before layer " + std::to_string(i),
                         "a pipeline cut on the GPU device where no identity layer's input and output both cross");
      }
    }
  }
}

}  // namespace
}  // namespace cuda

void CudaNetwork::load_weights(const Weights& weights, int64_t first, int64_t last) {
  std::vector<int64_t> layers;
  for (int64_t i = first; i <= last; ++i) layers.push_back(i);
  load_layers(weights, layers);
}

// Through the network's pinned memory, together: the host waits only for
// the last load's copies out of it, and, for a load larger than the
// memory a network keeps for it, for each piece's copies before the next.
void CudaNetwork::load_layers(const Weights& weights, std::span<const int64_t> layers) {
  constexpr size_t kStagedFloats = size_t{16} << 20;  // 64 MiB
  cuda::NetworkState& s = *state_;
  TRAINSIM_CHECK(weights.size() == s.layers.size(), "weights of every layer");
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  struct Piece {
    float* to;
    const float* from;
    size_t floats;
  };
  std::vector<Piece> pieces;
  size_t left = 0;
  for (const int64_t i : layers) {
    cuda::check_computes(s, i);
    cuda::GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    const LayerParams& params = weights[static_cast<size_t>(i)];
    TRAINSIM_CHECK(params.size() == l.params.size(), l.name + ": weights of every parameter");
    for (size_t p = 0; p < params.size(); ++p) {
      TRAINSIM_CHECK(params[p].size() == l.params[p].size(), l.name + ": a weight of the wrong size");
      pieces.push_back({l.params[p].get(), params[p].data.data(), params[p].data.size()});
      left += params[p].data.size();
    }
  }
  float* up = nullptr;
  size_t used = 0, capacity = 0;
  for (Piece piece : pieces) {
    while (piece.floats > 0) {
      if (used == capacity) {  // the buffer (re)filled once the copies out of it are done
        if (up != nullptr) cuda::record_copies(s.weights_up, s.context.stream);
        capacity = std::min(left, kStagedFloats);
        up = cuda::refill(s.weights_up, capacity);
        used = 0;
      }
      const size_t n = std::min(piece.floats, capacity - used);
      std::copy_n(piece.from, n, up + used);
      TRAINSIM_CUDA(cudaMemcpyAsync(piece.to, up + used, sizeof(float) * n, cudaMemcpyHostToDevice, s.context.stream));
      used += n;
      left -= n;
      piece.to += n;
      piece.from += n;
      piece.floats -= n;
    }
  }
  if (up != nullptr) cuda::record_copies(s.weights_up, s.context.stream);
}

void CudaNetwork::load_kept_weights(int64_t layer, std::span<KeptValues* const> params) {
  cuda::NetworkState& s = *state_;
  cuda::check_computes(s, layer);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  TRAINSIM_CHECK(params.size() == l.params.size(), l.name + ": kept weights of every parameter");
  for (size_t p = 0; p < params.size(); ++p) {
    auto* k = dynamic_cast<cuda::KeptArray*>(params[p]);
    TRAINSIM_CHECK(k != nullptr && k->gpu == s.context.device && k->values.size() == l.params[p].size(),
                   l.name + ": weights kept by another GPU's store");
    TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, k->written, 0));
    TRAINSIM_CUDA(cudaMemcpyAsync(l.params[p].get(), k->values.get(), k->values.bytes(), cudaMemcpyDeviceToDevice,
                                  s.context.stream));
    TRAINSIM_CUDA(cudaEventRecord(k->written, s.context.stream));
  }
}

void CudaNetwork::fold_statistics(int64_t layer, KeptValues& running_mean, KeptValues& running_variance) {
  cuda::NetworkState& s = *state_;
  cuda::check_computes(s, layer);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  TRAINSIM_CHECK(l.op == cuda::Op::batchnorm, l.name + ": running statistics of a layer that is not a batch norm");
  cuda::KeptArray* kept[2] = {dynamic_cast<cuda::KeptArray*>(&running_mean),
                              dynamic_cast<cuda::KeptArray*>(&running_variance)};
  for (cuda::KeptArray* k : kept) {
    TRAINSIM_CHECK(k != nullptr && k->gpu == s.context.device && k->values.size() == l.norm.channels,
                   l.name + ": running statistics kept by another GPU's store");
    TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, k->written, 0));
  }
  cuda::norm_fold_running(l.norm.mean.get(), l.norm.variance.get(), kept[0]->values.get(), kept[1]->values.get(),
                          l.norm.channels, s.batch * l.norm.plane, kBatchNormMomentum, s.context.stream);
  TRAINSIM_CUDA(cudaGetLastError());
  for (cuda::KeptArray* k : kept) TRAINSIM_CUDA(cudaEventRecord(k->written, s.context.stream));
}

void CudaNetwork::forward_range(const Network& network, int64_t first, int64_t last, const Tensor* x) {
  cuda::NetworkState& s = *state_;
  cuda::check_range(s, network, first, last);
  if (x != nullptr) {
    if (x->exported == nullptr) cuda::check_cut_ids(s, network, first, *x);
    cuda::upload_cut(s, network, first, *x, [&](int32_t t) { return cuda::value_of(s, t); });
  }
  for (int64_t i = first; i <= last; ++i) cuda::forward(*s.layers[static_cast<size_t>(i)], s.context);
  TRAINSIM_CUDA(cudaGetLastError());
}

PendingLoss CudaNetwork::forward_range_loss(const Network& network, int64_t first, int64_t last, const Tensor* x,
                                            std::span<const int32_t> labels, float dlogits_scale) {
  cuda::NetworkState& s = *state_;
  cuda::check_range(s, network, first, last);
  TRAINSIM_CHECK(last + 1 == static_cast<int64_t>(s.layers.size()), "a loss after a layer that is not the last");
  TRAINSIM_CHECK(static_cast<int64_t>(labels.size()) == s.positions,
                 std::to_string(labels.size()) + " labels for " + std::to_string(s.positions) + " positions");
  for (const int32_t label : labels) {
    TRAINSIM_CHECK(label >= 0 && label < s.classes, "a label outside [0, " + std::to_string(s.classes) + ")");
  }
  // Through pinned memory (from pageable memory the copy may wait for the
  // whole stream), an int32 in each float's 4 bytes.
  static_assert(sizeof(int32_t) == sizeof(float));
  auto* up = reinterpret_cast<int32_t*>(cuda::refill(s.labels_up, labels.size()));
  std::copy(labels.begin(), labels.end(), up);
  TRAINSIM_CUDA(cudaMemcpyAsync(s.labels.get(), up, s.labels.bytes(), cudaMemcpyHostToDevice, s.context.stream));
  cuda::record_copies(s.labels_up, s.context.stream);
  forward_range(network, first, last, x);
  cuda::softmax_cross_entropy(s.layers.back()->y, s.labels.get(), s.positions, s.classes, s.loss.get(), s.dlogits.get(),
                              dlogits_scale, s.context.stream);
  TRAINSIM_CUDA(cudaGetLastError());
  return cuda::pending_loss(s);
}

std::vector<std::vector<Tensor>> CudaNetwork::batch_statistics(int64_t first, int64_t last) const {
  cuda::NetworkState& s = *state_;
  TRAINSIM_CHECK(0 <= first && first <= last && last < static_cast<int64_t>(s.layers.size()),
                 "a layer range of the network");
  for (int64_t i = first; i <= last; ++i) cuda::check_computes(s, i);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  // Every batch normalization's mean and variance into pinned memory, one wait.
  size_t floats = 0;
  for (int64_t i = first; i <= last; ++i) {
    const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op == cuda::Op::batchnorm) floats += 2 * static_cast<size_t>(l.norm.channels);
  }
  std::vector<std::vector<Tensor>> out(static_cast<size_t>(last - first + 1));
  if (floats == 0) return out;
  float* home = cuda::pinned_home(s, floats);
  size_t at = 0;
  for (int64_t i = first; i <= last; ++i) {
    const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op != cuda::Op::batchnorm) continue;
    for (const float* from : {l.norm.mean.get(), l.norm.variance.get()}) {
      TRAINSIM_CUDA(cudaMemcpyAsync(home + at, from, sizeof(float) * static_cast<size_t>(l.norm.channels),
                                    cudaMemcpyDeviceToHost, s.context.stream));
      at += static_cast<size_t>(l.norm.channels);
    }
  }
  TRAINSIM_CUDA(cudaStreamSynchronize(s.context.stream));
  at = 0;
  for (int64_t i = first; i <= last; ++i) {
    const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op != cuda::Op::batchnorm) continue;
    Tensor mean({l.norm.channels}), variance({l.norm.channels});
    for (float& v : mean.data) v = home[at++];
    for (float& v : variance.data) v = home[at++];
    out[static_cast<size_t>(i - first)] = {std::move(mean), std::move(variance)};
  }
  return out;
}

void CudaNetwork::backward_range(const Network& network, int64_t first, int64_t last, const Tensor* dy,
                                 Gradients& grads) {
  cuda::NetworkState& s = *state_;
  cuda::check_range(s, network, first, last);
  TRAINSIM_CHECK(grads.size() == s.layers.size(), "gradients of every layer");
  cuda::check_distinct_gradients(s, network, last + 1);
  cuda::check_distinct_gradients(s, network, first);
  for (int64_t i = first; i <= last; ++i) {
    const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op == cuda::Op::embedding_bag) continue;  // its rows go to the host, its dense gradient unused
    for (const auto& g : l.grads) TRAINSIM_CUDA(cudaMemsetAsync(g.get(), 0, g.bytes(), s.context.stream));
  }
  if (dy != nullptr) {
    cuda::upload_cut(s, network, last + 1, *dy, [&](int32_t t) {
      float* g = cuda::gradient_of(s, t);
      // The model's input passed on unchanged (a stage that flattens it
      // alone) has no gradient to take where none is computed for the
      // model's input: what arrives for it is dropped.
      TRAINSIM_CHECK(g != nullptr || (s.input.get() != nullptr && cuda::value_of(s, t) == s.input.get()),
                     "a GPU network built without input gradients");
      return g;
    });
  }
  for (int64_t i = last; i >= first; --i) cuda::backward_leaving_rows(*s.layers[static_cast<size_t>(i)], s.context);
  cuda::pass_range_gradients(s, first, last, grads);
}

Tensor CudaNetwork::cut_values(const Network& network, int64_t i) {
  cuda::NetworkState& s = *state_;
  cuda::check_cut(s, i);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  return cuda::download_cut(s, network, i, [&](int32_t t) { return cuda::value_of(s, t); });
}

Tensor CudaNetwork::cut_gradients(const Network& network, int64_t i) {
  cuda::NetworkState& s = *state_;
  cuda::check_cut(s, i);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  return cuda::download_cut(s, network, i, [&](int32_t t) { return cuda::gradient_of(s, t); });
}

// An array of the store, the cut's buffers copied in on the network's
// stream (zeros where a gradient has no buffer).
std::shared_ptr<KeptValues> CudaNetwork::export_cut(const Network& network, int64_t i, bool gradient,
                                                    DeviceStore& store) {
  cuda::NetworkState& s = *state_;
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  TRAINSIM_CHECK(i >= 0 && i < static_cast<int64_t>(network.cuts.size()), "a cut of the network");
  cuda::check_cut(s, i);
  std::shared_ptr<KeptValues> out =
      store.uninitialized(s.batch * element_count(network.cut_shapes[static_cast<size_t>(i)]));
  cuda::copy_packed(s, network, i, out.get(), /*out=*/true,
                    [&](int32_t t) { return gradient ? cuda::gradient_of(s, t) : cuda::value_of(s, t); });
  return out;
}

void CudaNetwork::queue_after(RangeNetwork& previous) {
  auto* other = dynamic_cast<CudaNetwork*>(&previous);
  cuda::NetworkState& s = *state_;
  TRAINSIM_CHECK(other != nullptr && other->state_->context.device == s.context.device,
                 "a GPU network ordered after a network of another GPU");
  cuda::NetworkState& p = *other->state_;
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  if (p.queued == nullptr) TRAINSIM_CUDA(cudaEventCreateWithFlags(&p.queued, cudaEventDisableTiming));
  // A wait takes the event as last recorded: recording it again later
  // leaves this one as it was.
  TRAINSIM_CUDA(cudaEventRecord(p.queued, p.context.stream));
  TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, p.queued, 0));
}

}  // namespace trainsim
