// The workload text of ASTRA-sim 1.0 and SimAI, line by line for a
// hand-made profile: nanoseconds, the backward's split, the parameters'
// all-reduce, the header of each.
#include "profiles/workload_export.hpp"

#include <gtest/gtest.h>

#include "model/error.hpp"

namespace trainsim {
namespace {

Profile two_layers() {
  Profile p;
  p.model = "hand";
  p.batch_size = 8;
  LayerProfile conv;
  conv.name = "conv 1";
  conv.inputs = {"input"};
  conv.forward_s = 1.5e-3;
  conv.backward_s = 3e-3;
  conv.param_bytes = 4096;
  conv.update_s = 2e-6;
  LayerProfile relu;
  relu.name = "relu";
  relu.inputs = {"conv 1"};
  relu.forward_s = 0.25e-3;
  relu.backward_s = 0.5e-3;
  relu.backward_input_s = 0.5e-3;
  relu.backward_weight_s = 0;
  p.layers = {conv, relu};
  return p;
}

TEST(WorkloadText, EveryLayerALineInNanoseconds) {
  EXPECT_EQ(workload_text(two_layers(), 4, WorkloadFormat::kAstraSim),
            "DATA\n2\n"
            "conv_1\t-1\t1500000\tNONE\t0\t1500000\tNONE\t0\t1500000\tALLREDUCE\t4096\t2000\n"
            "relu\t-1\t250000\tNONE\t0\t500000\tNONE\t0\t1\tNONE\t0\t1\n");
  const std::string simai = workload_text(two_layers(), 4, WorkloadFormat::kSimAi);
  EXPECT_EQ(simai.substr(0, simai.find('\n')),
            "DATA model_parallel_NPU_group: 1 ep: 1 pp: 1 ga: 1 all_gpus: 4 checkpoints: 0 checkpoint_initiates: 0");
  EXPECT_EQ(parse_workload_format("simai", "--workload-format"), WorkloadFormat::kSimAi);
  EXPECT_THROW(parse_workload_format("astra", "--workload-format"), InputError);
}

}  // namespace
}  // namespace trainsim
