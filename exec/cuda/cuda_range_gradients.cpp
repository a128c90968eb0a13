// A range pass's parameter gradients to where the interpreter sums them
// (CudaNetwork::backward_range): a dense one whose sum the GPU device keeps
// is added into it on the GPU; the others, and an embedding bag's sparse
// rows (its ids and dy, the rows built on the host as exec/tensor's
// EmbeddingBag builds them), come back through pinned memory on one wait.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/cuda/cuda_network_state.hpp"
#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {
namespace {

// The floats an embedding bag brings back: its ids, then dy.
int64_t bag_ids(const GpuLayer& l) { return l.batch * l.in_shape[0]; }
int64_t bag_dy(const GpuLayer& l) { return l.batch * l.out_shape.back(); }

// The ids as the kernels read them (cuda_sequence_kernels.cu): below 0, or
// beyond the table, padding (-1).
std::vector<int64_t> bag_rows(std::span<const float> ids, int64_t vocabulary) {
  std::vector<int64_t> rows(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool in_table = ids[i] >= 0.0f && ids[i] < static_cast<float>(vocabulary);  // NaN too is padding
    rows[i] = in_table ? static_cast<int64_t>(ids[i]) : -1;
  }
  return rows;
}

}  // namespace

void pass_range_gradients(NetworkState& s, int64_t first, int64_t last, Gradients& grads) {
  size_t floats = 0;
  for (int64_t i = first; i <= last; ++i) {
    const GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    const LayerGrads& into = grads[static_cast<size_t>(i)];
    TRAINSIM_CHECK(into.size() == l.grads.size(), l.name + ": gradients of every parameter");
    if (l.op == Op::embedding_bag) {
      TRAINSIM_CHECK(into.size() == 1 && into[0].sparse && into[0].kept == nullptr && l.dy != nullptr,
                     l.name + ": a sparse gradient for the bag's table");
      floats += static_cast<size_t>(bag_ids(l) + bag_dy(l));
      continue;
    }
    for (size_t p = 0; p < l.grads.size(); ++p) {
      const ParamGrad& g = into[p];
      TRAINSIM_CHECK(!g.sparse && element_count(g.dense.shape) == l.grads[p].size(), l.name + ": a dense gradient");
      if (g.dense.resident == nullptr) {
        floats += static_cast<size_t>(l.grads[p].size());
        continue;
      }
      auto* k = dynamic_cast<KeptArray*>(static_cast<KeptValues*>(g.dense.resident.get()));
      TRAINSIM_CHECK(k != nullptr && k->gpu == s.context.device && k->values.size() == l.grads[p].size(),
                     l.name + ": a gradient kept by another GPU's store");
      TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, k->written, 0));
      pass_gradient(l.grads[p].get(), k->values.get(), k->values.size(), /*accumulate=*/true, s.context.stream);
      TRAINSIM_CUDA(cudaEventRecord(k->written, s.context.stream));
    }
  }
  TRAINSIM_CUDA(cudaGetLastError());
  if (floats == 0) return;
  float* home = pinned_home(s, floats);
  size_t at = 0;
  const auto bring = [&](const float* from, int64_t n) {
    TRAINSIM_CUDA(cudaMemcpyAsync(home + at, from, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToHost,
                                  s.context.stream));
    at += static_cast<size_t>(n);
  };
  for (int64_t i = first; i <= last; ++i) {
    const GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op == Op::embedding_bag) {
      bring(l.x(), bag_ids(l));
      bring(l.dy, bag_dy(l));
      continue;
    }
    for (size_t p = 0; p < l.grads.size(); ++p) {
      if (grads[static_cast<size_t>(i)][p].dense.resident == nullptr) bring(l.grads[p].get(), l.grads[p].size());
    }
  }
  TRAINSIM_CUDA(cudaStreamSynchronize(s.context.stream));
  at = 0;
  for (int64_t i = first; i <= last; ++i) {
    const GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    if (l.op == Op::embedding_bag) {
      const int64_t width = l.out_shape.back();
      const std::vector<int64_t> rows = bag_rows({home + at, static_cast<size_t>(bag_ids(l))}, l.vocabulary);
      at += static_cast<size_t>(bag_ids(l));
      ParamGrad& g = grads[static_cast<size_t>(i)][0];
      append_bag_rows(rows, {home + at, static_cast<size_t>(bag_dy(l))}, l.in_shape[0], width, g.rows,
                      g.row_values.data);
      g.row_values.shape = {static_cast<int64_t>(g.rows.size()), width};
      at += static_cast<size_t>(bag_dy(l));
      continue;
    }
    for (ParamGrad& into : grads[static_cast<size_t>(i)]) {
      if (into.dense.resident != nullptr) continue;
      for (float& v : into.dense.data) v += home[at++];
    }
  }
}

}  // namespace trainsim::cuda
