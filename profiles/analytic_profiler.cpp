// Roofline profile of a model on one device: per layer, time = launch +
// max(FLOPs / achievable FLOP rate, bytes / achievable bandwidth), all fp32.
#include "profiles/analytic_profiler.hpp"

#include <algorithm>
#include <unordered_map>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr double kFp32Bytes = 4.0;

// Bytes one forward pass of `layer` moves for the whole batch: its inputs and
// output once each, plus its parameters. An embedding reads only the rows it
// looks up, which are as many bytes as its output; another sparse layer (a
// sampled softmax) reads the fraction of its rows a batch touches.
double forward_bytes(const Layer& layer, int64_t batch,
                     const std::unordered_map<std::string, int64_t>& elements_by_name) {
  double input_elements = 0;
  for (const std::string& input : layer.inputs) input_elements += static_cast<double>(elements_by_name.at(input));
  const double output_elements = static_cast<double>(element_count(layer.output_shape));
  const double activation_bytes = kFp32Bytes * (input_elements + output_elements) * static_cast<double>(batch);
  const double output_bytes = kFp32Bytes * output_elements * static_cast<double>(batch);
  const double param_bytes = kFp32Bytes * static_cast<double>(layer.param_count);
  if (layer.op == "embedding") return activation_bytes + std::min(output_bytes, param_bytes);
  return activation_bytes + (layer.sparse ? sparse_fraction(layer, batch) : 1.0) * param_bytes;
}

// Sparse layers touch only part of their table per batch; at least one row,
// so a layer that looks up nothing still passes validate_profile.
double layer_sparsity(const Layer& layer, int64_t batch) {
  if (!layer.sparse) return 1.0;
  const double floor = layer.sparse_rows > 0 ? 1.0 / static_cast<double>(layer.sparse_rows) : 1.0;
  return std::max(sparse_fraction(layer, batch), floor);
}

}  // namespace

double compute_efficiency(const std::string& op) {
  if (op == "conv2d") return kConvEfficiency;
  if (op == "linear" || op == "sampled_softmax") return kLinearEfficiency;  // both GEMMs
  if (op == "lstm" || op == "attention_lstm") return kLstmEfficiency;      // recurrent GEMMs
  if (op == "attention") return kAttentionEfficiency;
  return kMemoryBoundOpEfficiency;
}

// Roofline model (Williams, Waterman, Patterson, CACM 2009) plus a launch cost.
double roofline_s(const DeviceSpec& device, const std::string& op, double flops, double bytes) {
  const double compute_s = flops / (device.peak_flops_per_s * compute_efficiency(op));
  const double memory_s = bytes / (device.memory_bytes_per_s * kMemoryEfficiency);
  return kLaunchOverheadS + std::max(compute_s, memory_s);
}

Profile analytic_profile(const Model& model, int64_t batch, const Cluster& cluster) {
  if (batch < 1 || batch > kMaxAnalyticBatch) {
    throw InputError("--batch", "is " + std::to_string(batch),
                     "a batch size from 1 to " + std::to_string(kMaxAnalyticBatch) + " samples per device");
  }
  validate_model(model, "model " + model.name);
  validate_cluster(cluster, "cluster " + cluster.name);

  Profile profile;
  profile.model = model.name;
  profile.device = {cluster.device.name, cluster.device.kind};
  profile.batch_size = batch;
  profile.dtype = "fp32";
  profile.source = "analytic";

  std::unordered_map<std::string, int64_t> elements_by_name{{kModelInput, element_count(model.input_shape)}};
  // A layer's output carries a gradient when it or an ancestor has parameters;
  // only then must the layers it feeds compute an input gradient for it.
  std::unordered_map<std::string, bool> carries_gradient{{kModelInput, false}};
  const DeviceSpec& device = cluster.device;
  for (const Layer& layer : model.layers) {
    bool input_gradient_needed = false;
    for (const std::string& input : layer.inputs) input_gradient_needed |= carries_gradient.at(input);

    const double flops = layer.forward_flops * static_cast<double>(batch);
    const double bytes = forward_bytes(layer, batch, elements_by_name);
    LayerProfile l;
    l.name = layer.name;
    l.inputs = layer.inputs;
    l.forward_s = roofline_s(device, layer.op, flops, bytes);
    if (layer.param_count > 0) {
      // Input- and weight-gradient passes are each a GEMM/conv of the forward's size.
      l.backward_input_s = input_gradient_needed ? l.forward_s : 0.0;
      l.backward_weight_s = l.forward_s;
      l.backward_s = *l.backward_input_s + *l.backward_weight_s;
    } else {
      // Parameter-free layers read the output gradient and the saved
      // activations and write the input gradient: about twice the forward bytes.
      l.backward_s = input_gradient_needed ? roofline_s(device, layer.op, flops, 2 * bytes) : 0.0;
    }
    l.param_bytes = kFp32Bytes * static_cast<double>(layer.param_count);
    l.activation_bytes = kFp32Bytes * static_cast<double>(element_count(layer.output_shape)) *
                         static_cast<double>(batch);
    l.sparse = layer.sparse;
    l.sparsity = layer_sparsity(layer, batch);
    l.flops = flops;
    profile.layers.push_back(std::move(l));

    elements_by_name[layer.name] = element_count(layer.output_shape);
    carries_gradient[layer.name] = layer.param_count > 0 || input_gradient_needed;
  }
  validate_profile(profile, "analytic profile of " + model.name);
  return profile;
}

}  // namespace trainsim
