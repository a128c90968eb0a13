// The 3-D search: every configuration it ranks fits, is priced as
// transformer_step prices it, and comes in order; the simulated best few
// are ranked by their simulation.
#include "sim/search/transformer_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace trainsim {
namespace {

const GpuMachine& a100() { return find_gpu_machine("dgx-a100", "test"); }

TEST(TransformerSearch, RanksWhatFitsFastestFirstAsTheClosedFormPricesIt) {
  const TransformerConfig& c = find_transformer_config("megatron-18.4b", "test");
  TransformerSearchOptions o;
  o.gpus = 64;
  o.global_batch = 256;
  const TransformerSearchResult r = search_transformer(c, a100(), o);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.fit, static_cast<int64_t>(r.ranked.size()));
  EXPECT_GT(r.evaluated, r.fit);  // some do not fit 80 GB (18.4B unsplit: 16 bytes a parameter)
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const TransformerCandidate& k = r.ranked[i];
    const TransformerTraining& t = k.training;
    EXPECT_EQ(t.tensor * t.pipeline * t.data, 64);
    EXPECT_LE(k.memory.total_bytes(), 80e9);
    EXPECT_DOUBLE_EQ(k.memory.total_bytes(), transformer_memory(c, t).total_bytes());
    EXPECT_DOUBLE_EQ(k.step.iteration_s, transformer_step(c, t, 256, a100()).iteration_s);
    EXPECT_FALSE(t.zero_stage >= 2 && t.pipeline > 1);  // a pipeline shards the optimizer states only
    EXPECT_FALSE(t.zero_bubble && (t.pipeline == 1 || t.virtual_stages > 1));
    if (i > 0) {
      EXPECT_LE(r.ranked[i - 1].step.iteration_s, k.step.iteration_s);
    }
  }
  // ZB-H1 is searched beside 1F1B wherever there is a pipeline.
  EXPECT_TRUE(std::any_of(r.ranked.begin(), r.ranked.end(),
                          [](const TransformerCandidate& k) { return k.training.zero_bubble; }));
  // Every ZeRO stage is searched (ZeRO-2 and -3 without a pipeline).
  for (const int stage : {0, 1, 2, 3}) {
    EXPECT_TRUE(std::any_of(r.ranked.begin(), r.ranked.end(), [stage](const TransformerCandidate& k) {
      return k.training.zero_stage == stage;
    })) << stage;
  }
  // A lower memory limit leaves fewer, all within it.
  o.memory_limit_bytes = 20e9;
  const TransformerSearchResult tight = search_transformer(c, a100(), o);
  EXPECT_LT(tight.fit, r.fit);
  for (const TransformerCandidate& k : tight.ranked) {
    EXPECT_LE(k.memory.total_bytes(), 20e9);
  }
}

TEST(TransformerSearch, TheBestFewAreRankedByTheirSimulation) {
  const TransformerConfig& c = find_transformer_config("megatron-39.1b", "test");
  TransformerSearchOptions o;
  o.gpus = 128;
  o.global_batch = 512;
  o.simulate = 4;
  const TransformerSearchResult r = search_transformer(c, a100(), o);
  ASSERT_GE(r.ranked.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    const TransformerCandidate& k = r.ranked[i];
    EXPECT_GT(k.simulated_iteration_s, 0);
    // The simulated pipeline within 2% of the closed form's (agreement_test, megatron_table1.py).
    EXPECT_NEAR(k.simulated_iteration_s / k.step.iteration_s, 1.0, 0.02);
    if (i > 0) {
      EXPECT_LE(r.ranked[i - 1].simulated_iteration_s, k.simulated_iteration_s);
    }
  }
  EXPECT_EQ(r.ranked[4].simulated_iteration_s, 0);
}

// Nothing fits: an empty ranking, not an error.
TEST(TransformerSearch, NothingFittingLeavesTheRankingEmpty) {
  TransformerSearchOptions o;
  o.gpus = 8;
  o.global_batch = 8;
  const TransformerSearchResult r = search_transformer(find_transformer_config("megatron-1008b", "test"), a100(), o);
  EXPECT_GT(r.evaluated, 0);
  EXPECT_EQ(r.fit, 0);
  EXPECT_TRUE(r.ranked.empty());
}

}  // namespace
}  // namespace trainsim
