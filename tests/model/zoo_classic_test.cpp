// The classic image models of the zoo (model/zoo/cnn_classic.cpp): parameter
// counts against their published figures, shapes, hand-checked layers and
// forward FLOPs against published multiply-add counts (1 MAC = 2 FLOPs).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "model/layer.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

const ZooEntry& entry(const std::string& name) {
  static const std::vector<ZooEntry> entries = classic_cnn_zoo_entries();
  for (const ZooEntry& e : entries) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no classic zoo entry " + name);
}

Model build(const std::string& name) { return entry(name).build(); }

const Layer& layer(const Model& model, const std::string& name) {
  return model.layers.at(find_layer(model, name).value());
}

using Shape = std::vector<int64_t>;

// Parameters of every layer whose name starts with `prefix`.
int64_t params_under(const Model& model, const std::string& prefix) {
  int64_t total = 0;
  for (const Layer& l : model.layers) {
    if (l.name.rfind(prefix, 0) == 0) total += l.param_count;
  }
  return total;
}

int count_op(const Model& model, const std::string& op) {
  int n = 0;
  for (const Layer& l : model.layers) n += l.op == op ? 1 : 0;
  return n;
}

const std::vector<std::string> kIds = {"alexnet",      "vgg16",        "vgg19",        "googlenet",
                                       "inception-v3", "inception-v4", "cifar100-cnn", "fmnist-cnn"};

TEST(ClassicZoo, ListsTheEightModelsInOrder) {
  std::vector<std::string> names;
  for (const ZooEntry& e : classic_cnn_zoo_entries()) names.push_back(e.name);
  EXPECT_EQ(names, kIds);
}

TEST(ClassicZoo, EveryModelHasExactlyItsPublishedParameterCount) {
  for (const ZooEntry& e : classic_cnn_zoo_entries()) {
    EXPECT_FALSE(e.params_source.empty()) << e.name;
    EXPECT_EQ(param_count(e.build()), e.published_params) << e.name;
  }
}

TEST(ClassicZoo, PublishedFiguresAreTheReferenceCounts) {
  // The figures themselves, as their sources print them.
  EXPECT_EQ(entry("alexnet").published_params, 60'965'224);   // BVLC bvlc_alexnet
  EXPECT_EQ(entry("vgg16").published_params, 138'357'544);    // torchvision vgg16
  EXPECT_EQ(entry("vgg19").published_params, 143'667'240);    // torchvision vgg19
  EXPECT_EQ(entry("googlenet").published_params, 6'624'904);  // torchvision googlenet
  // torchvision inception_v3 27,161,264 less AuxLogits: conv0 768·128 + BN 256,
  // conv1 128·25·768 + BN 1,536, fc 768·1000 + 1000 = 3,326,696.
  EXPECT_EQ(entry("inception-v3").published_params, 27'161'264 - 3'326'696);
  EXPECT_EQ(entry("inception-v4").published_params, 42'679'816);  // timm / Cadene
}

TEST(ClassicZoo, EveryModelValidatesAndEndsInItsClasses) {
  const std::vector<int64_t> classes = {1000, 1000, 1000, 1000, 1000, 1000, 100, 10};
  for (size_t i = 0; i < kIds.size(); ++i) {
    const Model m = build(kIds[i]);
    EXPECT_NO_THROW(validate_model(m, m.name)) << kIds[i];
    EXPECT_EQ(m.name, kIds[i]);
    ASSERT_FALSE(m.layers.empty());
    EXPECT_EQ(m.layers.back().output_shape, Shape{classes[i]}) << kIds[i];
    EXPECT_EQ(m.layers.back().op, "linear") << kIds[i];
  }
}

TEST(ClassicZoo, InputShapesAndDefaultBatchesFollowTheSeeds) {
  // alexnet: seed 003 Table 1 (256/GPU, Caffe 227 crop); vgg16 32 and
  // googlenet 64: seed 003 Table 1; vgg19 128: seed 001 speedup table;
  // inception-v3 64: seed 004 Table 1; inception-v4 128: seed 000 §4.1;
  // cifar100-cnn 100: Liao et al.'s configuration; fmnist-cnn 64.
  const std::vector<Shape> inputs = {{3, 227, 227}, {3, 224, 224}, {3, 224, 224}, {3, 224, 224},
                                     {3, 299, 299}, {3, 299, 299}, {3, 32, 32},   {1, 28, 28}};
  const std::vector<int64_t> batches = {256, 32, 128, 64, 64, 128, 100, 64};
  for (size_t i = 0; i < kIds.size(); ++i) {
    const Model m = build(kIds[i]);
    EXPECT_EQ(m.input_shape, inputs[i]) << kIds[i];
    EXPECT_EQ(m.default_batch, batches[i]) << kIds[i];
  }
}

TEST(ClassicZoo, EveryModelBuildsWellUnderASecond) {
  for (const std::string& id : kIds) {
    const auto start = std::chrono::steady_clock::now();
    const Model m = build(id);
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(elapsed_s, 0.25) << id << " has " << m.layers.size() << " layers";
  }
}

// Published forward costs, in multiply-adds per 224/227/299 image; the model's
// FLOPs also count biases, batchnorm, ReLU and pooling, which those figures
// leave out (under 1% here), so 2% bounds the difference.
TEST(ClassicZoo, ForwardFlopsMatchPublishedMultiplyAdds) {
  struct Published {
    std::string id;
    double macs;
  };
  const std::vector<Published> published = {
      {"alexnet", 724e6},         // Sze et al. 2017, Proc. IEEE, Table: AlexNet 724 M MACs
      {"vgg16", 15.47e9},         // torchvision vgg16 GFLOPS (MACs) 15.47
      {"vgg19", 19.63e9},         // torchvision vgg19 19.63
      {"googlenet", 1.498e9},     // torchvision googlenet 1.498
      {"inception-v3", 5.713e9},  // torchvision inception_v3 5.713 (no aux in eval)
      {"inception-v4", 12.305e9}  // imgclsmob inceptionv4 12,304.93 M
  };
  for (const Published& p : published) {
    const double flops = forward_flops(build(p.id));
    EXPECT_NEAR(flops / (2.0 * p.macs), 1.0, 0.02) << p.id << ": " << flops;
  }
}

// --- AlexNet (BVLC Caffe) ---

TEST(AlexNet, GroupedConv2HasHalfTheInputChannelsPerFilter) {
  const Model m = build("alexnet");
  const Layer& c = layer(m, "conv2");
  // 256 filters over 96/2 = 48 channels, 5×5: 256·48·25 + 256 = 307,456.
  EXPECT_EQ(c.param_count, 307'456);
  EXPECT_EQ(c.output_shape, (Shape{256, 27, 27}));
  // 2·48·25·256·27·27 + 256·27·27 = 447,897,600 + 186,624.
  EXPECT_DOUBLE_EQ(c.forward_flops, 448'084'224.0);
}

TEST(AlexNet, LayerParamsMatchSeed003Table4) {
  // Seed 003 Table 4, parameters in millions for layers 1..8, printed to the
  // digit shown; torchvision's ungrouped AlexNet would miss layers 3 and 4.
  const Model m = build("alexnet");
  const std::vector<std::string> names = {"conv1", "conv2", "conv3", "conv4", "conv5", "fc6", "fc7", "fc8"};
  const std::vector<double> table_m = {0.03, 0.3, 0.9, 0.7, 0.4, 37.8, 16.8, 4};
  const std::vector<double> half_digit_m = {0.005, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.5};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_NEAR(layer(m, names[i]).param_count / 1e6, table_m[i], half_digit_m[i]) << names[i];
  }
}

TEST(AlexNet, LrnCostsThirteenFlopsPerElementAndNoParameters) {
  const Model m = build("alexnet");
  const Layer& n = layer(m, "norm1");
  EXPECT_EQ(n.op, "lrn");
  EXPECT_EQ(n.param_count, 0);
  // conv1: (227 - 11)/4 + 1 = 55; 96·55·55 = 290,400 elements × 13.
  EXPECT_DOUBLE_EQ(n.forward_flops, 13.0 * 290'400);
  EXPECT_EQ(layer(m, "pool5").output_shape, (Shape{256, 6, 6}));
  EXPECT_EQ(layer(m, "fc6").param_count, 9216 * 4096 + 4096);
}

// --- VGG ---

TEST(Vgg16, FirstConvIsHandChecked) {
  const Model m = build("vgg16");
  const Layer& c = layer(m, "conv1_1");
  EXPECT_EQ(c.param_count, 1'792);  // 3·9·64 + 64
  // 2·3·9·64·224·224 + 64·224·224 = 173,408,256 + 3,211,264.
  EXPECT_DOUBLE_EQ(c.forward_flops, 176'619'520.0);
  EXPECT_EQ(count_op(m, "conv2d"), 13);
  EXPECT_EQ(layer(m, "pool5").output_shape, (Shape{512, 7, 7}));
  EXPECT_EQ(layer(m, "fc6").param_count, 102'764'544);  // 25088·4096 + 4096
}

TEST(Vgg19, AddsOneConvToEachOfBlocksThreeToFive) {
  const Model m16 = build("vgg16");
  const Model m19 = build("vgg19");
  EXPECT_EQ(count_op(m19, "conv2d"), 16);
  // Extra convs: 256·9·256 + 256 = 590,080; twice 512·9·512 + 512 = 2,359,808.
  EXPECT_EQ(param_count(m19) - param_count(m16), 590'080 + 2 * 2'359'808);
  EXPECT_EQ(layer(m19, "conv5_4").output_shape, (Shape{512, 14, 14}));
}

// --- GoogLeNet ---

TEST(GoogLeNet, Inception3aParamsAndShapesAreHandChecked) {
  const Model m = build("googlenet");
  // Convs without bias, each followed by a 2·C batchnorm, from 192 channels:
  // 1x1 64: 12,288 + 128; 1x1 96: 18,432 + 192; 3x3 96→128: 110,592 + 256;
  // 1x1 16: 3,072 + 32; 3x3 16→32: 4,608 + 64; pool 1x1 32: 6,144 + 64.
  EXPECT_EQ(params_under(m, "inception3a."), 155'872);
  EXPECT_EQ(layer(m, "maxpool2").output_shape, (Shape{192, 28, 28}));
  EXPECT_EQ(layer(m, "inception3a").output_shape, (Shape{256, 28, 28}));
  EXPECT_EQ(layer(m, "inception3a").inputs.size(), 4u);
  EXPECT_EQ(layer(m, "inception4e").output_shape, (Shape{832, 14, 14}));
  EXPECT_EQ(layer(m, "maxpool4").output_shape, (Shape{832, 7, 7}));
  EXPECT_EQ(layer(m, "inception5b").output_shape, (Shape{1024, 7, 7}));
  EXPECT_EQ(layer(m, "conv1.conv").param_count, 64 * 3 * 49);  // no bias
}

// --- Inception-v3 ---

TEST(InceptionV3, StageShapesFollowTheReferenceAt299) {
  const Model m = build("inception-v3");
  EXPECT_EQ(layer(m, "Conv2d_4a_3x3.relu").output_shape, (Shape{192, 71, 71}));
  EXPECT_EQ(layer(m, "Mixed_5b").output_shape, (Shape{256, 35, 35}));
  EXPECT_EQ(layer(m, "Mixed_5d").output_shape, (Shape{288, 35, 35}));
  EXPECT_EQ(layer(m, "Mixed_6a").output_shape, (Shape{768, 17, 17}));
  EXPECT_EQ(layer(m, "Mixed_6e").output_shape, (Shape{768, 17, 17}));
  EXPECT_EQ(layer(m, "Mixed_7a").output_shape, (Shape{1280, 8, 8}));
  EXPECT_EQ(layer(m, "Mixed_7c").output_shape, (Shape{2048, 8, 8}));
  EXPECT_EQ(layer(m, "fc").param_count, 2048 * 1000 + 1000);
}

TEST(InceptionV3, StridedConvOfMixed6aIsHandChecked) {
  const Model m = build("inception-v3");
  const Layer& c = layer(m, "Mixed_6a.branch3x3.conv");
  EXPECT_EQ(c.param_count, 288 * 9 * 384);  // no bias
  // (35 - 3)/2 + 1 = 17; 2·288·9·384·17·17 = 575,299,584.
  EXPECT_DOUBLE_EQ(c.forward_flops, 575'299'584.0);
}

// --- Inception-v4 ---

TEST(InceptionV4, StageShapesFollowThePaperAt299) {
  const Model m = build("inception-v4");
  EXPECT_EQ(layer(m, "conv2b_3x3.relu").output_shape, (Shape{64, 147, 147}));
  EXPECT_EQ(layer(m, "mixed_3a").output_shape, (Shape{160, 73, 73}));
  EXPECT_EQ(layer(m, "mixed_4a").output_shape, (Shape{192, 71, 71}));
  EXPECT_EQ(layer(m, "mixed_5a").output_shape, (Shape{384, 35, 35}));
  EXPECT_EQ(layer(m, "inception_a4").output_shape, (Shape{384, 35, 35}));
  EXPECT_EQ(layer(m, "reduction_a").output_shape, (Shape{1024, 17, 17}));
  EXPECT_EQ(layer(m, "inception_b7").output_shape, (Shape{1024, 17, 17}));
  EXPECT_EQ(layer(m, "reduction_b").output_shape, (Shape{1536, 8, 8}));
  EXPECT_EQ(layer(m, "inception_c3").output_shape, (Shape{1536, 8, 8}));
  EXPECT_EQ(layer(m, "last_linear").param_count, 1536 * 1000 + 1000);
}

// --- CIFAR-100 CNN ---

TEST(Cifar100Cnn, ShapesAndFlopsAreHandChecked) {
  const Model m = build("cifar100-cnn");
  EXPECT_EQ(param_count(m), 151'428);
  EXPECT_EQ(layer(m, "pool1").output_shape, (Shape{32, 16, 16}));
  EXPECT_EQ(layer(m, "pool2").output_shape, (Shape{32, 8, 8}));
  EXPECT_EQ(layer(m, "pool3").output_shape, (Shape{64, 4, 4}));
  EXPECT_EQ(layer(m, "flatten").output_shape, (Shape{1024}));
  // conv1 2·75·32·1024 + 32,768 = 4,947,968; relu1 32,768; pool1 9·8,192 = 73,728;
  // conv2 2·800·32·256 + 8,192 = 13,115,392; relu2 8,192; pool2 9·2,048 = 18,432;
  // conv3 2·800·64·64 + 4,096 = 6,557,696; relu3 4,096; pool3 9·1,024 = 9,216;
  // fc1 2·1024·64 + 64 = 131,136; fc2 2·64·100 + 100 = 12,900. Sum 24,911,524.
  EXPECT_DOUBLE_EQ(forward_flops(m), 24'911'524.0);
}

// --- Fashion-MNIST CNN ---

TEST(FmnistCnn, ShapesAndFlopsAreHandChecked) {
  const Model m = build("fmnist-cnn");
  EXPECT_EQ(param_count(m), 832 + 51'264 + 401'536 + 1'290);
  EXPECT_EQ(layer(m, "pool2").output_shape, (Shape{64, 7, 7}));
  EXPECT_EQ(layer(m, "fc1").param_count, 3136 * 128 + 128);
  // conv1 2·25·32·784 + 25,088 = 1,279,488; relu1 25,088; pool1 4·6,272 = 25,088;
  // conv2 2·800·64·196 + 12,544 = 20,082,944; relu2 12,544; pool2 4·3,136 = 12,544;
  // fc1 2·3136·128 + 128 = 802,944; relu3 128; fc2 2·128·10 + 10 = 2,570. Sum 22,243,338.
  EXPECT_DOUBLE_EQ(forward_flops(m), 22'243'338.0);
}

}  // namespace
}  // namespace trainsim
