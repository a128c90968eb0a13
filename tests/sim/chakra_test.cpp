// Plans as Chakra execution traces: every strategy's plan (and a
// transformer job's) written and read back whole, simulating to the same
// time; the standard fields an ASTRA-sim reads (node types, durations,
// sizes, the sends' and receives' ends and tags, stream order as control
// dependencies) checked op by op; bad files as one error naming the file.
#include "sim/chakra/chakra.hpp"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "chakra_et.pb.h"
#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/transformer_plan.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("trainsim-chakra-" + std::to_string(getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::string prefix() const { return (path_ / "trainsim").string(); }

 private:
  fs::path path_;
};

void expect_round_trip(const Plan& plan, const Cluster& cluster) {
  const TempDir dir;
  ASSERT_EQ(write_chakra_plan(plan, dir.str()), static_cast<int>(plan.workers.size()));
  const Plan back = read_chakra_plan(dir.prefix());
  const nlohmann::json a = plan_to_json(back), b = plan_to_json(plan);
  for (size_t i = 0; i < std::min(a["ops"].size(), b["ops"].size()); ++i) {  // the first op that differs, if one does
    ASSERT_EQ(a["ops"][i], b["ops"][i]) << "op " << i;
  }
  EXPECT_EQ(a, b);  // every op, field and dependency; workers, groups, servers
  EXPECT_EQ(back.streams, plan.streams);
  EXPECT_EQ(simulate_plan(back, cluster, SimOptions{}).iteration_s,
            simulate_plan(plan, cluster, SimOptions{}).iteration_s);
}

TEST(Chakra, EveryStrategysPlanComesBackWhole) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Cluster cluster = cluster_presets().front();
  const Profile profile = analytic_profile(model, 32, cluster);
  for (const StrategyInfo& strategy : strategy_registry()) {
    SCOPED_TRACE(strategy.id);
    expect_round_trip(generate_plan(strategy, profile, cluster, {}, 6), cluster);
  }
}

TEST(Chakra, ATransformerJobComesBackWhole) {
  const TransformerConfig& c = find_transformer_config("megatron-1.7b", "test");
  const GpuMachine& machine = find_gpu_machine("dgx-a100", "test");
  TransformerTraining pipeline;  // tensor-parallel all-reduces on the compute stream, transfers, data-parallel rings
  pipeline.tensor = 2;
  pipeline.pipeline = 2;
  pipeline.data = 4;
  const TransformerJob job = transformer_job(c, pipeline, 64, machine, {}, 1);
  expect_round_trip(job.plan, job.cluster);
  TransformerTraining sharded;  // ZeRO-3's reduce-scatters and all-gathers
  sharded.data = 16;
  sharded.zero_stage = 3;
  const TransformerJob zero = transformer_job(c, sharded, 64, machine, {}, 1);
  expect_round_trip(zero.plan, zero.cluster);
}

std::vector<ChakraProtoMsg::Node> read_nodes(const std::string& path, ChakraProtoMsg::GlobalMetadata& meta) {
  std::ifstream in(path, std::ios::binary);
  google::protobuf::io::IstreamInputStream stream(&in);
  bool eof = false;
  EXPECT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&meta, &stream, &eof));
  std::vector<ChakraProtoMsg::Node> nodes;
  for (ChakraProtoMsg::Node n; google::protobuf::util::ParseDelimitedFromZeroCopyStream(&n, &stream, &eof); n.Clear()) {
    nodes.push_back(n);
  }
  EXPECT_TRUE(eof) << path;
  return nodes;
}

int64_t attr(const ChakraProtoMsg::Node& n, const std::string& name) {
  for (const ChakraProtoMsg::AttributeProto& a : n.attr()) {
    if (a.name() == name) return a.int64_val();
  }
  ADD_FAILURE() << n.name() << " has no " << name;
  return -1;
}

// GPipe on four devices (sends and receives between stages) and Pipe-SGD's
// ring (AllReduces): what an ASTRA-sim reads of each node.
TEST(Chakra, TheStandardFieldsSayWhatASimulatorReads) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Cluster cluster = cluster_presets().front();
  const Profile profile = analytic_profile(model, 32, cluster);
  for (const char* id : {"gpipe", "pipesgd"}) {
    SCOPED_TRACE(id);
    const Plan plan = generate_plan(find_strategy(id, "test"), profile, cluster, {}, 4);
    const TempDir dir;
    write_chakra_plan(plan, dir.str());
    std::map<uint64_t, std::pair<int64_t, int64_t>> sends;                 // tag -> (destination, size)
    std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> receives;  // (worker, source, tag, size)
    size_t nodes = 0;
    for (size_t w = 0; w < plan.workers.size(); ++w) {
      ChakraProtoMsg::GlobalMetadata meta;
      const std::vector<ChakraProtoMsg::Node> file = read_nodes(dir.prefix() + "." + std::to_string(w) + ".et", meta);
      EXPECT_FALSE(meta.version().empty());
      std::map<int, uint64_t> last_on_stream;
      for (const ChakraProtoMsg::Node& n : file) {
        ++nodes;
        const Op& op = plan.ops[n.id()];
        EXPECT_EQ(op.worker, static_cast<int32_t>(w));
        // Stream order as a control dependency; data dependencies inside the file.
        const auto before = last_on_stream.find(static_cast<int>(op.stream));
        if (before == last_on_stream.end()) {
          EXPECT_EQ(n.ctrl_deps_size(), 0);
        } else {
          ASSERT_EQ(n.ctrl_deps_size(), 1);
          EXPECT_EQ(n.ctrl_deps(0), before->second);
        }
        last_on_stream[static_cast<int>(op.stream)] = n.id();
        for (const uint64_t d : n.data_deps()) EXPECT_EQ(plan.ops[d].worker, op.worker);
        if (is_compute(op.kind)) {
          EXPECT_EQ(n.type(), ChakraProtoMsg::COMP_NODE);
          EXPECT_EQ(n.duration_micros(), static_cast<uint64_t>(std::llround(op.work_s * 1e6)));
        } else if (op.kind == OpKind::kAllReduce) {
          EXPECT_EQ(n.type(), ChakraProtoMsg::COMM_COLL_NODE);
          EXPECT_EQ(attr(n, "comm_type"), ChakraProtoMsg::ALL_REDUCE);
          EXPECT_EQ(attr(n, "comm_size"), std::llround(op.bytes));
        } else if (op.kind == OpKind::kSend) {
          EXPECT_EQ(n.type(), ChakraProtoMsg::COMM_SEND_NODE);
          sends[static_cast<uint64_t>(attr(n, "comm_tag"))] = {attr(n, "comm_dst"), attr(n, "comm_size")};
          EXPECT_EQ(attr(n, "comm_size"), std::llround(op.bytes));
        } else if (op.kind == OpKind::kRecv) {
          EXPECT_EQ(n.type(), ChakraProtoMsg::COMM_RECV_NODE);
          receives.emplace_back(w, attr(n, "comm_src"), attr(n, "comm_tag"), attr(n, "comm_size"));
        }
      }
    }
    EXPECT_EQ(nodes, plan.ops.size());
    // Each receive names its send: from its source, to it, of its size.
    for (const auto& [worker, source, tag, size] : receives) {
      const auto send = sends.find(static_cast<uint64_t>(tag));
      ASSERT_NE(send, sends.end()) << "tag " << tag;
      EXPECT_EQ(send->second.first, worker);
      EXPECT_EQ(send->second.second, size);
      EXPECT_EQ(plan.ops[static_cast<size_t>(tag)].worker, source);
    }
    EXPECT_EQ(receives.size(), sends.size());
    EXPECT_EQ(std::string(id) == "gpipe", !receives.empty());
  }
}

TEST(Chakra, ABadTraceIsOneErrorNamingTheFile) {
  const TempDir dir;
  const auto error_of = [&dir]() -> std::string {
    try {
      read_chakra_plan(dir.prefix());
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of().find("trainsim.0.et: cannot be read"), std::string::npos) << error_of();
  const Model model = build_zoo_model("fmnist-mlp");
  const Cluster cluster = cluster_presets().front();
  const Plan plan =
      generate_plan(find_strategy("dp-ring", "test"), analytic_profile(model, 32, cluster), cluster, {}, 2);
  write_chakra_plan(plan, dir.str());
  const std::string one = dir.prefix() + ".1.et";
  const auto size = fs::file_size(one);
  fs::resize_file(one, size - 3);
  EXPECT_NE(error_of().find("trainsim.1.et: ends inside a node"), std::string::npos) << error_of();
  fs::remove(one);
  EXPECT_NE(error_of().find("trainsim.1.et: cannot be read"), std::string::npos) << error_of();
  {  // another tool's trace: metadata without trainsim's plan
    std::ofstream out(dir.prefix() + ".0.et", std::ios::binary | std::ios::trunc);
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("0.0.4");
    google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
  }
  EXPECT_NE(error_of().find("has no trainsim plan in its metadata"), std::string::npos) << error_of();
  std::ofstream(dir.prefix() + ".0.et", std::ios::binary | std::ios::trunc) << "\xff\xff\xff\xff\xff garbage";
  EXPECT_NE(error_of().find("does not start with a Chakra GlobalMetadata"), std::string::npos) << error_of();
}

}  // namespace
}  // namespace trainsim
