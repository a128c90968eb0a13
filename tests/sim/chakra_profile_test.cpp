// A Chakra execution trace another tool wrote (nodes as PyTorch's, through
// Chakra's converter) as a profile: every layer's times and parameters by
// hand; a trainsim export, a missing batch and a missing file refused.
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "chakra_et.pb.h"
#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/chakra/chakra.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
namespace pb = ChakraProtoMsg;

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("trainsim-chakra-profile-" + std::to_string(getpid()) + "-" + name);
}

pb::Node comp(uint64_t id, const std::string& name, uint64_t micros, bool cpu = false) {
  pb::Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(pb::COMP_NODE);
  n.set_duration_micros(micros);
  pb::AttributeProto* a = n.add_attr();
  a->set_name("is_cpu_op");
  a->set_bool_val(cpu);
  return n;
}

pb::Node all_reduce(uint64_t id, int64_t bytes) {
  pb::Node n;
  n.set_id(id);
  n.set_name("nccl:all_reduce");
  n.set_type(pb::COMM_COLL_NODE);
  pb::AttributeProto* type = n.add_attr();
  type->set_name("comm_type");
  type->set_int64_val(pb::ALL_REDUCE);
  pb::AttributeProto* size = n.add_attr();
  size->set_name("comm_size");
  size->set_int64_val(bytes);
  return n;
}

std::string write_foreign_trace() {
  const std::string path = temp("step.0.et").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
  const std::vector<pb::Node> nodes = {
      comp(1, "aten::to", 10),  // before the first op with weights: joins its layer
      comp(2, "aten::conv2d", 100),
      comp(3, "aten::relu", 20),
      comp(4, "aten::linear", 50),
      comp(5, "aten::cross_entropy_loss", 5),
      comp(6, "autograd::engine::evaluate_function: NllLossBackward0", 4),
      comp(7, "autograd::engine::evaluate_function: AddmmBackward0", 80),
      all_reduce(8, 10280),
      comp(9, "autograd::engine::evaluate_function: ReluBackward0", 15),
      comp(10, "autograd::engine::evaluate_function: ConvolutionBackward0", 200),
      all_reduce(11, 1792),
      comp(12, "aten::add_", 12),        // the optimizer: after the last backward node
      comp(13, "aten::empty", 3, true),  // the host's: left out where the device has compute nodes
  };
  for (const pb::Node& n : nodes) google::protobuf::util::SerializeDelimitedToOstream(n, &out);
  return path;
}

TEST(ChakraProfile, ATraceOfAnotherToolGivesEveryLayerByHand) {
  const std::string path = write_foreign_trace();
  const Profile p = read_chakra_profile(path, 8, "net");
  fs::remove(path);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.layers[0].name, "conv2d_0");
  EXPECT_EQ(p.layers[1].name, "linear_0");
  EXPECT_NEAR(p.layers[0].forward_s, 130e-6, 1e-12);   // to, conv2d, relu
  EXPECT_NEAR(p.layers[1].forward_s, 55e-6, 1e-12);    // linear, the loss
  EXPECT_NEAR(p.layers[1].backward_s, 84e-6, 1e-12);   // the loss's backward joins the linear's
  EXPECT_NEAR(p.layers[0].backward_s, 215e-6, 1e-12);  // the relu's joins the convolution's
  EXPECT_DOUBLE_EQ(p.layers[1].param_bytes, 10280);    // the all-reduce after the linear's backward
  EXPECT_DOUBLE_EQ(p.layers[0].param_bytes, 1792);
  EXPECT_NEAR(*p.layers[0].update_s, 12e-6 * 1792 / 12072, 1e-15);
  EXPECT_EQ(p.batch_size, 8);
  EXPECT_EQ(p.device.kind, "gpu");
  EXPECT_EQ(p.source, "imported:chakra");
  EXPECT_EQ(p.model, "net");
}

TEST(ChakraProfile, WhatIsNotATraceOfAnotherToolsStepIsRefused) {
  const std::string foreign = write_foreign_trace();
  try {
    read_chakra_profile(foreign, 0, "");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--batch");
  }
  fs::remove(foreign);
  EXPECT_THROW(read_chakra_profile(foreign, 8, ""), InputError);  // gone
  const Model model = build_zoo_model("fmnist-mlp");
  const Cluster cluster = cluster_presets().front();
  const fs::path dir = temp("export");
  write_chakra_plan(generate_plan(find_strategy("single", "test"), analytic_profile(model, 8, cluster), cluster, {}, 2),
                    dir.string());
  try {
    read_chakra_profile((dir / "trainsim.0.et").string(), 8, "");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a trainsim export"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainsim
