// A Chakra execution trace of another tool as a profile (chakra.hpp).
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "chakra_et.pb.h"
#include "model/error.hpp"
#include "profiles/kineto/kineto_import.hpp"
#include "sim/chakra/chakra.hpp"

namespace trainsim {
namespace {

namespace pb = ChakraProtoMsg;

bool is_backward(const std::string& name) {
  return name.find("Backward") != std::string::npos || name.rfind("autograd::engine::evaluate_function", 0) == 0;
}

// Whether a backward node differentiates an op with weights
// (ConvolutionBackward0, AddmmBackward0, NativeBatchNormBackward0, ...).
bool backward_has_weights(const std::string& name) {
  std::string lower;
  for (const char c : name) {
    if (c != '_') lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  for (const char* w :
       {"convolution", "addmm", "linear", "batchnorm", "layernorm", "groupnorm", "embedding", "rnn", "lstm", "gru"}) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

bool attr_bool(const pb::Node& n, const std::string& key, bool fallback) {
  for (const pb::AttributeProto& a : n.attr()) {
    if (a.name() == key && a.value_case() == pb::AttributeProto::kBoolVal) return a.bool_val();
  }
  return fallback;
}
double attr_number(const pb::Node& n, const std::string& key) {
  for (const pb::AttributeProto& a : n.attr()) {
    if (a.name() != key) continue;
    switch (a.value_case()) {
      case pb::AttributeProto::kInt64Val:
        return static_cast<double>(a.int64_val());
      case pb::AttributeProto::kUint64Val:
        return static_cast<double>(a.uint64_val());
      case pb::AttributeProto::kInt32Val:
        return a.int32_val();
      case pb::AttributeProto::kUint32Val:
        return a.uint32_val();
      case pb::AttributeProto::kDoubleVal:
        return a.double_val();
      default:
        return 0;
    }
  }
  return 0;
}

std::string layer_name(const std::string& op) {
  const size_t colon = op.rfind("::");
  std::string base = colon == std::string::npos ? op : op.substr(colon + 2);
  std::replace(base.begin(), base.end(), ' ', '_');
  return base.empty() ? "op" : base;
}

}  // namespace

Profile read_chakra_profile(const std::string& path, int64_t batch, const std::string& model) {
  quiet_protobuf_logging();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot be read", "a Chakra execution trace (.et)");
  google::protobuf::io::IstreamInputStream stream(&in);
  pb::GlobalMetadata meta;
  bool eof = false;
  if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&meta, &stream, &eof)) {
    throw InputError(path, "does not start with a Chakra GlobalMetadata", "a Chakra execution trace");
  }
  for (const pb::AttributeProto& a : meta.attr()) {
    if (a.name() == "trainsim.plan") {
      throw InputError(path, "is a trainsim export: a plan, not per-layer times",
                       "simulate --import-chakra PREFIX to run it, or a trace of another tool");
    }
  }
  std::vector<pb::Node> nodes;
  for (pb::Node n; google::protobuf::util::ParseDelimitedFromZeroCopyStream(&n, &stream, &eof); n.Clear()) {
    nodes.push_back(n);
  }
  if (!eof)
    throw InputError(path, "ends inside a node (truncated) or holds one that is not a Chakra Node", "a whole ET");
  const bool device = std::any_of(nodes.begin(), nodes.end(), [](const pb::Node& n) {
    return n.type() == pb::COMP_NODE && !attr_bool(n, "is_cpu_op", false);
  });
  // Compute nodes of the chosen side, and the all-reduces, in file order.
  std::vector<const pb::Node*> compute;
  std::vector<std::pair<size_t, double>> all_reduces;  // (compute nodes before it, bytes)
  for (const pb::Node& n : nodes) {
    if (n.type() == pb::COMP_NODE && attr_bool(n, "is_cpu_op", false) != device) compute.push_back(&n);
    if (n.type() == pb::COMM_COLL_NODE && attr_number(n, "comm_type") == static_cast<double>(pb::ALL_REDUCE)) {
      all_reduces.push_back({compute.size(), attr_number(n, "comm_size")});
    }
  }
  const auto first_backward =
      std::find_if(compute.begin(), compute.end(), [](const pb::Node* n) { return is_backward(n->name()); });
  if (compute.empty() || first_backward == compute.begin()) {
    throw InputError(path, "has no forward compute nodes before its backward", "a training step's execution trace");
  }
  const auto last_backward = std::find_if(compute.rbegin(), compute.rend(), [](const pb::Node* n) {
                               return is_backward(n->name());
                             }).base();  // one past the last backward node
  Profile p;
  p.model = model.empty() ? std::filesystem::path(path).stem().string() : model;
  p.device = {device ? "GPU" : "CPU", device ? "gpu" : "cpu"};
  p.source = "imported:chakra";
  if (batch < 1) throw InputError("--batch", "is needed: a Chakra ET records no batch", "the traced step's batch");
  p.batch_size = batch;
  // The forward's layers, each from an op with weights (ops before the first join it).
  std::vector<size_t> weighted;  // the layers with an op with weights, in forward order
  std::map<std::string, int> seen;
  bool current_weighted = false;
  const auto named = [&seen](const std::string& op) {
    const std::string base = layer_name(op);
    return base + "_" + std::to_string(seen[base]++);
  };
  for (auto it = compute.begin(); it != first_backward; ++it) {
    const std::string& name = (*it)->name();
    const bool weights = op_has_weights(name);
    if (p.layers.empty() || (weights && current_weighted)) {
      LayerProfile l;
      l.name = named(name);
      l.inputs = {p.layers.empty() ? "input" : p.layers.back().name};
      p.layers.push_back(std::move(l));
      current_weighted = weights;
    } else if (weights) {  // the ops before the first with weights: their layer is named after it
      --seen[p.layers.back().name.substr(0, p.layers.back().name.rfind('_'))];
      p.layers.back().name = named(name);
      current_weighted = true;
    }
    if (weights) weighted.push_back(p.layers.size() - 1);
    p.layers.back().forward_s += static_cast<double>((*it)->duration_micros()) * 1e-6;
  }
  // The backward's nodes: the k-th with weights to the k-th weighted layer from the end.
  size_t next = weighted.size();
  std::vector<size_t> finished;  // layers in the order their backward completed
  double waiting = 0;
  for (auto it = first_backward; it != last_backward; ++it) {
    const std::string& name = (*it)->name();
    const double s = static_cast<double>((*it)->duration_micros()) * 1e-6;
    if (backward_has_weights(name) && next > 0) {
      const size_t layer = weighted[--next];
      p.layers[layer].backward_s += s + waiting;
      waiting = 0;
      finished.push_back(layer);
    } else {
      waiting += s;
    }
  }
  p.layers.front().backward_s += waiting;
  // The all-reduces' bytes over the layers whose backward finished since the one before.
  double gradient_bytes = 0;
  size_t done = 0;
  const auto backward_begin = static_cast<size_t>(first_backward - compute.begin());
  for (const auto& [before, bytes] : all_reduces) {
    // backward nodes seen before this all-reduce: the weighted ones among compute[backward_begin, before)
    size_t weighted_seen = 0;
    for (size_t i = backward_begin; i < std::min(before, compute.size()); ++i) {
      if (backward_has_weights(compute[i]->name())) ++weighted_seen;
    }
    weighted_seen = std::min(weighted_seen, finished.size());
    std::vector<size_t> members(finished.begin() + static_cast<std::ptrdiff_t>(std::min(done, weighted_seen)),
                                finished.begin() + static_cast<std::ptrdiff_t>(weighted_seen));
    if (members.empty()) members.push_back(finished.empty() ? 0 : finished.back());
    for (const size_t l : members) p.layers[l].param_bytes += bytes / static_cast<double>(members.size());
    done = std::max(done, weighted_seen);
    gradient_bytes += bytes;
  }
  // The optimizer: the compute after the last backward node, by parameters (equally without).
  double optimizer_s = 0;
  for (auto it = last_backward; it != compute.end(); ++it)
    optimizer_s += static_cast<double>((*it)->duration_micros()) * 1e-6;
  for (LayerProfile& l : p.layers) {
    l.update_s = gradient_bytes > 0 ? optimizer_s * l.param_bytes / gradient_bytes
                                    : optimizer_s / static_cast<double>(p.layers.size());
  }
  validate_profile(p, path);
  return p;
}

}  // namespace trainsim
