// Profile and cluster files: round trips and rejection of bad fields.
#include "profiles/profile.hpp"

#include <gtest/gtest.h>

#include <limits>

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
