// What the generators write for an executor besides the ops' timing: each
// send's payload, each compute op's weight policy, each AllReduce's codec and
// dense-only flag, the plan's servers and sparse-row gathering, from the
// settings each strategy reads.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

Plan plan_for(const std::string& strategy, const std::string& model_name,
              const std::vector<std::pair<std::string, std::string>>& settings, int64_t devices = 2) {
  Cluster cluster = load_cluster("p40x4-pcie3");
  cluster.devices_per_machine = devices;
  const Profile profile = analytic_profile(build_zoo_model(model_name), 8, cluster);
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  return generate_plan(find_strategy(strategy, "--strategy"), profile, cluster, config, 6);
}

TEST(PlanFields, EverySendOfEveryStrategyNamesItsPayload) {
  for (const StrategyInfo& s : strategy_registry()) {
    for (const char* model : {"fmnist-mlp", "text-bag"}) {
      const Plan plan = plan_for(s.id, model, {});
      for (const Op& op : plan.ops) {
        if (op.kind == OpKind::kSend) {
          EXPECT_NE(op.payload, Payload::kNone) << s.id << " on " << model;
        }
      }
    }
  }
}

TEST(PlanFields, PipelinesSendActivationsForwardAndInputGradientsBack) {
  const Plan plan = plan_for("gpipe", "fmnist-mlp", {{"microbatches", "2"}});
  int64_t activations = 0, gradients = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kSend) continue;
    EXPECT_EQ(op.payload, op.worker == 0 ? Payload::kActivation : Payload::kInputGradient);
    (op.payload == Payload::kActivation ? activations : gradients) += 1;
  }
  EXPECT_EQ(activations, 6 * 2);
  EXPECT_EQ(gradients, 6 * 2);
}

TEST(PlanFields, DeviceServerReceivesGradientsAndSendsWeights) {
  const Plan plan = plan_for("dp-ps", "fmnist-mlp", {{"server", "device"}});
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kSend) continue;
    EXPECT_EQ(op.payload, op.worker == 0 ? Payload::kWeights : Payload::kParamGradient);
  }
  EXPECT_TRUE(plan.servers.empty());  // device 0 is a worker that updates, not a server thread
}

TEST(PlanFields, PipedreamBackwardsReadTheirForwardsStashedVersion) {
  const Plan plan = plan_for("pipedream", "fmnist-mlp", {});
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.weights, WeightPolicy::kLatest);
    }
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.weights, WeightPolicy::kStashed);
    }
  }
}

TEST(PlanFields, SpecTrainPredictsTwoStagesAheadOnTheFirstStage) {
  // Two stages: stage 0's forwards read s = 2S − k − 2 = 2 versions ahead, its
  // backwards s = k = 0 (the current weights); stage 1's forwards s = 1, its
  // backwards s = 1.
  const Plan plan = plan_for("dualpipe", "fmnist-mlp", {{"spectrain", "true"}});
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
    const int32_t ahead = op.stage == 0 ? (op.kind == OpKind::kForward ? 2 : 0) : 1;
    EXPECT_EQ(op.weights, ahead > 0 ? WeightPolicy::kPredicted : WeightPolicy::kLatest);
    EXPECT_EQ(op.weight_ahead, ahead);
  }
  for (const Op& op : plan_for("dualpipe", "fmnist-mlp", {{"spectrain", "false"}}).ops) {
    EXPECT_EQ(op.weights, WeightPolicy::kLatest);
  }
}

TEST(PlanFields, PipeSgdAllReducesCarryTheCompressionCodec) {
  for (const auto& [compression, codec] :
       std::vector<std::pair<std::string, Codec>>{{"none", Codec::kNone}, {"trunc16", Codec::kTrunc16},
                                                  {"quant8", Codec::kQuant8}}) {
    const Plan plan = plan_for("pipesgd", "fmnist-mlp", {{"compression", compression}});
    int64_t allreduces = 0;
    for (const Op& op : plan.ops) {
      if (op.kind != OpKind::kAllReduce) continue;
      ++allreduces;
      EXPECT_EQ(op.codec, codec) << compression;
      EXPECT_FALSE(op.dense_only);
    }
    EXPECT_GT(allreduces, 0);
  }
}

TEST(PlanFields, ParallaxServersFollowTheMode) {
  // text-bag: layer 0 is the sparse table, layers 1.. dense.
  const Plan hybrid = plan_for("parallax", "text-bag", {{"mode", "hybrid"}});
  ASSERT_EQ(hybrid.servers.size(), 1u);
  EXPECT_EQ(hybrid.servers[0].first_layer, 0);
  EXPECT_EQ(hybrid.servers[0].last_layer, 0);
  EXPECT_EQ(hybrid.servers[0].rule, ServerRule::kSparseRows);
  EXPECT_FALSE(hybrid.gathers_sparse_rows);
  for (const Op& op : hybrid.ops) {
    if (op.kind == OpKind::kAllReduce) {
      EXPECT_TRUE(op.dense_only);
    }
  }

  const Plan ps = plan_for("parallax", "text-bag", {{"mode", "ps"}});
  ASSERT_EQ(ps.servers.size(), 2u);
  EXPECT_EQ(ps.servers[1].first_layer, 1);
  EXPECT_EQ(ps.servers[1].last_layer, static_cast<int32_t>(build_zoo_model("text-bag").layers.size()) - 1);
  EXPECT_EQ(ps.servers[1].rule, ServerRule::kDense);

  const Plan ar = plan_for("parallax", "text-bag", {{"mode", "ar"}});
  EXPECT_TRUE(ar.servers.empty());
  EXPECT_TRUE(ar.gathers_sparse_rows);
  for (const Op& op : ar.ops) {
    if (op.kind == OpKind::kSend) {
      EXPECT_EQ(op.payload, Payload::kSparseRows);
    }
  }

  // One worker exchanges nothing: no servers.
  EXPECT_TRUE(plan_for("parallax", "text-bag", {{"mode", "hybrid"}, {"workers", "1"}}).servers.empty());
  // The dense model in ps mode: one server for every layer.
  const Plan dense = plan_for("parallax", "fmnist-mlp", {{"mode", "ps"}});
  ASSERT_EQ(dense.servers.size(), 1u);
  EXPECT_EQ(dense.servers[0].first_layer, 0);
  EXPECT_EQ(dense.servers[0].rule, ServerRule::kDense);
}

TEST(PlanFields, JsonNamesThem) {
  const nlohmann::json doc = plan_to_json(plan_for("parallax", "text-bag", {{"mode", "ps"}}));
  ASSERT_EQ(doc["servers"].size(), 2u);
  EXPECT_EQ(doc["servers"][0]["rule"], "sparse_rows");
  EXPECT_EQ(doc["servers"][1]["rule"], "dense");
  EXPECT_EQ(doc["gathers_sparse_rows"], false);
  const nlohmann::json dualpipe = plan_to_json(plan_for("dualpipe", "fmnist-mlp", {{"spectrain", "true"}}));
  bool predicted = false, activation = false;
  for (const auto& op : dualpipe["ops"]) {
    predicted = predicted || (op.value("weights", "") == "predicted" && op.contains("weight_ahead"));
    activation = activation || op.value("payload", "") == "activation";
  }
  EXPECT_TRUE(predicted);
  EXPECT_TRUE(activation);
  const nlohmann::json pipesgd = plan_to_json(plan_for("pipesgd", "fmnist-mlp", {{"compression", "quant8"}}));
  bool quant8 = false;
  for (const auto& op : pipesgd["ops"]) quant8 = quant8 || op.value("codec", "") == "quant8";
  EXPECT_TRUE(quant8);
}

}  // namespace
}  // namespace trainsim
