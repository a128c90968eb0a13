// Model-graph validation and the sparse-fraction formula.
#include "model/layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "model/error.hpp"
#include "model/model_json.hpp"

namespace trainsim {
namespace {

Model tiny_model() {
  Model m;
  m.name = "tiny";
  m.input_shape = {4};
  m.layers.push_back({"fc1", "linear", {"input"}, {3}, 15, 24});
  m.layers.push_back({"fc2", "linear", {"fc1"}, {2}, 8, 12});
  return m;
}

TEST(Model, CountsParametersAndFlops) {
  const Model m = tiny_model();
  EXPECT_EQ(param_count(m), 23);
  EXPECT_DOUBLE_EQ(forward_flops(m), 36);
  EXPECT_EQ(output_elements(m, "fc1"), 3);
  EXPECT_EQ(output_elements(m, "input"), 4);
}

TEST(Model, InputNamingALaterLayerIsRejected) {
  Model m = tiny_model();
  m.layers[0].inputs = {"fc2"};
  EXPECT_THROW(validate_model(m, "m"), InputError);
}

TEST(Model, DuplicateNamesAreRejected) {
  Model m = tiny_model();
  m.layers[1].name = "fc1";
  EXPECT_THROW(validate_model(m, "m"), InputError);
}

// The field an invalid model is rejected at.
std::string rejected_field(const Model& m) {
  try {
    validate_model(m, "m");
  } catch (const InputError& e) {
    return e.where();
  }
  return "accepted";
}

TEST(Model, AnUnknownOpIsRejected) {
  Model m = tiny_model();
  m.layers[1].op = "teleport";
  EXPECT_EQ(rejected_field(m), "m: layers[1].op");
}

TEST(Model, ALayerReadingNothingIsRejected) {
  Model m = tiny_model();
  m.layers[1].inputs.clear();
  EXPECT_EQ(rejected_field(m), "m: layers[1].inputs");
}

TEST(Model, AnOutputShapeTheOpCannotGiveIsRejected) {
  Model m = tiny_model();
  m.layers.push_back({"relu", "relu", {"fc2"}, {5}});  // relu of {2} gives {2}
  EXPECT_EQ(rejected_field(m), "m: layers[2].output_shape");
  m.layers.back() = {"sum", "add", {"fc1", "fc2"}, {3}};  // {3} + {2}
  EXPECT_EQ(rejected_field(m), "m: layers[2].output_shape");
  m.layers.back() = {"flat", "flatten", {"fc1"}, {4}};  // 3 elements
  EXPECT_EQ(rejected_field(m), "m: layers[2].output_shape");
  m.layers.back() = {"conv", "conv2d", {"fc1"}, {1, 3, 3}};  // a {3} input
  EXPECT_EQ(rejected_field(m), "m: layers[2].output_shape");
}

TEST(Model, ParameterCountsTheShapesFixAreChecked) {
  Model m = tiny_model();
  m.layers[0].param_count = 16;  // linear 4 -> 3 holds 12, or 15 with a bias
  EXPECT_EQ(rejected_field(m), "m: layers[0].param_count");
  m.layers[0].param_count = 12;
  EXPECT_EQ(rejected_field(m), "accepted");
  m.layers.push_back({"relu", "relu", {"fc2"}, {2}, 7});  // relu holds none
  EXPECT_EQ(rejected_field(m), "m: layers[2].param_count");
}

TEST(Model, ModelJsonIsValidatedAsFullyAsAZooModel) {
  nlohmann::json doc = model_to_json(tiny_model(), 1);
  doc["layers"][1]["op"] = "teleport";
  EXPECT_THROW(model_from_json(doc, "doc.json"), InputError);
}

// Found by fuzzing (tests/fuzz/corpus/model_json/description-number.json).
TEST(Model, ADescriptionThatIsNoStringIsAnInputError) {
  nlohmann::json doc = model_to_json(tiny_model(), 1);
  doc["description"] = 5;
  EXPECT_THROW(model_from_json(doc, "doc.json"), InputError);
  doc.erase("description");
  EXPECT_EQ(model_from_json(doc, "doc.json").description, "");
}

TEST(Model, JsonRoundTripKeepsEveryField) {
  Model m = tiny_model();
  m.layers[1].sparse = true;
  m.layers[1].sparse_rows = 100;
  m.layers[1].sparse_rows_per_sample = 3;
  const Model back = model_from_json(model_to_json(m, 8), "doc");
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers[1].inputs, std::vector<std::string>{"fc1"});
  EXPECT_EQ(back.layers[1].param_count, 8);
  EXPECT_TRUE(back.layers[1].sparse);
  EXPECT_EQ(back.layers[1].sparse_rows, 100);
  EXPECT_EQ(param_count(back), 23);
}

TEST(Model, SparseFractionIsExpectedUniqueRows) {
  Layer l{"emb", "embedding", {"input"}, {1, 1}, 10};
  l.sparse = true;
  l.sparse_rows = 10;
  l.sparse_rows_per_sample = 2;
  // 4 samples look up 8 rows of 10: 1 - 0.9^8 = 0.56953279.
  EXPECT_NEAR(sparse_fraction(l, 4), 1 - std::pow(0.9, 8), 1e-12);
  l.sparse = false;
  EXPECT_EQ(sparse_fraction(l, 4), 1.0);
}

}  // namespace
}  // namespace trainsim
