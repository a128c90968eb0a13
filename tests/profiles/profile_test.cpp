// Profile and cluster files: round trips and rejection of bad fields.
#include "profiles/profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "profiles/cluster.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim {
namespace {

Profile small_profile() {
  Profile p;
  p.model = "m";
  p.device = {"dev", "gpu"};
  p.batch_size = 8;
  p.source = "test";
  p.layers.push_back(testing_fixtures::layer("a", {"input"}, 1e-3, 2e-3, 100, 200));
  p.layers.push_back(testing_fixtures::layer("b", {"a", "input"}, 3e-3, 4e-3, 0, 50));
  return p;
}

TEST(Profile, JsonRoundTrip) {
  Profile p = small_profile();
  p.layers[0].backward_input_s = 1e-3;
  p.layers[0].update_s = 2e-4;
  p.layers[0].forward_fixed_s = 1e-4;
  const Profile back = profile_from_json(profile_to_json(p), "p.json");
  EXPECT_DOUBLE_EQ(back.layers[0].update_s.value(), 2e-4);
  EXPECT_FALSE(back.layers[1].update_s.has_value());
  EXPECT_DOUBLE_EQ(back.layers[0].forward_fixed_s.value(), 1e-4);
  EXPECT_FALSE(back.layers[0].backward_fixed_s.has_value());
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers[1].inputs, (std::vector<std::string>{"a", "input"}));
  EXPECT_DOUBLE_EQ(back.layers[0].backward_input_s.value(), 1e-3);
  EXPECT_FALSE(back.layers[1].backward_input_s.has_value());
  EXPECT_DOUBLE_EQ(total_forward_s(back), 4e-3);
}

TEST(Profile, RowsSeveralWorkersTouchAreMeasuredWhereTheProfileHasThem) {
  LayerProfile table = testing_fixtures::layer("a", {"input"}, 1e-3, 2e-3, 100, 200);
  table.sparse = true;
  table.sparsity = 0.1;
  // Independent draws: 1 − 0.9^d.
  EXPECT_DOUBLE_EQ(touched_fraction(table, 1), 0.1);
  EXPECT_NEAR(touched_fraction(table, 2), 0.19, 1e-12);
  EXPECT_NEAR(touched_fraction(table, 4), 1 - 0.9 * 0.9 * 0.9 * 0.9, 1e-12);
  // Measured at 2 and 4: those; at 3 linear in log2(3) = 1.585 between them;
  // at 8 two independent draws of the 4 workers' 0.2: 1 − 0.8².
  table.union_sparsity = {0.15, 0.2};
  EXPECT_DOUBLE_EQ(touched_fraction(table, 2), 0.15);
  EXPECT_NEAR(touched_fraction(table, 3), 0.15 + (std::log2(3.0) - 1) * 0.05, 1e-12);
  EXPECT_DOUBLE_EQ(touched_fraction(table, 4), 0.2);
  EXPECT_NEAR(touched_fraction(table, 8), 0.36, 1e-12);
  LayerProfile dense = table;
  dense.sparse = false;
  EXPECT_EQ(touched_fraction(dense, 8), 1.0);

  Profile p = small_profile();
  p.layers[0] = table;
  const Profile back = profile_from_json(profile_to_json(p), "p.json");
  EXPECT_EQ(back.layers[0].union_sparsity, (std::vector<double>{0.15, 0.2}));
  EXPECT_TRUE(back.layers[1].union_sparsity.empty());
  for (const double bad : {0.05, 1.5}) {  // below one worker's fraction; above the whole table
    auto doc = profile_to_json(p);
    doc["layers"][0]["union_sparsity"][1] = bad;
    try {
      profile_from_json(doc, "p.json");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("layers[0].union_sparsity[1]"), std::string::npos) << e.what();
    }
  }
}

TEST(Profile, NegativeTimeIsRejected) {
  auto doc = profile_to_json(small_profile());
  doc["layers"][1]["backward_s"] = -1.0;
  EXPECT_THROW(profile_from_json(doc, "p.json"), InputError);
}

TEST(Profile, FixedPartAboveItsWholeTimeIsRejected) {
  auto doc = profile_to_json(small_profile());
  doc["layers"][0]["forward_fixed_s"] = 2e-3;  // forward_s is 1 ms
  EXPECT_THROW(profile_from_json(doc, "p.json"), InputError);
}

TEST(Profile, NanTimeIsRejected) {
  Profile p = small_profile();
  p.layers[0].forward_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(validate_profile(p, "p"), InputError);
}

// The field a bad profile document is rejected at.
std::string rejected_field(const nlohmann::json& doc) {
  try {
    profile_from_json(doc, "p.json");
  } catch (const InputError& e) {
    return e.where();
  }
  return "accepted";
}

TEST(Profile, AnUnknownDtypeIsRejected) {
  auto doc = profile_to_json(small_profile());
  doc["dtype"] = "fp8-imaginary";
  EXPECT_EQ(rejected_field(doc), "p.json: dtype");
  doc["dtype"] = "bf16";
  EXPECT_EQ(rejected_field(doc), "accepted");
}

TEST(Profile, ValuesBeyondAnyRealLayerAreRejectedWithTheFieldPath) {
  auto doc = profile_to_json(small_profile());
  doc["layers"][1]["activation_bytes"] = 1e308;  // would sum to infinity
  EXPECT_EQ(rejected_field(doc), "p.json: layers[1].activation_bytes");
  doc = profile_to_json(small_profile());
  doc["layers"][0]["update_s"] = 1e300;
  EXPECT_EQ(rejected_field(doc), "p.json: layers[0].update_s");
  doc = profile_to_json(small_profile());
  doc["layers"][0]["flops"] = -1;
  EXPECT_EQ(rejected_field(doc), "p.json: layers[0].flops");
}

TEST(Profile, InfiniteOptionalFieldsAreRejected) {
  Profile p = small_profile();
  p.layers[1].workspace_bytes = std::numeric_limits<double>::infinity();
  EXPECT_THROW(validate_profile(p, "p"), InputError);
  p = small_profile();
  p.layers[1].sparsity = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(validate_profile(p, "p"), InputError);
}

TEST(Profile, WrongFormatIsRejected) {
  auto doc = profile_to_json(small_profile());
  doc["format"] = "trainsim.cluster/1";
  EXPECT_THROW(profile_from_json(doc, "p.json"), InputError);
}

}  // namespace
}  // namespace trainsim
