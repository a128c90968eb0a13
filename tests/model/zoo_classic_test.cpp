// The classic image models of the zoo (model/zoo/cnn_classic.cpp): parameter
// counts against their published figures, shapes, hand-checked layers and
// forward FLOPs against published multiply-add counts (1 MAC = 2 FLOPs).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
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

// Forward FLOPs of the layers whose op is `op`.
double flops_of_op(const Model& model, const std::string& op) {
  double total = 0;
  for (const Layer& l : model.layers) total += l.op == op ? l.forward_flops : 0.0;
  return total;
}

// Each CIFAR form the seeds train follows its ImageNet form.
const std::vector<std::string> kIds = {
    "alexnet",      "vgg16",        "vgg16-cifar10",        "vgg19",        "vgg19-cifar100", "googlenet",
    "inception-v3", "inception-v4", "inception-v4-cifar10", "cifar100-cnn", "fmnist-cnn"};

TEST(ClassicZoo, ListsTheElevenModelsInOrder) {
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
  const std::vector<int64_t> classes = {1000, 1000, 10, 1000, 100, 1000, 1000, 1000, 10, 100, 10};
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
  // vgg16-cifar10 and inception-v4-cifar10 128: seed 000 §4.1 (CIFAR-10);
  // vgg19-cifar100 128: seed 001 §5 (CIFAR batch 128);
  // cifar100-cnn 100: Liao et al.'s configuration; fmnist-cnn 64.
  const Shape cifar = {3, 32, 32};
  const std::vector<Shape> inputs = {{3, 227, 227}, {3, 224, 224}, cifar, {3, 224, 224}, cifar,      {3, 224, 224},
                                     {3, 299, 299}, {3, 299, 299}, cifar, cifar,         {1, 28, 28}};
  const std::vector<int64_t> batches = {256, 32, 128, 128, 128, 64, 64, 128, 128, 100, 64};
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

// --- VGG on CIFAR (seeds 000 and 001) ---

TEST(Vgg16Cifar10, ParamCountIsTheConvStackPlusA512InputHead) {
  // Convs (3·9·c_in·c_out + c_out): 1,792 + 36,928 | 73,856 + 147,584 |
  // 295,168 + 2·590,080 | 1,180,160 + 2·2,359,808 | 3·2,359,808 = 14,714,688.
  // fc6 512·4096 + 4096 = 2,101,248; fc7 4096·4096 + 4096 = 16,781,312;
  // fc8 4096·10 + 10 = 40,970. Total 33,638,218.
  const Model m = build("vgg16-cifar10");
  EXPECT_EQ(params_under(m, "conv"), 14'714'688);
  EXPECT_EQ(layer(m, "fc6").param_count, 2'101'248);
  EXPECT_EQ(layer(m, "fc8").param_count, 40'970);
  EXPECT_EQ(param_count(m), 33'638'218);
  EXPECT_EQ(entry("vgg16-cifar10").published_params, 33'638'218);
  // The convs are the ImageNet model's own: only the head depends on the input size.
  EXPECT_EQ(params_under(build("vgg16"), "conv"), 14'714'688);
}

TEST(Vgg16Cifar10, FivePoolsTakeThirtyTwoPixelsToOne) {
  const Model m = build("vgg16-cifar10");
  EXPECT_EQ(count_op(m, "conv2d"), 13);
  EXPECT_EQ(layer(m, "pool1").output_shape, (Shape{64, 16, 16}));
  EXPECT_EQ(layer(m, "pool4").output_shape, (Shape{512, 2, 2}));
  EXPECT_EQ(layer(m, "pool5").output_shape, (Shape{512, 1, 1}));
  EXPECT_EQ(layer(m, "flatten").output_shape, (Shape{512}));
  const Layer& c = layer(m, "conv1_1");
  EXPECT_EQ(c.param_count, 1'792);
  // 2·3·9·64·32·32 + 64·32·32 = 3,538,944 + 65,536.
  EXPECT_DOUBLE_EQ(c.forward_flops, 3'604'480.0);
  // fc6: 2·512·4096 + 4096.
  EXPECT_DOUBLE_EQ(layer(m, "fc6").forward_flops, 4'198'400.0);
}

TEST(Vgg16Cifar10, ConvFlopsMatchLiEtAlMultiplyAdds) {
  // Conv MACs, 9·c_in·c_out·side² per conv: 1,769,472 (conv1_1) + six convs of
  // 37,748,736 (conv1_2, 2_2, 3_2, 3_3, 4_2, 4_3) + three of 18,874,368 (2_1,
  // 3_1, 4_1) + three of 9,437,184 (block 5) = 313,196,544; with the biases
  // (c_out·side² per conv, 276,480 in all) 2·313,196,544 + 276,480 FLOPs.
  // Li et al. 2017 ("Pruning Filters", Table 1) give VGG-16 on CIFAR-10
  // 3.13×10^8 FLOP, counting the multiply-adds of the same 13 convs.
  const Model m = build("vgg16-cifar10");
  EXPECT_DOUBLE_EQ(flops_of_op(m, "conv2d"), 626'669'568.0);
  EXPECT_NEAR(flops_of_op(m, "conv2d") / (2.0 * 3.13e8), 1.0, 0.005);
}

TEST(Vgg16Cifar10, ForwardFlopsAreHandSummed) {
  // Convs 626,669,568 (above); ReLUs after them one per conv output, 276,480;
  // 2×2 pools 4 per output: 4·(16,384 + 8,192 + 4,096 + 2,048 + 512) = 124,928;
  // fc6 4,198,400, relu6 and drop6 4,096 each, fc7 2·4096² + 4096 = 33,558,528,
  // relu7 and drop7 4,096 each, fc8 2·4096·10 + 10 = 81,930: head 37,855,242.
  // Total 664,926,218.
  EXPECT_DOUBLE_EQ(forward_flops(build("vgg16-cifar10")), 664'926'218.0);
}

TEST(Vgg19Cifar100, AddsThreeConvsAndAHundredClassHead) {
  const Model m16 = build("vgg16-cifar10");
  const Model m19 = build("vgg19-cifar100");
  EXPECT_EQ(count_op(m19, "conv2d"), 16);
  EXPECT_EQ(layer(m19, "conv3_4").output_shape, (Shape{256, 8, 8}));
  EXPECT_EQ(layer(m19, "conv5_4").output_shape, (Shape{512, 2, 2}));
  EXPECT_EQ(layer(m19, "fc8").param_count, 4096 * 100 + 100);
  // Extra convs 590,080 + 2·2,359,808 = 5,309,696; fc8 409,700 - 40,970 =
  // 368,730 more: 33,638,218 + 5,678,426 = 39,316,644.
  EXPECT_EQ(param_count(m19), 39'316'644);
  EXPECT_EQ(entry("vgg19-cifar100").published_params, 39'316'644);
  EXPECT_EQ(param_count(m19) - param_count(m16), 5'309'696 + 368'730);
  // Extra conv FLOPs: conv3_4 2·589,824·64 + 16,384, conv4_4 2·2,359,296·16 +
  // 8,192, conv5_4 2·2,359,296·4 + 2,048 = 169,895,936.
  EXPECT_DOUBLE_EQ(flops_of_op(m19, "conv2d"), 626'669'568.0 + 169'895'936.0);
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

// --- Inception-v4 on CIFAR-10 (seed 000) ---

TEST(InceptionV4Cifar10, StemKeepsTheGridAndBlocksRunAt30_14_7) {
  const Model m = build("inception-v4-cifar10");
  // The first 3×3 is valid: 32 - 3 + 1 = 30; the rest of the stem keeps 30.
  EXPECT_EQ(layer(m, "conv1a_3x3.relu").output_shape, (Shape{32, 30, 30}));
  EXPECT_EQ(layer(m, "conv2b_3x3.relu").output_shape, (Shape{64, 30, 30}));
  EXPECT_EQ(layer(m, "mixed_3a").output_shape, (Shape{160, 30, 30}));
  EXPECT_EQ(layer(m, "mixed_4a").output_shape, (Shape{192, 30, 30}));
  EXPECT_EQ(layer(m, "mixed_5a").output_shape, (Shape{384, 30, 30}));
  EXPECT_EQ(layer(m, "inception_a4").output_shape, (Shape{384, 30, 30}));
  // Reduction-A, valid 3×3 stride 2: (30 - 3)/2 + 1 = 14.
  EXPECT_EQ(layer(m, "reduction_a").output_shape, (Shape{1024, 14, 14}));
  EXPECT_EQ(layer(m, "inception_b7").output_shape, (Shape{1024, 14, 14}));
  // Reduction-B padded by 1: (14 + 2 - 3)/2 + 1 = 7.
  EXPECT_EQ(layer(m, "reduction_b").output_shape, (Shape{1536, 7, 7}));
  EXPECT_EQ(layer(m, "inception_c3").output_shape, (Shape{1536, 7, 7}));
  EXPECT_EQ(layer(m, "last_linear").output_shape, (Shape{10}));
}

TEST(InceptionV4Cifar10, EveryLayerButTheClassifierKeepsItsImageNetParameters) {
  // Strides and padding change no kernel, so the two models differ only in
  // last_linear: 1536·1000 + 1000 = 1,537,000 against 1536·10 + 10 = 15,370,
  // giving 42,679,816 - 1,537,000 + 15,370 = 41,158,186.
  const Model imagenet = build("inception-v4");
  const Model cifar = build("inception-v4-cifar10");
  ASSERT_EQ(cifar.layers.size(), imagenet.layers.size());
  for (size_t i = 0; i + 1 < cifar.layers.size(); ++i) {
    EXPECT_EQ(cifar.layers[i].name, imagenet.layers[i].name);
    EXPECT_EQ(cifar.layers[i].param_count, imagenet.layers[i].param_count) << cifar.layers[i].name;
  }
  EXPECT_EQ(cifar.layers.back().param_count, 15'370);
  EXPECT_EQ(param_count(cifar), 41'158'186);
  EXPECT_EQ(entry("inception-v4-cifar10").published_params, 41'158'186);
  // pytorch-cifar100's README prints 41.3M for its 100-class form:
  // 41,158,186 + 1536·90 + 90 = 41,296,516, inside that rounding.
  EXPECT_LE(std::llabs(param_count(cifar) + 1536 * 90 + 90 - 41'300'000), 50'000);
}

TEST(InceptionV4Cifar10, StridedConvsAreHandChecked) {
  const Model m = build("inception-v4-cifar10");
  const Layer& stem = layer(m, "conv1a_3x3.conv");
  EXPECT_EQ(stem.param_count, 3 * 9 * 32);  // 864, no bias
  // 2·864·30·30 = 1,555,200.
  EXPECT_DOUBLE_EQ(stem.forward_flops, 1'555'200.0);
  const Layer& ra = layer(m, "reduction_a.branch0.conv");
  EXPECT_EQ(ra.param_count, 384 * 9 * 384);  // 1,327,104
  // 2·1,327,104·14·14 = 520,224,768.
  EXPECT_DOUBLE_EQ(ra.forward_flops, 520'224'768.0);
  const Layer& rb = layer(m, "reduction_b.branch1.3.conv");
  EXPECT_EQ(rb.output_shape, (Shape{320, 7, 7}));
  // 320·9·320 = 921,600 weights; 2·921,600·49 = 90,316,800.
  EXPECT_DOUBLE_EQ(rb.forward_flops, 90'316'800.0);
  EXPECT_EQ(layer(m, "reduction_b.branch2").output_shape, (Shape{1024, 7, 7}));
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
