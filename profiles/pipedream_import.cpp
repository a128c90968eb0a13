// PipeDream graph.txt → trainsim profile: parse node and edge lines, drop the
// Input nodes, order the layers topologically, infer the batch if asked.
#include "profiles/pipedream_import.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/error.hpp"
#include "model/layer.hpp"
#include "model/text_file.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

constexpr std::string_view kFieldSeparator = " -- ";
// Limits of what is read: PipeDream's graphs of the largest models are a few
// hundred kB, lines under 1 kB.
constexpr int64_t kMaxGraphBytes = int64_t{64} << 20;  // 64 MiB
constexpr int64_t kMaxLineBytes = int64_t{1} << 20;    // 1 MiB
constexpr const char* kNodeForm =
    "'ID -- DESCRIPTION -- forward_compute_time=F, backward_compute_time=B, activation_size=A, "
    "parameter_size=P[ -- stage_id=S]' or a TAB then 'FROM -- TO'";

struct Node {
  std::string id;
  std::string description;
  int64_t line = 0;
  double forward_ms = 0, backward_ms = 0, activation_bytes = 0, param_bytes = 0;
  bool is_input = false;             // an `Input*` source: becomes the profile's "input"
  std::vector<size_t> predecessors;  // node indices, in edge order, no repeats
};

struct Edge {
  std::string from, to;
  int64_t line = 0;
};

std::vector<std::string_view> split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string_view::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// A finite number >= 0 spelling the whole of `text`.
double parse_nonnegative(std::string_view text, std::string_view key, const std::string& where) {
  text = trim(text);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw InputError(where, std::string(key) + " is '" + std::string(text) + "'", "a number");
  }
  if (value < 0) throw InputError(where, std::string(key) + " is " + format_number(value), "a number >= 0");
  return value;
}

// "A" or "[a; b; c]" (a node with several outputs): the sum.
double parse_activation(std::string_view text, const std::string& where) {
  text = trim(text);
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return parse_nonnegative(text, "activation_size", where);
  }
  double sum = 0;
  for (std::string_view part : split(text.substr(1, text.size() - 2), ";")) {
    sum += parse_nonnegative(part, "activation_size", where);
  }
  return sum;
}

Node parse_node(std::string_view text, int64_t line, const std::string& where) {
  const std::vector<std::string_view> parts = split(text, kFieldSeparator);
  if (parts.size() < 3 || parts.size() > 4 || trim(parts[0]).empty()) {
    throw InputError(where, "'" + std::string(text.substr(0, 80)) + "' is neither a node nor an edge line", kNodeForm);
  }
  Node node;
  node.id = std::string(trim(parts[0]));
  node.description = std::string(trim(parts[1]));
  node.line = line;
  node.is_input = node.description.rfind("Input", 0) == 0;
  std::unordered_map<std::string_view, std::string_view> fields;
  for (std::string_view field : split(parts[2], ", ")) {
    const size_t equals = field.find('=');
    if (equals != std::string_view::npos) fields[trim(field.substr(0, equals))] = field.substr(equals + 1);
  }
  auto field = [&](std::string_view key) {
    auto it = fields.find(key);
    if (it == fields.end()) throw InputError(where, "node " + node.id + " has no " + std::string(key), kNodeForm);
    return it->second;
  };
  node.forward_ms = parse_nonnegative(field("forward_compute_time"), "forward_compute_time", where);
  node.backward_ms = parse_nonnegative(field("backward_compute_time"), "backward_compute_time", where);
  node.activation_bytes = parse_activation(field("activation_size"), where);
  node.param_bytes = parse_nonnegative(field("parameter_size"), "parameter_size", where);
  if (parts.size() == 4) {
    // The optimizer's stage assignment; trainsim partitions on its own.
    const std::string_view stage = trim(parts[3]);
    if (stage.rfind("stage_id=", 0) != 0) {
      throw InputError(where, "fourth field is '" + std::string(stage) + "'", "stage_id=S");
    }
    parse_nonnegative(stage.substr(9), "stage_id", where);
  }
  return node;
}

Edge parse_edge(std::string_view text, int64_t line, const std::string& where) {
  const std::vector<std::string_view> parts = split(text, kFieldSeparator);
  if (parts.size() != 2 || trim(parts[0]).empty() || trim(parts[1]).empty()) {
    throw InputError(where, "'\\t" + std::string(text.substr(0, 80)) + "' is neither a node nor an edge line",
                     kNodeForm);
  }
  return Edge{std::string(trim(parts[0])), std::string(trim(parts[1])), line};
}

std::string at_line(const std::string& path, int64_t line) { return path + ":line " + std::to_string(line); }

// Reads every line; nodes keep their line order.
void read_graph(const std::string& path, std::vector<Node>& nodes, std::vector<Edge>& edges) {
  const std::string contents = read_text_file(path, "a PipeDream graph.txt", kMaxGraphBytes);
  std::string_view rest = contents;
  for (int64_t line = 1; !rest.empty(); ++line) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    std::string_view text = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    const std::string where = at_line(path, line);
    if (static_cast<int64_t>(text.size()) > kMaxLineBytes) {
      throw InputError(where, "is longer than 1 MiB", "node and edge lines of a PipeDream graph.txt");
    }
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (trim(text).empty()) continue;
    if (text.front() == '\t') {
      edges.push_back(parse_edge(text.substr(1), line, where));
    } else {
      nodes.push_back(parse_node(text, line, where));
    }
  }
}

// Fills each node's predecessors from the edges.
void link_edges(const std::string& path, std::vector<Node>& nodes, const std::vector<Edge>& edges) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = index.emplace(nodes[i].id, i);
    if (!fresh) {
      throw InputError(at_line(path, nodes[i].line), "node " + nodes[i].id + " is defined twice",
                       "unique node ids (first at line " + std::to_string(nodes[it->second].line) + ")");
    }
  }
  for (const Edge& edge : edges) {
    const std::string where = at_line(path, edge.line);
    for (const std::string* id : {&edge.from, &edge.to}) {
      if (!index.count(*id)) throw InputError(where, "edge names unknown node '" + *id + "'", "ids of node lines");
    }
    Node& to = nodes[index.at(edge.to)];
    if (to.is_input) throw InputError(where, "edge into Input node " + to.id, "Input nodes only as sources");
    const size_t from = index.at(edge.from);
    if (std::find(to.predecessors.begin(), to.predecessors.end(), from) == to.predecessors.end()) {
      to.predecessors.push_back(from);
    }
  }
}

// Kahn's algorithm over the non-Input nodes; among ready nodes the earliest
// line goes first, so the order is deterministic.
std::vector<size_t> topological_order(const std::string& path, const std::vector<Node>& nodes) {
  std::vector<int64_t> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> successors(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t p : nodes[i].predecessors) {
      if (nodes[p].is_input) continue;
      ++pending[i];
      successors[p].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  size_t layer_count = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_input) continue;
    ++layer_count;
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t s : successors[i]) {
      if (--pending[s] == 0) ready.push(s);
    }
  }
  if (order.size() < layer_count) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].is_input && pending[i] > 0) {
        throw InputError(at_line(path, nodes[i].line), "node " + nodes[i].id + " is on or after a cycle",
                         "an acyclic graph");
      }
    }
  }
  return order;
}

// Batch from the single Input node's activation_size: A / (4 bytes · 3 · H · W).
int64_t infer_batch(const std::string& path, const std::vector<Node>& nodes) {
  const std::string advice = "pass --batch";
  std::vector<const Node*> inputs;
  for (const Node& node : nodes) {
    if (node.is_input) inputs.push_back(&node);
  }
  if (inputs.size() != 1) {
    throw InputError(path, "the batch size cannot be inferred: " + std::to_string(inputs.size()) + " Input nodes",
                     advice);
  }
  const double input_bytes = inputs.front()->activation_bytes;
  for (double side : {224.0, 299.0, 331.0, 32.0}) {
    const double sample_bytes = 4.0 * 3.0 * side * side;
    const double batch = input_bytes / sample_bytes;
    if (batch >= 1 && std::fmod(input_bytes, sample_bytes) == 0) return static_cast<int64_t>(batch);
  }
  throw InputError(at_line(path, inputs.front()->line),
                   "the batch size cannot be inferred: Input activation_size " + format_number(input_bytes) +
                       " is no multiple of 4·3·H·W for H = W = 224, 299, 331, 32",
                   advice);
}

}  // namespace

Profile import_pipedream_graph(const std::string& path, std::optional<int64_t> batch_size) {
  if (batch_size && *batch_size < 1) throw InputError("--batch", std::to_string(*batch_size), "a batch size >= 1");
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  read_graph(path, nodes, edges);
  link_edges(path, nodes, edges);
  const std::vector<size_t> order = topological_order(path, nodes);
  if (order.empty()) throw InputError(path, "has no layers", "node lines besides Input nodes");

  Profile profile;
  std::error_code error;
  profile.model = std::filesystem::absolute(path, error).parent_path().filename().string();
  if (profile.model.empty()) profile.model = "imported";
  profile.device = {"unknown (PipeDream profile)", "gpu"};
  profile.batch_size = batch_size ? *batch_size : infer_batch(path, nodes);
  profile.dtype = "fp32";
  profile.source = "imported:pipedream";
  for (size_t i : order) {
    const Node& node = nodes[i];
    LayerProfile layer;
    layer.name = node.id;
    for (size_t p : node.predecessors) {
      const std::string input = nodes[p].is_input ? std::string(kModelInput) : nodes[p].id;
      if (std::find(layer.inputs.begin(), layer.inputs.end(), input) == layer.inputs.end()) {
        layer.inputs.push_back(input);
      }
    }
    layer.forward_s = node.forward_ms / 1000.0;
    layer.backward_s = node.backward_ms / 1000.0;
    layer.param_bytes = node.param_bytes;
    layer.activation_bytes = node.activation_bytes;
    profile.layers.push_back(std::move(layer));
  }
  validate_profile(profile, path);
  return profile;
}

}  // namespace trainsim
