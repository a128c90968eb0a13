// The residual family of the zoo (model/zoo/cnn_resnet.cpp): parameter counts
// against the published figures and hand derivations, per-layer shapes and
// FLOPs worked out by hand, the published GMACs, graph wiring, build time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/layer.hpp"
#include "model/zoo/families.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

const Layer& layer_named(const Model& model, const std::string& name) {
  const auto index = find_layer(model, name);
  if (!index) throw std::runtime_error(model.name + " has no layer " + name);
  return model.layers[*index];
}

// Parameters of all layers whose op is not batchnorm: conv and fc weights.
int64_t non_batchnorm_params(const Model& model) {
  int64_t total = 0;
  for (const Layer& l : model.layers) {
    if (l.op != "batchnorm") total += l.param_count;
  }
  return total;
}

// Forward FLOPs of the conv and fc layers only: what torchvision's GFLOPS
// figures (fvcore multiply-adds) count, times 2.
double conv_and_linear_flops(const Model& model) {
  double total = 0;
  for (const Layer& l : model.layers) {
    if (l.op == "conv2d" || l.op == "linear") total += l.forward_flops;
  }
  return total;
}

// Weighted layers on the main path: convs and fc, not the projection shortcuts.
// ResNet-N is named after this count.
int64_t depth_in_weighted_layers(const Model& model) {
  return std::count_if(model.layers.begin(), model.layers.end(), [](const Layer& l) {
    const bool shortcut =
        l.name.find("downsample") != std::string::npos || l.name.find("shortcut") != std::string::npos;
    return (l.op == "conv2d" || l.op == "linear") && !shortcut;
  });
}

TEST(ResnetZoo, ListsTheResidualFamilyInOrder) {
  std::vector<std::string> names;
  for (const ZooEntry& e : resnet_zoo_entries()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fmnist-resnet20", "resnet18", "resnet50", "resnet101", "resnet152", "resnet152-cifar10",
                                             "resnet164", "resnet1001", "resnext29"}));
}

TEST(ResnetZoo, EveryModelValidatesAndBuildsFromTheRegistry) {
  for (const ZooEntry& e : resnet_zoo_entries()) {
    const Model m = build_zoo_model(e.name);  // runs validate_model
    EXPECT_EQ(m.name, e.name);
    EXPECT_NO_THROW(validate_model(m, e.name));
  }
}

TEST(ResnetZoo, ImageNetResnetsHaveTorchvisionParamCountsExactly) {
  for (const std::string name : {"resnet18", "resnet50", "resnet101", "resnet152"}) {
    const ZooEntry& e = find_zoo_entry(name, "test");
    EXPECT_EQ(param_count(e.build()), e.published_params) << name;
  }
  // The figures themselves (torchvision num_params), so a changed entry fails too.
  EXPECT_EQ(find_zoo_entry("resnet50", "test").published_params, 25'557'032);
  EXPECT_EQ(find_zoo_entry("resnet152", "test").published_params, 60'192'808);
}

TEST(ResnetZoo, Resnet18ParamCountFollowsFromItsStages) {
  // conv1 3·49·64 = 9,408, bn1 128 -> 9,536
  // layer1: 2 × (2 · 64·64·9 + 2 · 128) = 2 × 73,984 = 147,968
  // layer2: block0 64·128·9 + 128·128·9 + 2·256 + downsample 64·128 + 256 = 230,144;
  //         block1 2 · 147,456 + 512 = 295,424 -> 525,568
  // layer3: block0 294,912 + 589,824 + 1,024 + 32,768 + 512 = 919,040;
  //         block1 2 · 589,824 + 1,024 = 1,180,672 -> 2,099,712
  // layer4: block0 1,179,648 + 2,359,296 + 2,048 + 131,072 + 1,024 = 3,673,088;
  //         block1 2 · 2,359,296 + 2,048 = 4,720,640 -> 8,393,728
  // fc 512·1000 + 1000 = 513,000
  // total 9,536 + 147,968 + 525,568 + 2,099,712 + 8,393,728 + 513,000 = 11,689,512
  EXPECT_EQ(param_count(find_zoo_entry("resnet18", "test").build()), 11'689'512);
}

TEST(ResnetZoo, Resnet18FirstConvCountsMatchHand) {
  const Model m = find_zoo_entry("resnet18", "test").build();
  const Layer& c = layer_named(m, "conv1");
  // 7×7 conv, 3 -> 64 channels, no bias: 3·49·64 = 9,408 weights; stride 2, pad 3:
  // (224 + 6 - 7)/2 + 1 = 112, so 2 · 9,408 · 112·112 = 236,027,904 FLOPs.
  EXPECT_EQ(c.param_count, 9'408);
  EXPECT_EQ(c.output_shape, (std::vector<int64_t>{64, 112, 112}));
  EXPECT_DOUBLE_EQ(c.forward_flops, 236'027'904.0);
  // maxpool 3/2 pad 1: (112 + 2 - 3)/2 + 1 = 56.
  EXPECT_EQ(layer_named(m, "maxpool").output_shape, (std::vector<int64_t>{64, 56, 56}));
}

TEST(ResnetZoo, TorchvisionBottleneckStridesTheThreeByThreeConv) {
  const Model m = find_zoo_entry("resnet50", "test").build();
  // ResNet v1.5: layer2.0's 1×1 keeps 56×56, its 3×3 halves it to 28×28.
  EXPECT_EQ(layer_named(m, "layer2.0.conv1").output_shape, (std::vector<int64_t>{128, 56, 56}));
  EXPECT_EQ(layer_named(m, "layer2.0.conv2").output_shape, (std::vector<int64_t>{128, 28, 28}));
  // Projection shortcut: 1×1, 256 -> 512, stride 2: 256·512 = 131,072 weights.
  const Layer& ds = layer_named(m, "layer2.0.downsample.0");
  EXPECT_EQ(ds.param_count, 131'072);
  EXPECT_EQ(ds.output_shape, (std::vector<int64_t>{512, 28, 28}));
  EXPECT_EQ(layer_named(m, "layer2.0.add").inputs, (std::vector<std::string>{"layer2.0.bn3", "layer2.0.downsample.1"}));
  // An identity unit adds its input, the previous unit's post-add ReLU.
  EXPECT_EQ(layer_named(m, "layer2.1.add").inputs, (std::vector<std::string>{"layer2.1.bn3", "layer2.0.relu3"}));
  // 3×3 64 -> 64 at 56×56: 36,864 weights, 2 · 36,864 · 3,136 = 231,211,008 FLOPs.
  EXPECT_DOUBLE_EQ(layer_named(m, "layer1.0.conv2").forward_flops, 231'211'008.0);
}

TEST(ResnetZoo, ImageNetResnetsMatchTorchvisionGmacs) {
  // torchvision's published GFLOPS are multiply-adds of conv and fc layers
  // (resnet18 1.814, resnet50 4.089, resnet101 7.801, resnet152 11.514 G), so
  // our conv+fc FLOPs are 2× those within their 3-digit rounding (0.5%); BN,
  // ReLU, add and pooling add under 1% more, so the whole forward is held to 2%.
  const std::vector<std::pair<std::string, double>> gmacs = {
      {"resnet18", 1.814}, {"resnet50", 4.089}, {"resnet101", 7.801}, {"resnet152", 11.514}};
  for (const auto& [name, g] : gmacs) {
    const Model m = find_zoo_entry(name, "test").build();
    const double expected_flops = 2.0 * g * 1e9;
    EXPECT_NEAR(conv_and_linear_flops(m), expected_flops, 0.005 * expected_flops) << name;
    EXPECT_NEAR(forward_flops(m), expected_flops, 0.02 * expected_flops) << name;
    EXPECT_GT(forward_flops(m), conv_and_linear_flops(m)) << name;
  }
}

TEST(ResnetZoo, ResnetDepthCountsItsWeightedLayers) {
  const std::vector<std::pair<std::string, int64_t>> depths = {
      {"resnet18", 18},           {"resnet50", 50},   {"resnet101", 101},   {"resnet152", 152},
      {"resnet152-cifar10", 152}, {"resnet164", 164}, {"resnet1001", 1001}, {"resnext29", 29}};
  for (const auto& [name, depth] : depths) {
    EXPECT_EQ(depth_in_weighted_layers(find_zoo_entry(name, "test").build()), depth) << name;
  }
}

TEST(ResnetZoo, EveryModelEndsInItsClasses) {
  // ImageNet 1000, CIFAR-10 10, CIFAR-100 100 (ResNet-1001, see cnn_resnet.cpp).
  const std::vector<std::pair<std::string, int64_t>> class_counts = {
      {"resnet18", 1000},        {"resnet50", 1000}, {"resnet101", 1000}, {"resnet152", 1000},
      {"resnet152-cifar10", 10}, {"resnet164", 10},  {"resnet1001", 100}, {"resnext29", 10}};
  for (const auto& [name, classes] : class_counts) {
    const Model m = find_zoo_entry(name, "test").build();
    EXPECT_EQ(m.layers.back().name, "fc") << name;
    EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{classes}) << name;
  }
}

TEST(ResnetZoo, CifarModelsTakeCifarImagesAtTheSeedBatch) {
  // Seed 001 (DSP) trains ResNet-164, ResNet-1001 and ResNeXt-29 with batch
  // 128; seed 000 (DualPipe, §4.1) ResNet-152 on CIFAR-10, batch 128 too.
  for (const std::string name : {"resnet152-cifar10", "resnet164", "resnet1001", "resnext29"}) {
    const Model m = find_zoo_entry(name, "test").build();
    EXPECT_EQ(m.input_shape, (std::vector<int64_t>{3, 32, 32})) << name;
    EXPECT_EQ(m.default_batch, 128) << name;
  }
  EXPECT_EQ(find_zoo_entry("resnet50", "test").build().input_shape, (std::vector<int64_t>{3, 224, 224}));
}

// Torchvision bottleneck of width w (out 4w): conv1 in·w, conv2 9w², conv3 4w²,
// three BNs 2w + 2w + 8w. An identity unit (in = 4w) has 17w² + 12w; a
// projecting first unit adds the downsample in·4w + BN 8w: 5·in·w + 13w² + 20w.
TEST(ResnetZoo, Resnet152Cifar10HasHandDerivedParamCount) {
  // layer1 (w 64, in 64):    first 20,480 + 53,248 + 1,280 = 75,008;
  //                          2 × (69,632 + 768) = 140,800        -> 215,808
  // layer2 (w 128, in 256):  first 163,840 + 212,992 + 2,560 = 379,392;
  //                          7 × (278,528 + 1,536) = 1,960,448   -> 2,339,840
  // layer3 (w 256, in 512):  first 655,360 + 851,968 + 5,120 = 1,512,448;
  //                          35 × (1,114,112 + 3,072) = 39,101,440 -> 40,613,888
  // layer4 (w 512, in 1024): first 2,621,440 + 3,407,872 + 10,240 = 6,039,552;
  //                          2 × (4,456,448 + 6,144) = 8,925,184 -> 14,964,736
  // stem conv 3·9·64 = 1,728 + BN 128; fc 2048·10 + 10 = 20,490.
  // Total 1,856 + 215,808 + 2,339,840 + 40,613,888 + 14,964,736 + 20,490 = 58,156,618.
  const ZooEntry& e = find_zoo_entry("resnet152-cifar10", "test");
  const Model m = e.build();
  EXPECT_EQ(param_count(m), 58'156'618);
  EXPECT_EQ(e.published_params, 58'156'618);
  // The same count from torchvision's 60,192,808: 7×7 stem (9,408) -> 3×3
  // (1,728), fc 2,049,000 -> 20,490.
  EXPECT_EQ(param_count(find_zoo_entry("resnet152", "test").build()) - 9'408 + 1'728 - 2'049'000 + 20'490,
            param_count(m));
  // pytorch-cifar100's README prints 58.3M for resnet152 at 100 classes:
  // 58,156,618 + 2048·90 + 90 = 58,341,028, inside that rounding.
  EXPECT_LE(std::llabs(param_count(m) + 2048 * 90 + 90 - 58'300'000), 50'000);
}

TEST(ResnetZoo, Resnet152Cifar10StemKeepsThirtyTwoPixelsWithoutMaxPool) {
  const Model m = find_zoo_entry("resnet152-cifar10", "test").build();
  const Layer& c = layer_named(m, "conv1");
  // 3×3, 3 -> 64, stride 1, pad 1, no bias: 1,728 weights; 2·1,728·32·32 = 3,538,944 FLOPs.
  EXPECT_EQ(c.param_count, 1'728);
  EXPECT_EQ(c.output_shape, (std::vector<int64_t>{64, 32, 32}));
  EXPECT_DOUBLE_EQ(c.forward_flops, 3'538'944.0);
  EXPECT_FALSE(find_layer(m, "maxpool").has_value());
  EXPECT_EQ(layer_named(m, "layer1.0.conv1").inputs, std::vector<std::string>{"relu"});
  // Stages at 32, 16, 8, 4 pixels.
  EXPECT_EQ(layer_named(m, "layer1.2.relu3").output_shape, (std::vector<int64_t>{256, 32, 32}));
  EXPECT_EQ(layer_named(m, "layer2.0.conv2").output_shape, (std::vector<int64_t>{128, 16, 16}));
  EXPECT_EQ(layer_named(m, "layer3.35.relu3").output_shape, (std::vector<int64_t>{1024, 8, 8}));
  EXPECT_EQ(layer_named(m, "layer4.2.relu3").output_shape, (std::vector<int64_t>{2048, 4, 4}));
  EXPECT_EQ(layer_named(m, "avgpool").output_shape, (std::vector<int64_t>{2048}));
}

TEST(ResnetZoo, Resnet152Cifar10ConvAndFcFlopsAreHandDerived) {
  // Multiply-adds per unit at output side s (input side 2s for a strided first unit):
  // every identity unit is 17w²·s² with w·s = 2048 fixed (64·32, 128·16, 256·8,
  // 512·4), so 17·2048² = 71,303,168; layer1's first unit 73,728·1,024 =
  // 75,497,472; layers 2-4's first units conv1 in·w·(2s)² = 33,554,432, conv2
  // 9w²s² = 37,748,736, conv3 4w²s² = 16,777,216, downsample 4w·in·s² =
  // 33,554,432: 121,634,816.
  // Units: 75,497,472 + 3 × 121,634,816 + (2 + 7 + 35 + 2) × 71,303,168 = 3,720,347,648;
  // stem 1,728·1,024 = 1,769,472; fc 2048·10 = 20,480. Total 3,722,137,600 MACs;
  // FLOPs 2× that plus fc's 10 biases (convs have none).
  const Model m = find_zoo_entry("resnet152-cifar10", "test").build();
  EXPECT_DOUBLE_EQ(conv_and_linear_flops(m), 2.0 * 3'722'137'600 + 10);
  // BN, ReLU, add and pooling are a few FLOPs per element: under 2% more, as at 224.
  EXPECT_GT(forward_flops(m), conv_and_linear_flops(m));
  EXPECT_LT(forward_flops(m), 1.02 * conv_and_linear_flops(m));
}

// Pre-activation ResNet-(9n+2), stage widths c = 16, 32, 64, first-unit input
// in0 = 16, 64, 128. A projecting first unit: bn1 2·in0, conv1 in0·c, bn2 2c,
// conv2 9c², bn3 2c, conv3 4c², shortcut in0·4c = 5·in0·c + 2·in0 + 13c² + 4c.
// An identity unit (input 4c): 8c + 4c² + 2c + 9c² + 2c + 4c² = 17c² + 12c.
//   c=16: first 1,280 + 32 + 3,328 + 64 = 4,704;       identity 4,544
//   c=32: first 10,240 + 128 + 13,312 + 128 = 23,808;  identity 17,792
//   c=64: first 40,960 + 256 + 53,248 + 256 = 94,720;  identity 70,400
// Plus stem conv 3·9·16 = 432, final BN 512, fc 256·classes + classes.
TEST(ResnetZoo, PreactResnet164HasHandDerivedParamCount) {
  // n = 18: 4,704 + 17·4,544 = 81,952; 23,808 + 17·17,792 = 326,272;
  // 94,720 + 17·70,400 = 1,291,520; + 432 + 512 + 2,570 (fc 256·10 + 10)
  // = 1,703,258.
  EXPECT_EQ(param_count(find_zoo_entry("resnet164", "test").build()), 1'703'258);
}

TEST(ResnetZoo, PreactResnet1001HasHandDerivedParamCount) {
  // n = 111: 4,704 + 110·4,544 = 504,544; 23,808 + 110·17,792 = 1,980,928;
  // 94,720 + 110·70,400 = 7,838,720; + 432 + 512 + 25,700 (fc 256·100 + 100)
  // = 10,350,836.
  EXPECT_EQ(param_count(find_zoo_entry("resnet1001", "test").build()), 10'350'836);
}

TEST(ResnetZoo, PreactResnetWeightsRoundToThePapersFigures) {
  // He et al. 2016 print 1.7M and 10.2M, rounded to 0.1M; the conv and fc
  // weights (no BN scale/shift) land inside that rounding for both models.
  // BN parameters: ResNet-164 (2·16 + 4·16) + 17·12·16 = 3,360, + 256 + 17·384
  // = 6,784, + 512 + 17·768 = 13,568, + final 512 -> 24,224, so weights are
  // 1,703,258 - 24,224 = 1,679,034. ResNet-1001: 96 + 110·192 = 21,216,
  // 256 + 110·384 = 42,496, 512 + 110·768 = 84,992, + 512 -> 149,216, so
  // weights are 10,350,836 - 149,216 = 10,201,620.
  const Model r164 = find_zoo_entry("resnet164", "test").build();
  const Model r1001 = find_zoo_entry("resnet1001", "test").build();
  EXPECT_EQ(non_batchnorm_params(r164), 1'679'034);
  EXPECT_EQ(non_batchnorm_params(r1001), 10'201'620);
  EXPECT_LE(std::llabs(non_batchnorm_params(r164) - find_zoo_entry("resnet164", "test").published_params), 50'000);
  EXPECT_LE(std::llabs(non_batchnorm_params(r1001) - find_zoo_entry("resnet1001", "test").published_params), 50'000);
  // ResNet-164's full count rounds to 1.7M as well; ResNet-1001's (10.35M) does not.
  EXPECT_LE(std::llabs(param_count(r164) - 1'700'000), 50'000);
}

TEST(ResnetZoo, PreactUnitsAddTheirRawInputAndShareTheFirstActivation) {
  const Model m = find_zoo_entry("resnet164", "test").build();
  // The stem conv feeds the first unit's BN directly (no BN-ReLU in the stem).
  EXPECT_EQ(layer_named(m, "layer1.0.bn1").inputs, std::vector<std::string>{"conv1"});
  // The projection shortcut reads the shared BN-ReLU, not the raw input.
  const Layer& shortcut = layer_named(m, "layer1.0.shortcut");
  EXPECT_EQ(shortcut.inputs, std::vector<std::string>{"layer1.0.relu1"});
  EXPECT_EQ(shortcut.param_count, 16 * 64);
  // Identity units add the previous unit's sum: no ReLU after the add.
  EXPECT_EQ(layer_named(m, "layer1.1.add").inputs, (std::vector<std::string>{"layer1.1.conv3", "layer1.0.add"}));
  EXPECT_EQ(layer_named(m, "layer1.1.bn1").inputs, std::vector<std::string>{"layer1.0.add"});
  // Stage 2's first 1×1 (stride 2) takes 64 channels at 32×32 to 32 at 16×16.
  EXPECT_EQ(layer_named(m, "layer2.0.conv1").output_shape, (std::vector<int64_t>{32, 16, 16}));
  EXPECT_EQ(layer_named(m, "final_bn").inputs, std::vector<std::string>{"layer3.17.add"});
}

TEST(ResnetZoo, Resnext29HasHandDerivedParamCountWithinThePapersRounding) {
  // Unit with input in, grouped width W (8 groups), output o:
  //   in·W + 2W + (W/8)·9·W + 2W + W·o + 2o (+ projection in·o + 2o).
  // Stage 1 (W 512, o 256): first (in 64) 478,208; two more (in 256) 559,616 each -> 1,597,440
  // Stage 2 (W 1024, o 512): first (in 256) 2,103,296; two more 2,233,344 each -> 6,569,984
  // Stage 3 (W 2048, o 1024): first (in 512) 8,400,896; two more 8,923,136 each -> 26,247,168
  // Stem conv 3·9·64 + BN 128 = 1,856; fc 1024·10 + 10 = 10,250.
  // Total 1,856 + 1,597,440 + 6,569,984 + 26,247,168 + 10,250 = 34,426,698,
  // which Xie et al. 2017 (Table 7) round to 34.4M.
  const ZooEntry& e = find_zoo_entry("resnext29", "test");
  const int64_t params = param_count(e.build());
  EXPECT_EQ(params, 34'426'698);
  EXPECT_LE(std::llabs(params - e.published_params), 50'000);
}

TEST(ResnetZoo, Resnext29GroupedConvCountsMatchHand) {
  const Model m = find_zoo_entry("resnext29", "test").build();
  const Layer& c = layer_named(m, "layer1.0.conv2");
  // 3×3, 512 -> 512 in 8 groups: (512/8)·9·512 = 294,912 weights; at 32×32,
  // 2 · 294,912 · 1,024 = 603,979,776 FLOPs.
  EXPECT_EQ(c.param_count, 294'912);
  EXPECT_DOUBLE_EQ(c.forward_flops, 603'979'776.0);
  // Stage 3's first grouped conv strides 16×16 to 8×8.
  EXPECT_EQ(layer_named(m, "layer3.0.conv2").output_shape, (std::vector<int64_t>{2048, 8, 8}));
}

TEST(ResnetZoo, Resnet1001HasOverThreeThousandLayersAndBuildsFast) {
  // 333 units × 10 layers (3 BN, 3 ReLU, 3 conv, add) + 3 shortcuts + stem conv
  // + final BN, ReLU, pool, fc = 3,338.
  const ZooEntry& e = find_zoo_entry("resnet1001", "test");
  double best_s = 1e9;
  size_t layers = 0;
  for (int run = 0; run < 3; ++run) {  // best of three: the machine is shared
    const auto start = std::chrono::steady_clock::now();
    const Model m = e.build();
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    layers = m.layers.size();
  }
  EXPECT_EQ(layers, 3'338u);
  EXPECT_LT(best_s, 0.1);
}

TEST(ResnetZoo, EveryModelBuildsWellUnderASecond) {
  for (const ZooEntry& e : resnet_zoo_entries()) {
    const auto start = std::chrono::steady_clock::now();
    const Model m = e.build();
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(m.layers.empty());
    EXPECT_LT(elapsed_s, 0.25) << e.name;
  }
}

}  // namespace
}  // namespace trainsim
