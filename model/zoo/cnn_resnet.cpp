// Residual image models of the zoo: torchvision's ImageNet ResNets (He et al.
// 2015, v1.5 stride placement) and the CIFAR-10 form of ResNet-152 seed 000
// trains, the pre-activation CIFAR ResNets of He et al. 2016 "Identity
// Mappings" (ResNet-164, ResNet-1001) and ResNeXt-29 (Xie et al. 2017). One
// stage loop serves every model; the three block kinds below are the only
// per-architecture code.
#include <string>
#include <vector>

#include "model/zoo/builder.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

// One residual unit's shape: `width` channels inside the unit (the 3×3 conv),
// `out_channels` leaving it, `stride` of the unit (its strided conv and the
// shortcut), and `groups` on the 3×3 conv (ResNeXt cardinality; 1 elsewhere).
struct BlockSpec {
  int64_t width = 0;
  int64_t out_channels = 0;
  int64_t stride = 1;
  int64_t groups = 1;
};

// A stage: `blocks` units of the same shape; only the first one strides.
struct StageSpec {
  int64_t blocks = 0;
  int64_t width = 0;
  int64_t out_channels = 0;
  int64_t stride = 1;
};

// Appends one residual unit named `prefix`.* fed by `from`; returns its output.
using BlockFn = std::string (*)(ModelBuilder&, const std::string& prefix, const std::string& from, const BlockSpec&);

// Every model here projects the shortcut (1×1 conv, stride s) exactly when the
// unit changes the shape: torchvision's `downsample`, ResNeXt's shortcut type
// B, resnet-pre-act.lua's "increasing dimensions" unit.
bool needs_projection(const ModelBuilder& b, const std::string& from, const BlockSpec& s) {
  return s.stride != 1 || b.shape_of(from)[0] != s.out_channels;
}

// Shortcut of a post-activation unit: the input itself, or torchvision's
// `downsample` (1×1 conv, stride s, then BN) when the unit changes the shape.
std::string post_act_shortcut(ModelBuilder& b, const std::string& p, const std::string& from, const BlockSpec& s) {
  if (!needs_projection(b, from, s)) return from;
  const std::string projected = b.conv2d(p + ".downsample.0", from, conv(s.out_channels, 1, s.stride, 0, false));
  return b.batchnorm(p + ".downsample.1", projected);
}

// torchvision BasicBlock (resnet18/34): conv3×3-BN-ReLU-conv3×3-BN, + shortcut, ReLU.
std::string basic_block(ModelBuilder& b, const std::string& p, const std::string& from, const BlockSpec& s) {
  std::string x = b.conv2d(p + ".conv1", from, conv(s.width, 3, s.stride, 1, false));
  x = b.relu(p + ".relu1", b.batchnorm(p + ".bn1", x));
  x = b.batchnorm(p + ".bn2", b.conv2d(p + ".conv2", x, conv(s.out_channels, 3, 1, 1, false)));
  const std::string shortcut = post_act_shortcut(b, p, from, s);
  return b.relu(p + ".relu2", b.add(p + ".add", {x, shortcut}));
}

// Post-activation bottleneck: conv1×1-BN-ReLU-conv3×3(stride, groups)-BN-ReLU-
// conv1×1-BN, + shortcut, ReLU. torchvision's Bottleneck (stride on the 3×3:
// "ResNet v1.5") and ResNeXt form (C) (resnext.lua) are this same unit.
std::string bottleneck_block(ModelBuilder& b, const std::string& p, const std::string& from, const BlockSpec& s) {
  std::string x = b.conv2d(p + ".conv1", from, conv(s.width, 1, 1, 0, false));
  x = b.relu(p + ".relu1", b.batchnorm(p + ".bn1", x));
  ConvSpec grouped = conv(s.width, 3, s.stride, 1, false);
  grouped.groups = s.groups;
  x = b.relu(p + ".relu2", b.batchnorm(p + ".bn2", b.conv2d(p + ".conv2", x, grouped)));
  x = b.batchnorm(p + ".bn3", b.conv2d(p + ".conv3", x, conv(s.out_channels, 1, 1, 0, false)));
  const std::string shortcut = post_act_shortcut(b, p, from, s);
  return b.relu(p + ".relu3", b.add(p + ".add", {x, shortcut}));
}

// Pre-activation bottleneck (He et al. 2016, Fig. 4(e); resnet-pre-act.lua):
// BN-ReLU-conv1×1(stride)-BN-ReLU-conv3×3-BN-ReLU-conv1×1, + shortcut, no ReLU
// after the add. A projecting unit shares its first BN-ReLU with the shortcut
// conv; an identity unit adds its raw input. Stride sits on the first 1×1 as in
// that code (same shapes and counts as striding the 3×3).
std::string preact_bottleneck_block(ModelBuilder& b, const std::string& p, const std::string& from,
                                    const BlockSpec& s) {
  const std::string act = b.relu(p + ".relu1", b.batchnorm(p + ".bn1", from));
  std::string x = b.conv2d(p + ".conv1", act, conv(s.width, 1, s.stride, 0, false));
  x = b.relu(p + ".relu2", b.batchnorm(p + ".bn2", x));
  x = b.conv2d(p + ".conv2", x, conv(s.width, 3, 1, 1, false));
  x = b.relu(p + ".relu3", b.batchnorm(p + ".bn3", x));
  x = b.conv2d(p + ".conv3", x, conv(s.out_channels, 1, 1, 0, false));
  std::string shortcut = from;
  if (needs_projection(b, from, s)) {
    shortcut = b.conv2d(p + ".shortcut", act, conv(s.out_channels, 1, s.stride, 0, false));
  }
  return b.add(p + ".add", {x, shortcut});
}

// Appends the stages as layer1.0 … layerN.k (torchvision's naming); returns the last output.
std::string add_stages(ModelBuilder& b, std::string x, const std::vector<StageSpec>& stages, int64_t groups,
                       BlockFn block) {
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    const StageSpec& st = stages[stage];
    for (int64_t i = 0; i < st.blocks; ++i) {
      const BlockSpec spec{st.width, st.out_channels, i == 0 ? st.stride : 1, groups};
      x = block(b, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), x, spec);
    }
  }
  return x;
}

// The input end of a torchvision-style ResNet. kImageNet: 3×224×224 through
// conv7×7/2-BN-ReLU-maxpool3/2 (layer1 at 56×56). kCifar: 3×32×32 through
// conv3×3/1-BN-ReLU and no max-pool (layer1 at 32×32), as kuangliu's
// pytorch-cifar ResNets, the usual CIFAR form of the ImageNet depths.
enum class ResnetStem { kImageNet, kCifar };

// torchvision ResNet: the stem, four stages (widths 64…512, strides 1,2,2,2),
// global average pool (kuangliu's avg_pool2d(4) at 4×4 is the same), fc.
Model build_torchvision_resnet(const std::string& name, const std::string& description, ResnetStem stem,
                               int64_t classes, const std::vector<int64_t>& blocks, int64_t expansion, BlockFn block,
                               int64_t default_batch) {
  const bool cifar = stem == ResnetStem::kCifar;
  ModelBuilder b(name, description, {3, cifar ? 32 : 224, cifar ? 32 : 224}, default_batch);
  std::string x;
  if (cifar) {
    x = b.relu("relu", b.batchnorm("bn1", b.conv2d("conv1", kModelInput, conv(64, 3, 1, 1, false))));
  } else {
    x = b.conv2d("conv1", kModelInput, conv(64, 7, 2, 3, false));
    x = b.maxpool("maxpool", b.relu("relu", b.batchnorm("bn1", x)), pool(3, 2, 1));
  }
  std::vector<StageSpec> stages;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t width = int64_t{64} << i;
    stages.push_back({blocks[i], width, width * expansion, i == 0 ? 1 : 2});
  }
  x = add_stages(b, x, stages, 1, block);
  b.linear("fc", b.global_avgpool("avgpool", x), classes);
  return std::move(b).build();
}

Model build_imagenet_resnet(const std::string& name, const std::string& description, const std::vector<int64_t>& blocks,
                            int64_t expansion, BlockFn block, int64_t default_batch) {
  return build_torchvision_resnet(name, description, ResnetStem::kImageNet, 1000, blocks, expansion, block,
                                  default_batch);
}

// Pre-activation ResNet-(9n+2) for CIFAR 3×32×32 (resnet-pre-act.lua): conv3×3
// to 16 channels, three stages of n bottleneck units (widths 16, 32, 64; out
// 64, 128, 256; strides 1, 2, 2), final BN-ReLU, global average pool, fc.
Model build_preact_cifar_resnet(const std::string& name, const std::string& description, int64_t units_per_stage,
                                int64_t classes, int64_t default_batch) {
  ModelBuilder b(name, description, {3, 32, 32}, default_batch);
  std::string x = b.conv2d("conv1", kModelInput, conv(16, 3, 1, 1, false));
  const int64_t n = units_per_stage;
  x = add_stages(b, x, {{n, 16, 64, 1}, {n, 32, 128, 2}, {n, 64, 256, 2}}, 1, &preact_bottleneck_block);
  x = b.relu("final_relu", b.batchnorm("final_bn", x));
  b.linear("fc", b.global_avgpool("avgpool", x), classes);
  return std::move(b).build();
}

// Default batches: the seed that trains each model says which (see the entries).
Model build_resnet18() {
  // Seed 001 (DSP) trains ResNet-18 on ImageNet with batch 256.
  return build_imagenet_resnet("resnet18", "ResNet-18 (torchvision), ImageNet 3x224x224, 1000 classes", {2, 2, 2, 2}, 1,
                               &basic_block, 256);
}

Model build_resnet50() {
  // Seed 001 (DSP) trains ResNet-50 on ImageNet with batch 256 (seed 004, Parallax: 64 per GPU).
  return build_imagenet_resnet("resnet50", "ResNet-50 v1.5 (torchvision), ImageNet 3x224x224, 1000 classes",
                               {3, 4, 6, 3}, 4, &bottleneck_block, 256);
}

Model build_resnet101() {
  // Seed 001 (DSP, Table 3) runs ResNet-101 with K=4 blocks and batch 128.
  return build_imagenet_resnet("resnet101", "ResNet-101 v1.5 (torchvision), ImageNet 3x224x224, 1000 classes",
                               {3, 4, 23, 3}, 4, &bottleneck_block, 128);
}

Model build_resnet152() {
  // Seed 000 (DualPipe) trains ResNet-152 with batch 128 (seed 003, CGDP: 12 per GPU on ImageNet).
  return build_imagenet_resnet("resnet152", "ResNet-152 v1.5 (torchvision), ImageNet 3x224x224, 1000 classes",
                               {3, 8, 36, 3}, 4, &bottleneck_block, 128);
}

Model build_resnet152_cifar10() {
  // Seed 000 (DualPipe, §4.1) trains ResNet-152 on CIFAR-10 with batch 128.
  return build_torchvision_resnet("resnet152-cifar10",
                                  "ResNet-152 (torchvision bottlenecks, 3x3 stem, no max-pool), CIFAR-10 3x32x32",
                                  ResnetStem::kCifar, 10, {3, 8, 36, 3}, 4, &bottleneck_block, 128);
}

// torchvision resnet152's 60,192,808 with its 7×7 stem conv (3·49·64 = 9,408)
// replaced by a 3×3 one (3·9·64 = 1,728) and fc 2048·1000 + 1000 = 2,049,000
// by 2048·10 + 10 = 20,490: every other layer is unchanged. At 100 classes it
// is 58,341,028, the 58.3M pytorch-cifar100's README prints for resnet152.
constexpr int64_t kResnet152Cifar10Params = 60'192'808 - 9'408 + 1'728 - 2'049'000 + 20'490;  // 58,156,618

Model build_resnet164() {
  // Seed 001 (DSP): ResNet-164 on CIFAR-10 (Fig. 3, Table 3), batch 128. n = (164-2)/9 = 18.
  return build_preact_cifar_resnet("resnet164", "Pre-activation ResNet-164 (He et al. 2016), CIFAR-10 3x32x32", 18, 10,
                                   128);
}

Model build_resnet1001() {
  // Seed 001 (DSP, Table 3): ResNet-1001 in the CIFAR-100 columns, batch 128. n = (1001-2)/9 = 111.
  return build_preact_cifar_resnet("resnet1001", "Pre-activation ResNet-1001 (He et al. 2016), CIFAR-100 3x32x32", 111,
                                   100, 128);
}

// ResNeXt-29 (8×64d) for CIFAR-10 (resnext.lua, form C): conv3×3 64-BN-ReLU,
// three stages of 3 units (grouped width 8·64 = 512, 1024, 2048 in 8 groups;
// out 256, 512, 1024; strides 1, 2, 2), global average pool, fc 10.
Model build_resnext29() {
  // Seed 001 (DSP, Table 3): ResNeXt-29 on CIFAR-10 with batch 128; it names no
  // variant, so the ResNeXt paper's 8×64d.
  ModelBuilder b("resnext29", "ResNeXt-29 8x64d (Xie et al. 2017), CIFAR-10 3x32x32", {3, 32, 32}, 128);
  std::string x = b.conv2d("conv1", kModelInput, conv(64, 3, 1, 1, false));
  x = b.relu("relu", b.batchnorm("bn1", x));
  constexpr int64_t kCardinality = 8;
  x = add_stages(b, x, {{3, 512, 256, 1}, {3, 1024, 512, 2}, {3, 2048, 1024, 2}}, kCardinality, &bottleneck_block);
  b.linear("fc", b.global_avgpool("avgpool", x), 10);
  return std::move(b).build();
}

// ResNet-20 (He et al. 2015 §4.2, n = 3) for Fashion-MNIST 1×28×28: conv3×3
// 16-BN-ReLU, three stages of three basic blocks (16, 32, 64 channels;
// strides 1, 2, 2: 28×28, 14×14, 7×7) with projection shortcuts (1×1 conv +
// BN, the paper's option B) where the shape changes, global average pool, fc 10.
Model build_fmnist_resnet20() {
  ModelBuilder b("fmnist-resnet20", "ResNet-20 (He et al. 2015, CIFAR form), Fashion-MNIST 1x28x28, 10 classes",
                 {1, 28, 28}, 64);
  std::string x = b.conv2d("conv1", kModelInput, conv(16, 3, 1, 1, false));
  x = b.relu("relu", b.batchnorm("bn1", x));
  x = add_stages(b, x, {{3, 16, 16, 1}, {3, 32, 32, 2}, {3, 64, 64, 2}}, 1, &basic_block);
  b.linear("fc", b.global_avgpool("avgpool", x), 10);
  return std::move(b).build();
}

// conv1 1·9·16 + bn 32; stage 1: 3 × (2 · 16·9·16 + 2 · 32) = 14,016; stage 2:
// 16·9·32 + 32·9·32 + 2·64 + shortcut 16·32 + 64 = 14,528, then 2 × (2 · 32·9·32
// + 2·64) = 37,120; stage 3: 32·9·64 + 64·9·64 + 2·128 + 32·64 + 128 = 57,728,
// then 2 × (2 · 64·9·64 + 2·128) = 147,968; fc 64·10 + 10 = 650.
constexpr int64_t kFmnistResnet20Params = 144 + 32 + 14'016 + 14'528 + 37'120 + 57'728 + 147'968 + 650;  // 272,186

}  // namespace

std::vector<ZooEntry> resnet_zoo_entries() {
  return {
      {"fmnist-resnet20", "ResNet-20 (basic blocks, projection shortcuts), Fashion-MNIST 28x28, CPU-trainable",
       kFmnistResnet20Params, "hand count of He et al. 2015 §4.2 with n = 3 and 1x1-conv shortcuts (this file)",
       &build_fmnist_resnet20},
      {"resnet18", "ResNet-18, ImageNet (torchvision)", 11'689'512, "torchvision 0.15 resnet18 num_params",
       &build_resnet18},
      {"resnet50", "ResNet-50 v1.5, ImageNet (torchvision)", 25'557'032, "torchvision 0.15 resnet50 num_params",
       &build_resnet50},
      {"resnet101", "ResNet-101 v1.5, ImageNet (torchvision)", 44'549'160, "torchvision 0.15 resnet101 num_params",
       &build_resnet101},
      {"resnet152", "ResNet-152 v1.5, ImageNet (torchvision)", 60'192'808, "torchvision 0.15 resnet152 num_params",
       &build_resnet152},
      {"resnet152-cifar10", "ResNet-152 on CIFAR-10 32x32 (seed 000): 3x3 stem, no max-pool", kResnet152Cifar10Params,
       "derived: torchvision resnet152 with kuangliu pytorch-cifar's 3x3 stem and 10 classes",
       &build_resnet152_cifar10},
      // The paper rounds to 0.1M and, by its figures, counts conv and fc weights
      // only: this build has 1,679,034 of those (1,703,258 with BN scale/shift).
      {"resnet164", "Pre-activation ResNet-164, CIFAR-10", 1'700'000,
       "He et al. 2016 Identity Mappings, Table 3: 1.7M (rounded; no BN parameters)", &build_resnet164},
      // 10,201,620 conv and fc weights, 10,350,836 with BN scale/shift: only the
      // former rounds to the paper's 10.2M.
      {"resnet1001", "Pre-activation ResNet-1001, CIFAR-100", 10'200'000,
       "He et al. 2016 Identity Mappings, Table 3: 10.2M (rounded; no BN parameters)", &build_resnet1001},
      // Exact count 34,426,698.
      {"resnext29", "ResNeXt-29 8x64d, CIFAR-10", 34'400'000, "Xie et al. 2017 ResNeXt, Table 7: 34.4M (rounded)",
       &build_resnext29},
  };
}

}  // namespace trainsim
