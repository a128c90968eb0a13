// Plans as Chakra execution traces and back (chakra.hpp).
#include "sim/chakra/chakra.hpp"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "chakra_et.pb.h"
#include "model/error.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
namespace pb = ChakraProtoMsg;

constexpr const char* kVersion = "0.0.4";
constexpr const char* kPlanAttr = "trainsim.plan";
constexpr const char* kOpAttr = "trainsim.op";
constexpr const char* kDepsAttr = "trainsim.deps";

void add_int(pb::Node& n, const std::string& name, int64_t v) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void add_double(pb::Node& n, const std::string& name, double v) {
  if (v == 0) return;
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_double_val(v);
}

pb::CollectiveCommType comm_type(OpKind kind) {
  switch (kind) {
    case OpKind::kBroadcast:
      return pb::BROADCAST;
    case OpKind::kReduceScatter:
      return pb::REDUCE_SCATTER;
    case OpKind::kAllGather:
      return pb::ALL_GATHER;
    case OpKind::kBarrier:
      return pb::BARRIER;
    default:
      return pb::ALL_REDUCE;
  }
}

// The op's fields that the standard ones do not carry, in this order.
std::vector<int64_t> op_fields(const Op& op) {
  return {static_cast<int64_t>(op.kind),
          static_cast<int64_t>(op.stream),
          static_cast<int64_t>(op.payload),
          static_cast<int64_t>(op.weights),
          op.worker,
          op.stage,
          op.microbatch,
          op.iteration,
          op.weight_version,
          op.first_layer,
          op.last_layer,
          op.peer,
          op.group,
          static_cast<int64_t>(op.algorithm),
          static_cast<int64_t>(op.codec),
          static_cast<int64_t>(op.gradients),
          op.repeat,
          op.dense_only ? 1 : 0,
          op.weight_ahead};
}
constexpr size_t kOpFields = 19;

pb::Node node_of(const Plan& plan, OpId id, OpId before_on_stream) {
  const Op& op = plan.ops[static_cast<size_t>(id)];
  pb::Node n;
  n.set_id(static_cast<uint64_t>(id));
  n.set_name(std::string(op_kind_name(op.kind)) + (op.stage >= 0 ? " s" + std::to_string(op.stage) : "") +
             (op.microbatch >= 0 ? " m" + std::to_string(op.microbatch) : "") + " i" + std::to_string(op.iteration));
  if (before_on_stream >= 0) n.add_ctrl_deps(static_cast<uint64_t>(before_on_stream));
  for (const OpId d : op.deps) {
    if (plan.ops[static_cast<size_t>(d)].worker == op.worker) n.add_data_deps(static_cast<uint64_t>(d));
  }
  if (is_compute(op.kind) || op.kind == OpKind::kHostAccumulate || op.kind == OpKind::kServerStep) {
    n.set_type(pb::COMP_NODE);
    n.set_duration_micros(static_cast<uint64_t>(std::llround(op.work_s * 1e6)));
    pb::AttributeProto* cpu = n.add_attr();
    cpu->set_name("is_cpu_op");
    cpu->set_bool_val(!is_compute(op.kind));
  } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    const bool send = op.kind == OpKind::kSend;
    n.set_type(send ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE);
    OpId tag = id;
    double bytes = op.bytes;
    if (!send) {  // the send it receives: its dependency on the peer's kSend
      for (const OpId d : op.deps) {
        const Op& dep = plan.ops[static_cast<size_t>(d)];
        if (dep.kind == OpKind::kSend && dep.worker == op.peer && dep.peer == op.worker) {
          tag = d;
          bytes = dep.bytes;
        }
      }
    }
    add_int(n, send ? "comm_dst" : "comm_src", op.peer);
    add_int(n, "comm_size", std::llround(bytes));
    add_int(n, "comm_tag", tag);
  } else if (is_collective(op.kind)) {
    n.set_type(pb::COMM_COLL_NODE);
    add_int(n, "comm_type", comm_type(op.kind));
    add_int(n, "comm_size", std::llround(op.bytes));
  } else {  // kCopyToHost, kCopyToDevice
    n.set_type(op.kind == OpKind::kCopyToHost ? pb::MEM_STORE_NODE : pb::MEM_LOAD_NODE);
    pb::AttributeProto* size = n.add_attr();
    size->set_name("tensor_size");
    size->set_uint64_val(static_cast<uint64_t>(std::llround(op.bytes)));
  }
  pb::AttributeProto* fields = n.add_attr();
  fields->set_name(kOpAttr);
  for (const int64_t v : op_fields(op)) fields->mutable_int64_list()->add_values(v);
  add_double(n, "trainsim.work_s", op.work_s);
  add_double(n, "trainsim.bytes", op.bytes);
  add_double(n, "trainsim.alloc_bytes", op.alloc_bytes);
  add_double(n, "trainsim.free_bytes", op.free_bytes);
  if (!op.deps.empty()) {  // all of them, in order: the data_deps leave out other workers' ops
    pb::AttributeProto* r = n.add_attr();
    r->set_name(kDepsAttr);
    for (const OpId d : op.deps) r->mutable_int64_list()->add_values(d);
  }
  return n;
}

nlohmann::json plan_header(const Plan& plan) {
  nlohmann::json workers = nlohmann::json::array(), servers = nlohmann::json::array();
  for (const PlanWorker& w : plan.workers) workers.push_back({w.device, w.static_bytes});
  for (const PlanServer& s : plan.servers) servers.push_back({s.first_layer, s.last_layer, static_cast<int>(s.rule)});
  return {{"strategy", plan.strategy},
          {"config", plan.config},
          {"iterations", plan.iterations},
          {"samples_per_iteration", plan.samples_per_iteration},
          {"iteration_period", plan.iteration_period},
          {"drain_iterations", plan.drain_iterations},
          {"workers", workers},
          {"servers", servers},
          {"gathers_sparse_rows", plan.gathers_sparse_rows},
          {"groups", plan.groups},
          {"ops", plan.ops.size()}};
}

std::string file_of(const std::string& prefix, size_t worker) { return prefix + "." + std::to_string(worker) + ".et"; }

// The plan the files held: their header and ops, checked whole.
Plan plan_of(const nlohmann::json& header, std::map<OpId, Op>& ops, size_t workers, const std::string& prefix) {
  const size_t expected = header.value("ops", size_t{0});
  if (ops.size() != expected || (!ops.empty() && ops.rbegin()->first != static_cast<OpId>(ops.size()) - 1)) {
    throw InputError(prefix + ".*.et", std::to_string(ops.size()) + " nodes with trainsim's ops",
                     "the " + std::to_string(expected) + " ops of the exported plan, ids 0 on");
  }
  PlanBuilder builder(header.value("strategy", ""), static_cast<int32_t>(workers), header.value("iterations", 0),
                      header.value("samples_per_iteration", 0.0));
  builder.set_config(header.value("config", nlohmann::json::object()));
  builder.set_iteration_period(header.value("iteration_period", 1));
  builder.set_drain_iterations(header.value("drain_iterations", int64_t{0}));
  builder.set_gathers_sparse_rows(header.value("gathers_sparse_rows", false));
  for (size_t w = 0; w < workers; ++w) {
    builder.worker(static_cast<int32_t>(w)).device = header.at("workers").at(w).at(0).get<int32_t>();
    builder.worker(static_cast<int32_t>(w)).static_bytes = header.at("workers").at(w).at(1).get<double>();
  }
  for (const nlohmann::json& s : header.value("servers", nlohmann::json::array())) {
    builder.add_server(
        {s.at(0).get<int32_t>(), s.at(1).get<int32_t>(), static_cast<ServerRule>(s.at(2).get<int>() != 0)});
  }
  for (const nlohmann::json& g : header.value("groups", nlohmann::json::array())) {
    builder.group(g.get<std::vector<int32_t>>());
  }
  for (auto& [id, op] : ops) builder.add(std::move(op));
  try {
    return std::move(builder).build();
  } catch (const std::logic_error& e) {  // ids, groups, pairs or an order that cannot run
    throw InputError(prefix + ".*.et", std::string("is not a plan that can run: ") + e.what(), "an unchanged export");
  }
}

}  // namespace

int write_chakra_plan(const Plan& plan, const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw InputError("--export-chakra", "cannot make the folder '" + dir + "'", "a folder for one file a worker");
  }
  std::vector<std::vector<OpId>> by_worker(plan.workers.size());  // each worker's ops in id order
  for (OpId id = 0; id < static_cast<OpId>(plan.ops.size()); ++id) {
    by_worker[static_cast<size_t>(plan.ops[static_cast<size_t>(id)].worker)].push_back(id);
  }
  const std::string header = plan_header(plan).dump();
  for (size_t w = 0; w < plan.workers.size(); ++w) {  // one file open at a time: a job has thousands
    const std::string path = file_of((fs::path(dir) / prefix).string(), w);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) throw InputError("--export-chakra", "cannot write " + path, "a writable folder");
    pb::GlobalMetadata meta;
    meta.set_version(kVersion);
    pb::AttributeProto* plan_attr = meta.add_attr();
    plan_attr->set_name(kPlanAttr);
    plan_attr->set_string_val(header);
    pb::AttributeProto* rank = meta.add_attr();
    rank->set_name("trainsim.worker");
    rank->set_int64_val(static_cast<int64_t>(w));
    google::protobuf::util::SerializeDelimitedToOstream(meta, &file);
    std::vector<OpId> last(kStreamKinds, -1);
    for (const OpId id : by_worker[w]) {
      OpId& before = last[static_cast<size_t>(plan.ops[static_cast<size_t>(id)].stream)];
      google::protobuf::util::SerializeDelimitedToOstream(node_of(plan, id, before), &file);
      before = id;
    }
    file.close();
    if (!file) throw InputError("--export-chakra", "cannot write " + path, "space on the disk");
  }
  return static_cast<int>(plan.workers.size());
}

void quiet_protobuf_logging() {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
}

Plan read_chakra_plan(const std::string& prefix) {
  quiet_protobuf_logging();
  nlohmann::json header;
  std::map<OpId, Op> ops;
  size_t workers = 1;
  for (size_t w = 0; w < workers; ++w) {
    const std::string path = file_of(prefix, w);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot be read", "one Chakra ET a worker, " + prefix + ".W.et");
    google::protobuf::io::IstreamInputStream stream(&in);
    pb::GlobalMetadata meta;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&meta, &stream, &clean_eof)) {
      throw InputError(path, "does not start with a Chakra GlobalMetadata", "a Chakra execution trace");
    }
    const auto attr = std::find_if(meta.attr().begin(), meta.attr().end(),
                                   [](const pb::AttributeProto& a) { return a.name() == kPlanAttr; });
    if (attr == meta.attr().end()) {
      throw InputError(path, "has no trainsim plan in its metadata (a trace of another tool)",
                       "a Chakra ET written by trainsim simulate --export-chakra");
    }
    if (w == 0) {
      header = nlohmann::json::parse(attr->string_val(), nullptr, false);
      if (!header.is_object() || !header.contains("workers") || !header["workers"].is_array() ||
          header["workers"].empty()) {
        throw InputError(path, "has a trainsim plan attribute that is not a plan's header", "an unchanged export");
      }
      workers = header["workers"].size();
    }
    for (;;) {
      pb::Node n;
      if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&n, &stream, &clean_eof)) {
        if (clean_eof) break;
        throw InputError(path, "ends inside a node (truncated) or holds one that is not a Chakra Node",
                         "a whole Chakra execution trace");
      }
      Op op;
      std::vector<int64_t> fields;
      for (const pb::AttributeProto& a : n.attr()) {
        if (a.name() == kOpAttr) fields.assign(a.int64_list().values().begin(), a.int64_list().values().end());
        if (a.name() == "trainsim.work_s") op.work_s = a.double_val();
        if (a.name() == "trainsim.bytes") op.bytes = a.double_val();
        if (a.name() == "trainsim.alloc_bytes") op.alloc_bytes = a.double_val();
        if (a.name() == "trainsim.free_bytes") op.free_bytes = a.double_val();
        if (a.name() == kDepsAttr) {
          for (const int64_t d : a.int64_list().values()) op.deps.push_back(static_cast<OpId>(d));
        }
      }
      if (fields.size() != kOpFields) {
        throw InputError(path,
                         "node " + std::to_string(n.id()) + " has no trainsim.op attribute of " +
                             std::to_string(kOpFields) + " fields",
                         "an unchanged export");
      }
      constexpr std::array<int64_t, 16> kCounts = {17, kStreamKinds, 6, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3, 3};
      for (size_t f = 0; f < kCounts.size(); ++f) {
        if (kCounts[f] > 0 && (fields[f] < 0 || fields[f] >= kCounts[f])) {
          throw InputError(path,
                           "node " + std::to_string(n.id()) + " has field " + std::to_string(f) +
                               " of trainsim.op out of range (" + std::to_string(fields[f]) + ")",
                           "an unchanged export");
        }
      }
      op.kind = static_cast<OpKind>(fields[0]);
      op.stream = static_cast<StreamKind>(fields[1]);
      op.payload = static_cast<Payload>(fields[2]);
      op.weights = static_cast<WeightPolicy>(fields[3]);
      op.worker = static_cast<int32_t>(fields[4]);
      op.stage = static_cast<int32_t>(fields[5]);
      op.microbatch = static_cast<int32_t>(fields[6]);
      op.iteration = static_cast<int32_t>(fields[7]);
      op.weight_version = static_cast<int32_t>(fields[8]);
      op.first_layer = static_cast<int32_t>(fields[9]);
      op.last_layer = static_cast<int32_t>(fields[10]);
      op.peer = static_cast<int32_t>(fields[11]);
      op.group = static_cast<int32_t>(fields[12]);
      op.algorithm = static_cast<CollectiveAlgorithm>(fields[13]);
      op.codec = static_cast<Codec>(fields[14]);
      op.gradients = static_cast<GradientPart>(fields[15]);
      op.repeat = static_cast<int32_t>(fields[16]);
      op.dense_only = fields[17] != 0;
      op.weight_ahead = static_cast<int16_t>(fields[18]);
      if (op.worker != static_cast<int32_t>(w) || !ops.emplace(static_cast<OpId>(n.id()), std::move(op)).second) {
        throw InputError(path, "node " + std::to_string(n.id()) + " is another worker's or a second node of its id",
                         "one node an op, in its worker's file");
      }
    }
  }
  try {
    return plan_of(header, ops, workers, prefix);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(prefix + ".0.et", std::string("has a trainsim.plan header of the wrong shape: ") + e.what(),
                     "an unchanged export");
  }
}

}  // namespace trainsim
