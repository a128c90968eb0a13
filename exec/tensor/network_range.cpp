// The forward and backward of a range of layers, as a pipeline stage runs
// them: the cut before the range comes in packed, the layers run in order
// over the graph (each reading its inputs' tensors), and the cut after the
// range goes out packed; backward the same with gradients, which add up where
// a tensor feeds several layers.
#include <span>
#include <string>
#include <utility>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

void check_range(const Network& network, const Weights& weights, int64_t first, int64_t last) {
  const auto count = static_cast<int64_t>(network.layers.size());
  TRAINSIM_CHECK(0 <= first && first <= last && last < count, "layer range [" + std::to_string(first) + ", " +
                                                                   std::to_string(last) + "] outside the network");
  TRAINSIM_CHECK(static_cast<int64_t>(weights.size()) == count, "weights are not one entry per layer");
  TRAINSIM_CHECK(network.cuts.size() == network.layers.size() + 1, "the network has no cuts (not built)");
}

const std::vector<int64_t>& sample_shape(const Network& network, int32_t tensor) {
  return tensor < 0 ? network.input_shape : network.output_shapes[static_cast<size_t>(tensor)];
}

// Tensors by index + 1 (slot 0 the model input), each held here or seen
// through a pointer to the packed input it arrived as.
struct Slots {
  explicit Slots(size_t tensors) : owned(tensors + 1), at(tensors + 1, nullptr) {}
  std::vector<Tensor> owned;
  std::vector<const Tensor*> at;

  void hold(int32_t tensor, Tensor value) {
    owned[tensor + 1] = std::move(value);
    at[tensor + 1] = &owned[tensor + 1];
  }
  void drop(int32_t tensor) {
    owned[tensor + 1] = Tensor{};
    at[tensor + 1] = nullptr;
  }
};

// Cut `i`'s tensors out of `packed`: a lone tensor is the packed one (held,
// when `owned` is the packed one's to give); several are cut out of each
// sample's row in order.
void unpack(const Network& network, int64_t i, const Tensor& packed, Slots& slots, Tensor* owned = nullptr) {
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  if (cut.size() == 1) {
    TRAINSIM_CHECK(packed.parts.empty(), "a boundary of one tensor arrived in parts");
    if (owned != nullptr) {
      slots.hold(cut[0], std::move(*owned));
    } else {
      slots.at[cut[0] + 1] = &packed;
    }
    return;
  }
  if (!packed.parts.empty()) {  // the tensors themselves: taken or seen, not copied
    TRAINSIM_CHECK(packed.parts.size() == cut.size(), "a boundary's parts are not its cut's tensors");
    for (size_t k = 0; k < cut.size(); ++k) {
      if (owned != nullptr) {
        slots.hold(cut[k], std::move(owned->parts[k]));
      } else {
        slots.at[cut[k] + 1] = &packed.parts[k];
      }
    }
    return;
  }
  const int64_t rows = packed.rows();
  int64_t column = 0;
  for (int32_t t : cut) {
    const std::vector<int64_t>& sample = sample_shape(network, t);
    std::vector<int64_t> shape{rows};
    shape.insert(shape.end(), sample.begin(), sample.end());
    Tensor value(shape);
    const int64_t width = rows == 0 ? 0 : value.row_size();
    TRAINSIM_CHECK(rows == 0 || column + width <= packed.row_size(), "a packed boundary is narrower than its cut");
    if (rows > 0) value.matrix() = packed.matrix().middleCols(column, width);
    column += width;
    slots.hold(t, std::move(value));
  }
  TRAINSIM_CHECK(rows == 0 || column == packed.row_size(), "a packed boundary is wider than its cut");
}

// Cut `i`'s tensors, a lone one as itself and several as the boundary's
// parts; a missing one (a gradient nothing produced) is zeros.
Tensor pack(const Network& network, int64_t i, Slots& slots, int64_t rows) {
  const std::vector<int32_t>& cut = network.cuts[static_cast<size_t>(i)];
  const auto tensor_or_zeros = [&](int32_t t) {
    if (slots.at[t + 1] == nullptr) {
      std::vector<int64_t> shape{rows};
      const std::vector<int64_t>& sample = sample_shape(network, t);
      shape.insert(shape.end(), sample.begin(), sample.end());
      return Tensor(shape);
    }
    if (slots.at[t + 1] == &slots.owned[t + 1]) return std::move(slots.owned[t + 1]);
    return *slots.at[t + 1];
  };
  if (cut.size() == 1) return tensor_or_zeros(cut[0]);
  Tensor boundary;
  boundary.shape = {rows};
  boundary.shape.insert(boundary.shape.end(), network.cut_shapes[static_cast<size_t>(i)].begin(),
                        network.cut_shapes[static_cast<size_t>(i)].end());
  for (int32_t t : cut) {
    boundary.parts.push_back(tensor_or_zeros(t));
    TRAINSIM_CHECK(boundary.parts.back().rows() == rows, "a boundary's tensors differ in batch size");
  }
  return boundary;
}

// Layers [first, last] forward over the graph, each output from
// `run_layer(i, its inputs, its input to consume or null)`: the lone input
// of a layer that reads it last, where this range holds it; after_layer(i),
// where given, once the output is held. `owned`, when given, is x's to take.
template <typename RunLayer>
Tensor forward_graph(const Network& network, int64_t first, int64_t last, const Tensor& x, RunLayer run_layer,
                     const AfterLayer& after_layer = {}, Tensor* owned = nullptr) {
  const int64_t rows = x.rows();
  Slots slots(network.layers.size());
  unpack(network, first, x, slots, owned);
  std::vector<const Tensor*> xs;
  for (int64_t i = first; i <= last; ++i) {
    const std::vector<int32_t>& inputs = network.inputs[static_cast<size_t>(i)];
    xs.clear();
    for (int32_t t : inputs) {
      TRAINSIM_CHECK(slots.at[t + 1] != nullptr, "a layer's input is not live in its range");
      xs.push_back(slots.at[t + 1]);
    }
    const int32_t lone = inputs.size() == 1 ? inputs[0] : 0;
    Tensor* consumable = inputs.size() == 1 && network.last_reader[lone + 1] == i &&
                                 slots.at[lone + 1] == &slots.owned[lone + 1]
                             ? &slots.owned[lone + 1]
                             : nullptr;
    Tensor y = run_layer(i, std::span<const Tensor* const>(xs), consumable);
    // What this layer read last and the boundary does not carry is done with.
    for (int32_t t : inputs) {
      if (network.last_reader[t + 1] == i) slots.drop(t);
    }
    slots.hold(static_cast<int32_t>(i), std::move(y));
    if (after_layer) after_layer(i);
  }
  return pack(network, last + 1, slots, rows);
}

}  // namespace

namespace {

Tensor forward_training(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& x,
                        std::vector<LayerCache>& caches, const AfterLayer& after_layer, Tensor* owned) {
  check_range(network, weights, first, last);
  caches.assign(static_cast<size_t>(last - first + 1), LayerCache{});
  return forward_graph(
      network, first, last, x,
      [&](int64_t i, std::span<const Tensor* const> xs, Tensor* consumable) {
        const ExecLayer& layer = *network.layers[i];
        LayerCache& cache = caches[i - first];
        return consumable != nullptr ? layer.forward_consuming(weights[i], std::move(*consumable), cache)
                                     : layer.forward_inputs(weights[i], xs, cache);
      },
      after_layer, owned);
}

}  // namespace

Tensor forward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& x,
                     std::vector<LayerCache>& caches, const AfterLayer& after_layer) {
  return forward_training(network, weights, first, last, x, caches, after_layer, nullptr);
}

Tensor forward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor&& x,
                     std::vector<LayerCache>& caches, const AfterLayer& after_layer) {
  return forward_training(network, weights, first, last, x, caches, after_layer, &x);
}

Tensor packed_boundary(Tensor boundary) {
  TRAINSIM_CHECK(boundary.resident == nullptr, "a boundary still on its device (Device::to_host first)");
  if (boundary.parts.empty()) return boundary;
  const int64_t rows = boundary.rows();
  Tensor packed(boundary.shape);
  int64_t column = 0;
  for (const Tensor& part : boundary.parts) {
    TRAINSIM_CHECK(part.rows() == rows, "a boundary's tensors differ in batch size");
    const int64_t width = rows == 0 ? 0 : part.row_size();
    TRAINSIM_CHECK(column + width <= packed.row_size(), "a boundary's parts are wider than its shape");
    if (rows > 0) packed.matrix().middleCols(column, width) = part.matrix();
    column += width;
  }
  TRAINSIM_CHECK(rows == 0 || column == packed.row_size(), "a boundary's parts are narrower than its shape");
  return packed;
}

Tensor forward_eval(const Network& network, const Weights& weights, const Statistics& statistics, const Tensor& x) {
  const auto last = static_cast<int64_t>(network.layers.size()) - 1;
  check_range(network, weights, 0, last);
  TRAINSIM_CHECK(statistics.size() == network.layers.size(), "statistics are not one entry per layer");
  return forward_graph(network, 0, last, x, [&](int64_t i, std::span<const Tensor* const> xs, Tensor*) {
    return network.layers[i]->forward_eval(weights[i], statistics[i], xs);
  });
}

namespace {

Tensor backward_graph(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& dy,
                      const std::vector<LayerCache>& caches, Gradients& grads, const AfterLayer& after_layer,
                      Tensor* owned) {
  check_range(network, weights, first, last);
  TRAINSIM_CHECK(static_cast<int64_t>(caches.size()) == last - first + 1, "caches are not one per layer of the range");
  TRAINSIM_CHECK(grads.size() == weights.size(), "gradients are not one entry per layer");
  const int64_t rows = dy.rows();
  Slots slots(network.layers.size());  // gradients, by tensor
  unpack(network, last + 1, dy, slots, owned);
  for (int64_t i = last; i >= first; --i) {
    const auto self = static_cast<int32_t>(i);
    TRAINSIM_CHECK(slots.at[self + 1] != nullptr, "a layer's output has no gradient");
    std::vector<Tensor> dxs = network.layers[i]->backward_inputs(weights[i], *slots.at[self + 1], caches[i - first], grads[i]);
    slots.drop(self);
    const std::vector<int32_t>& inputs = network.inputs[static_cast<size_t>(i)];
    TRAINSIM_CHECK(dxs.size() == inputs.size(), "a layer returned a gradient per input it does not have");
    for (size_t k = 0; k < inputs.size(); ++k) {
      const int32_t t = inputs[k];
      if (slots.at[t + 1] == nullptr) {
        slots.hold(t, std::move(dxs[k]));
      } else {
        if (slots.at[t + 1] != &slots.owned[t + 1]) slots.hold(t, Tensor(*slots.at[t + 1]));  // a copy to add into
        TRAINSIM_CHECK(slots.owned[t + 1].shape == dxs[k].shape, "gradients of one tensor differ in shape");
        slots.owned[t + 1].matrix() += dxs[k].matrix();
      }
    }
    if (after_layer) after_layer(i);
  }
  return pack(network, first, slots, rows);
}

}  // namespace

Tensor backward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& dy,
                      const std::vector<LayerCache>& caches, Gradients& grads, const AfterLayer& after_layer) {
  return backward_graph(network, weights, first, last, dy, caches, grads, after_layer, nullptr);
}

Tensor backward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor&& dy,
                      const std::vector<LayerCache>& caches, Gradients& grads, const AfterLayer& after_layer) {
  return backward_graph(network, weights, first, last, dy, caches, grads, after_layer, &dy);
}

}  // namespace trainsim
