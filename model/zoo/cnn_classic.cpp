// The classic image models of the zoo: AlexNet (BVLC Caffe), VGG-16/19,
// GoogLeNet, Inception-v3 and -v4, the CIFAR forms of VGG and Inception-v4 the
// seeds train, the CIFAR-100 CNN that Pipe-SGD trains and a small
// Fashion-MNIST CNN a CPU trains in seconds. One layer per framework operator,
// named after the reference implementation's modules; the head ends at the
// logits (the softmax belongs to the loss).
#include <string>
#include <vector>

#include "model/zoo/builder.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

constexpr int64_t kImageNetClasses = 1000;

// What a model is built to classify: square 3-channel images of `side` pixels
// into `classes`. The CIFAR forms of VGG and Inception-v4 reuse the ImageNet
// builders with one of these.
struct ImageTask {
  const char* dataset;  // for descriptions, e.g. "CIFAR-10"
  int64_t side = 0;     // pixels per image side
  int64_t classes = 0;
};

constexpr ImageTask kImageNet224{"ImageNet", 224, kImageNetClasses};
constexpr ImageTask kImageNet299{"ImageNet", 299, kImageNetClasses};
constexpr ImageTask kCifar10{"CIFAR-10", 32, 10};
constexpr ImageTask kCifar100{"CIFAR-100", 32, 100};

std::string task_text(const ImageTask& task) {
  const std::string side = std::to_string(task.side);
  return std::string(task.dataset) + " 3x" + side + "x" + side + ", " + std::to_string(task.classes) + " classes";
}

// Conv with a kh×kw kernel and its own padding per axis (Inception's 1×7, 7×1, 1×3, 3×1).
ConvSpec conv_hw(int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t pad_h, int64_t pad_w) {
  return ConvSpec{out_channels, kernel_h, kernel_w, 1, 1, pad_h, pad_w, 1, true};
}

// Conv (with bias) then ReLU, as in Caffe and torchvision's VGG: returns the ReLU.
std::string conv_relu(ModelBuilder& b, const std::string& conv_name, const std::string& relu_name,
                      const std::string& from, const ConvSpec& spec) {
  return b.relu(relu_name, b.conv2d(conv_name, from, spec));
}

// torchvision/timm BasicConv2d: conv without bias, batchnorm, ReLU ("<name>.conv/.bn/.relu").
std::string basic_conv(ModelBuilder& b, const std::string& name, const std::string& from, ConvSpec spec) {
  spec.bias = false;
  const std::string c = b.conv2d(name + ".conv", from, spec);
  return b.relu(name + ".relu", b.batchnorm(name + ".bn", c));
}

// Caffe LRN, ACROSS_CHANNELS, local_size n = 5 (Krizhevsky et al. 2012 §3.3):
// b = a / (k + α/n·Σ a²)^β. FLOPs per element by the definition: n squares and
// n-1 adds (2n-1 = 9), scale and offset (2), power (1), divide (1) = 13.
// No parameters. ModelBuilder has no LRN, so the layer is written here.
constexpr double kLrnFlopsPerElement = 13.0;

std::string lrn(ModelBuilder& b, const std::string& name, const std::string& from) {
  Layer layer{name, "lrn", {from}, b.shape_of(from)};
  layer.forward_flops = kLrnFlopsPerElement * static_cast<double>(element_count(layer.output_shape));
  return b.custom(std::move(layer));
}

// --- AlexNet ---------------------------------------------------------------
// BVLC Caffe models/bvlc_alexnet: 227×227 crop, conv2/4/5 in two groups, LRN
// after relu1/relu2, ceil-mode pooling, dropout after relu6/relu7. Seed 003
// trains exactly this network (its Table 4 per-layer counts, 0.03/0.3/0.9/0.7/
// 0.4/37.8/16.8/4 M, match the grouped convs; torchvision's ungrouped AlexNet
// would give 0.66 M for layer 3 and 0.88 M for layer 4).
Model build_alexnet() {
  // default_batch 256: seed 003 Table 1, AlexNet minibatch per GPU.
  ModelBuilder b("alexnet", "AlexNet, BVLC Caffe (grouped convs, LRN); ImageNet 3x227x227, 1000 classes", {3, 227, 227},
                 256);
  std::string x = conv_relu(b, "conv1", "relu1", kModelInput, conv(96, 11, 4));
  x = b.maxpool("pool1", lrn(b, "norm1", x), pool(3, 2, 0, true));
  ConvSpec conv2 = conv(256, 5, 1, 2);
  conv2.groups = 2;
  x = conv_relu(b, "conv2", "relu2", x, conv2);
  x = b.maxpool("pool2", lrn(b, "norm2", x), pool(3, 2, 0, true));
  x = conv_relu(b, "conv3", "relu3", x, conv(384, 3, 1, 1));
  ConvSpec conv45 = conv(384, 3, 1, 1);
  conv45.groups = 2;
  x = conv_relu(b, "conv4", "relu4", x, conv45);
  conv45.out_channels = 256;
  x = conv_relu(b, "conv5", "relu5", x, conv45);
  x = b.flatten("flatten", b.maxpool("pool5", x, pool(3, 2, 0, true)));
  x = b.dropout("drop6", b.relu("relu6", b.linear("fc6", x, 4096)));
  x = b.dropout("drop7", b.relu("relu7", b.linear("fc7", x, 4096)));
  b.linear("fc8", x, kImageNetClasses);
  return std::move(b).build();
}

// --- VGG ---------------------------------------------------------------------
// Simonyan & Zisserman 2015, configurations D (16) and E (19), no batchnorm, as
// torchvision's vgg16/vgg19 and the Caffe model seed 003 cites. torchvision's
// AdaptiveAvgPool2d(7) is the identity at 224×224 and is left out.
//
// CIFAR forms (seed 000 §4.1 trains VGG16, citing the paper, on CIFAR-10;
// seed 001 §5 VGG-19 on CIFAR-100; both in TensorFlow, neither lists its
// layers): the same convs and five 2×2 pools, which take 32×32 to 1×1, so fc6
// reads 512 features instead of 7·7·512 = 25,088. fc6 and fc7 stay 4096 wide:
// TensorFlow CIFAR VGGs of 2018-2019 typically append dense 4096, 4096,
// classes to the conv stack, as pytorch-cifar100's vgg does (512→4096→4096→
// classes), so only what the input size forces changes. The narrower
// 512→512→512→classes head (Torch cifar.torch lineage) is the other common
// choice; it would cut fc6+fc7 from 18.9 M to 0.5 M parameters, and the
// data-parallel gradient volume with them. No adaptive pool: replicating the
// 1×1 map to 7×7 is torchvision-only.
Model build_vgg(const std::string& name, const std::string& description, const std::vector<int>& convs_per_block,
                const ImageTask& task, int64_t default_batch) {
  ModelBuilder b(name, description, {3, task.side, task.side}, default_batch);
  const int64_t channels[] = {64, 128, 256, 512, 512};
  std::string x = kModelInput;
  for (size_t block = 0; block < convs_per_block.size(); ++block) {
    for (int i = 1; i <= convs_per_block[block]; ++i) {
      const std::string id = std::to_string(block + 1) + "_" + std::to_string(i);
      x = conv_relu(b, "conv" + id, "relu" + id, x, conv(channels[block], 3, 1, 1));
    }
    x = b.maxpool("pool" + std::to_string(block + 1), x, pool(2, 2));
  }
  x = b.flatten("flatten", x);
  x = b.dropout("drop6", b.relu("relu6", b.linear("fc6", x, 4096)));
  x = b.dropout("drop7", b.relu("relu7", b.linear("fc7", x, 4096)));
  b.linear("fc8", x, task.classes);
  return std::move(b).build();
}

const std::vector<int> kVgg16Convs = {2, 2, 3, 3, 3};  // configuration D
const std::vector<int> kVgg19Convs = {2, 2, 4, 4, 4};  // configuration E

// CIFAR parameter counts, from torchvision's: its fc6 25,088·4096 + 4096 =
// 102,764,544, fc7 16,781,312 and fc8 4,097,000 leave convs of 14,714,688
// (vgg16, 138,357,544) and 20,024,384 (vgg19, 143,667,240); the CIFAR head is
// fc6 512·4096 + 4096 = 2,101,248, fc7 16,781,312, fc8 4096·classes + classes.
constexpr int64_t kVgg16Cifar10Params = 14'714'688 + 2'101'248 + 16'781'312 + 40'970;    // 33,638,218
constexpr int64_t kVgg19Cifar100Params = 20'024'384 + 2'101'248 + 16'781'312 + 409'700;  // 39,316,644

// default_batch 32: seed 003 Table 1, VGGNet-16 minibatch per GPU (ImageNet).
Model build_vgg16() {
  return build_vgg("vgg16", "VGG-16 (torchvision, no BN); ImageNet 3x224x224", kVgg16Convs, kImageNet224, 32);
}

// default_batch 128: seed 000 §4.1 (batch 128 for every model).
Model build_vgg16_cifar10() {
  return build_vgg("vgg16-cifar10", "VGG-16 (configuration D, no BN, fc6 512->4096); " + task_text(kCifar10),
                   kVgg16Convs, kCifar10, 128);
}

// default_batch 128: seed 001 trains VGG-19 with K=3 blocks at batch 128
// (its speedup table; on CIFAR-100, which vgg19-cifar100 models).
Model build_vgg19() {
  return build_vgg("vgg19", "VGG-19 (torchvision, no BN); ImageNet 3x224x224", kVgg19Convs, kImageNet224, 128);
}

// default_batch 128: seed 001 §5, "In CIFAR experiments, the batch size is 128".
Model build_vgg19_cifar100() {
  return build_vgg("vgg19-cifar100", "VGG-19 (configuration E, no BN, fc6 512->4096); " + task_text(kCifar100),
                   kVgg19Convs, kCifar100, 128);
}

// --- GoogLeNet ---------------------------------------------------------------
// torchvision googlenet(aux_logits=False): BasicConv2d (conv + BN) throughout;
// its third branch uses a 3×3 kernel where the paper has 5×5 (kept by
// torchvision for its weights), which the published 6,624,904 counts.
std::string googlenet_inception(ModelBuilder& b, const std::string& name, const std::string& from, int64_t c1,
                                int64_t c3_reduce, int64_t c3, int64_t c5_reduce, int64_t c5, int64_t pool_proj) {
  const std::string b1 = basic_conv(b, name + ".branch1", from, conv(c1, 1));
  std::string b2 = basic_conv(b, name + ".branch2.0", from, conv(c3_reduce, 1));
  b2 = basic_conv(b, name + ".branch2.1", b2, conv(c3, 3, 1, 1));
  std::string b3 = basic_conv(b, name + ".branch3.0", from, conv(c5_reduce, 1));
  b3 = basic_conv(b, name + ".branch3.1", b3, conv(c5, 3, 1, 1));
  std::string b4 = b.maxpool(name + ".branch4.pool", from, pool(3, 1, 1, true));
  b4 = basic_conv(b, name + ".branch4.1", b4, conv(pool_proj, 1));
  return b.concat(name, {b1, b2, b3, b4});
}

Model build_googlenet() {
  // default_batch 64: seed 003 Table 1, GoogLeNet-v1 minibatch per GPU.
  ModelBuilder b("googlenet", "GoogLeNet / Inception-v1 (torchvision, BN, no aux heads); ImageNet 3x224x224",
                 {3, 224, 224}, 64);
  std::string x = basic_conv(b, "conv1", kModelInput, conv(64, 7, 2, 3));
  x = b.maxpool("maxpool1", x, pool(3, 2, 0, true));
  x = basic_conv(b, "conv2", x, conv(64, 1));
  x = basic_conv(b, "conv3", x, conv(192, 3, 1, 1));
  x = b.maxpool("maxpool2", x, pool(3, 2, 0, true));
  x = googlenet_inception(b, "inception3a", x, 64, 96, 128, 16, 32, 32);
  x = googlenet_inception(b, "inception3b", x, 128, 128, 192, 32, 96, 64);
  x = b.maxpool("maxpool3", x, pool(3, 2, 0, true));
  x = googlenet_inception(b, "inception4a", x, 192, 96, 208, 16, 48, 64);
  x = googlenet_inception(b, "inception4b", x, 160, 112, 224, 24, 64, 64);
  x = googlenet_inception(b, "inception4c", x, 128, 128, 256, 24, 64, 64);
  x = googlenet_inception(b, "inception4d", x, 112, 144, 288, 32, 64, 64);
  x = googlenet_inception(b, "inception4e", x, 256, 160, 320, 32, 128, 128);
  x = b.maxpool("maxpool4", x, pool(2, 2, 0, true));
  x = googlenet_inception(b, "inception5a", x, 256, 160, 320, 32, 128, 128);
  x = googlenet_inception(b, "inception5b", x, 384, 192, 384, 48, 128, 128);
  x = b.dropout("dropout", b.global_avgpool("avgpool", x));
  b.linear("fc", x, kImageNetClasses);
  return std::move(b).build();
}

// --- Inception-v3 ------------------------------------------------------------
// torchvision Inception3 (Szegedy et al. 2016, "Rethinking the Inception
// architecture") at 299×299 without the AuxLogits head: seed 004 Table 1 gives
// Inception-v3 24 M dense parameters, the count without it (27.2 M with it).
std::string v3_block_a(ModelBuilder& b, const std::string& n, const std::string& from, int64_t pool_features) {
  const std::string b1 = basic_conv(b, n + ".branch1x1", from, conv(64, 1));
  std::string b5 = basic_conv(b, n + ".branch5x5_1", from, conv(48, 1));
  b5 = basic_conv(b, n + ".branch5x5_2", b5, conv(64, 5, 1, 2));
  std::string d = basic_conv(b, n + ".branch3x3dbl_1", from, conv(64, 1));
  d = basic_conv(b, n + ".branch3x3dbl_2", d, conv(96, 3, 1, 1));
  d = basic_conv(b, n + ".branch3x3dbl_3", d, conv(96, 3, 1, 1));
  std::string p = b.avgpool(n + ".branch_pool.avgpool", from, pool(3, 1, 1));
  p = basic_conv(b, n + ".branch_pool", p, conv(pool_features, 1));
  return b.concat(n, {b1, b5, d, p});
}

std::string v3_block_b(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b3 = basic_conv(b, n + ".branch3x3", from, conv(384, 3, 2));
  std::string d = basic_conv(b, n + ".branch3x3dbl_1", from, conv(64, 1));
  d = basic_conv(b, n + ".branch3x3dbl_2", d, conv(96, 3, 1, 1));
  d = basic_conv(b, n + ".branch3x3dbl_3", d, conv(96, 3, 2));
  const std::string p = b.maxpool(n + ".branch_pool", from, pool(3, 2));
  return b.concat(n, {b3, d, p});
}

std::string v3_block_c(ModelBuilder& b, const std::string& n, const std::string& from, int64_t c7) {
  const std::string b1 = basic_conv(b, n + ".branch1x1", from, conv(192, 1));
  std::string s = basic_conv(b, n + ".branch7x7_1", from, conv(c7, 1));
  s = basic_conv(b, n + ".branch7x7_2", s, conv_hw(c7, 1, 7, 0, 3));
  s = basic_conv(b, n + ".branch7x7_3", s, conv_hw(192, 7, 1, 3, 0));
  std::string d = basic_conv(b, n + ".branch7x7dbl_1", from, conv(c7, 1));
  d = basic_conv(b, n + ".branch7x7dbl_2", d, conv_hw(c7, 7, 1, 3, 0));
  d = basic_conv(b, n + ".branch7x7dbl_3", d, conv_hw(c7, 1, 7, 0, 3));
  d = basic_conv(b, n + ".branch7x7dbl_4", d, conv_hw(c7, 7, 1, 3, 0));
  d = basic_conv(b, n + ".branch7x7dbl_5", d, conv_hw(192, 1, 7, 0, 3));
  std::string p = b.avgpool(n + ".branch_pool.avgpool", from, pool(3, 1, 1));
  p = basic_conv(b, n + ".branch_pool", p, conv(192, 1));
  return b.concat(n, {b1, s, d, p});
}

std::string v3_block_d(ModelBuilder& b, const std::string& n, const std::string& from) {
  std::string t = basic_conv(b, n + ".branch3x3_1", from, conv(192, 1));
  t = basic_conv(b, n + ".branch3x3_2", t, conv(320, 3, 2));
  std::string s = basic_conv(b, n + ".branch7x7x3_1", from, conv(192, 1));
  s = basic_conv(b, n + ".branch7x7x3_2", s, conv_hw(192, 1, 7, 0, 3));
  s = basic_conv(b, n + ".branch7x7x3_3", s, conv_hw(192, 7, 1, 3, 0));
  s = basic_conv(b, n + ".branch7x7x3_4", s, conv(192, 3, 2));
  const std::string p = b.maxpool(n + ".branch_pool", from, pool(3, 2));
  return b.concat(n, {t, s, p});
}

std::string v3_block_e(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b1 = basic_conv(b, n + ".branch1x1", from, conv(320, 1));
  const std::string t = basic_conv(b, n + ".branch3x3_1", from, conv(384, 1));
  const std::string ta = basic_conv(b, n + ".branch3x3_2a", t, conv_hw(384, 1, 3, 0, 1));
  const std::string tb = basic_conv(b, n + ".branch3x3_2b", t, conv_hw(384, 3, 1, 1, 0));
  const std::string t_cat = b.concat(n + ".branch3x3", {ta, tb});
  std::string d = basic_conv(b, n + ".branch3x3dbl_1", from, conv(448, 1));
  d = basic_conv(b, n + ".branch3x3dbl_2", d, conv(384, 3, 1, 1));
  const std::string da = basic_conv(b, n + ".branch3x3dbl_3a", d, conv_hw(384, 1, 3, 0, 1));
  const std::string db = basic_conv(b, n + ".branch3x3dbl_3b", d, conv_hw(384, 3, 1, 1, 0));
  const std::string d_cat = b.concat(n + ".branch3x3dbl", {da, db});
  std::string p = b.avgpool(n + ".branch_pool.avgpool", from, pool(3, 1, 1));
  p = basic_conv(b, n + ".branch_pool", p, conv(192, 1));
  return b.concat(n, {b1, t_cat, d_cat, p});
}

Model build_inception_v3() {
  // default_batch 64: seed 004 Table 1 caption, 64 per GPU for the CNN models.
  ModelBuilder b("inception-v3", "Inception-v3 (torchvision, no aux head); ImageNet 3x299x299, 1000 classes",
                 {3, 299, 299}, 64);
  std::string x = basic_conv(b, "Conv2d_1a_3x3", kModelInput, conv(32, 3, 2));
  x = basic_conv(b, "Conv2d_2a_3x3", x, conv(32, 3));
  x = basic_conv(b, "Conv2d_2b_3x3", x, conv(64, 3, 1, 1));
  x = b.maxpool("maxpool1", x, pool(3, 2));
  x = basic_conv(b, "Conv2d_3b_1x1", x, conv(80, 1));
  x = basic_conv(b, "Conv2d_4a_3x3", x, conv(192, 3));
  x = b.maxpool("maxpool2", x, pool(3, 2));
  x = v3_block_a(b, "Mixed_5b", x, 32);
  x = v3_block_a(b, "Mixed_5c", x, 64);
  x = v3_block_a(b, "Mixed_5d", x, 64);
  x = v3_block_b(b, "Mixed_6a", x);
  x = v3_block_c(b, "Mixed_6b", x, 128);
  x = v3_block_c(b, "Mixed_6c", x, 160);
  x = v3_block_c(b, "Mixed_6d", x, 160);
  x = v3_block_c(b, "Mixed_6e", x, 192);
  x = v3_block_d(b, "Mixed_7a", x);
  x = v3_block_e(b, "Mixed_7b", x);
  x = v3_block_e(b, "Mixed_7c", x);
  x = b.dropout("dropout", b.global_avgpool("avgpool", x));
  b.linear("fc", x, kImageNetClasses);
  return std::move(b).build();
}

// --- Inception-v4 ------------------------------------------------------------
// Szegedy et al. 2017 ("Inception-v4, Inception-ResNet", Figs. 3-9) as in
// Cadene's pretrainedmodels / timm inception_v4: BasicConv2d throughout, no
// aux head, no dropout before the classifier.
//
// CIFAR form (seed 000 §4.1 trains Inception v4 on CIFAR-10 and names no
// adaptation): the stem of Fig. 3 at 299×299 divides the side by 8, which
// would leave 32×32 at 1×1 before Reduction-A. pytorch-cifar100's
// inceptionv4 keeps the stem's layers but runs them at stride 1 with 'same'
// padding after a first valid 3×3 conv (32 → 30), and pads Reduction-B's
// stride-2 convs and pool by 1, so the grids are 30 (Inception-A), 14
// (Inception-B) and 7 (Inception-C) where ImageNet has 35, 17 and 8. Kernel
// shapes are untouched, so every layer keeps its ImageNet parameter count.

// Parameters: timm's 42,679,816 less its 1536·1000 + 1000 classifier, plus
// 1536·10 + 10 = 15,370, since no other kernel changes: 41,158,186. At 100
// classes that is 41,296,516, the 41.3M pytorch-cifar100's README prints.
constexpr int64_t kInceptionV4Cifar10Params = 42'679'816 - 1'537'000 + 15'370;

// The stem of Fig. 3. `keep_resolution`: the CIFAR form's stride-1, 'same'
// stem (all but the first conv padded by 1); otherwise the paper's strided,
// unpadded one.
std::string v4_stem(ModelBuilder& b, bool keep_resolution) {
  const int64_t stride = keep_resolution ? 1 : 2;
  const int64_t pad = keep_resolution ? 1 : 0;
  std::string x = basic_conv(b, "conv1a_3x3", kModelInput, conv(32, 3, stride));
  x = basic_conv(b, "conv2a_3x3", x, conv(32, 3, 1, pad));
  x = basic_conv(b, "conv2b_3x3", x, conv(64, 3, 1, 1));
  const std::string p3 = b.maxpool("mixed_3a.maxpool", x, pool(3, stride, pad));
  const std::string c3 = basic_conv(b, "mixed_3a.conv", x, conv(96, 3, stride, pad));
  x = b.concat("mixed_3a", {p3, c3});
  std::string l = basic_conv(b, "mixed_4a.branch0.0", x, conv(64, 1));
  l = basic_conv(b, "mixed_4a.branch0.1", l, conv(96, 3, 1, pad));
  std::string r = basic_conv(b, "mixed_4a.branch1.0", x, conv(64, 1));
  r = basic_conv(b, "mixed_4a.branch1.1", r, conv_hw(64, 1, 7, 0, 3));
  r = basic_conv(b, "mixed_4a.branch1.2", r, conv_hw(64, 7, 1, 3, 0));
  r = basic_conv(b, "mixed_4a.branch1.3", r, conv(96, 3, 1, pad));
  x = b.concat("mixed_4a", {l, r});
  const std::string c5 = basic_conv(b, "mixed_5a.conv", x, conv(192, 3, stride, pad));
  const std::string p5 = b.maxpool("mixed_5a.maxpool", x, pool(3, stride, pad));
  return b.concat("mixed_5a", {c5, p5});
}

std::string v4_block_a(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b0 = basic_conv(b, n + ".branch0", from, conv(96, 1));
  std::string b1 = basic_conv(b, n + ".branch1.0", from, conv(64, 1));
  b1 = basic_conv(b, n + ".branch1.1", b1, conv(96, 3, 1, 1));
  std::string b2 = basic_conv(b, n + ".branch2.0", from, conv(64, 1));
  b2 = basic_conv(b, n + ".branch2.1", b2, conv(96, 3, 1, 1));
  b2 = basic_conv(b, n + ".branch2.2", b2, conv(96, 3, 1, 1));
  std::string b3 = b.avgpool(n + ".branch3.avgpool", from, pool(3, 1, 1));
  b3 = basic_conv(b, n + ".branch3.1", b3, conv(96, 1));
  return b.concat(n, {b0, b1, b2, b3});
}

std::string v4_reduction_a(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b0 = basic_conv(b, n + ".branch0", from, conv(384, 3, 2));
  std::string b1 = basic_conv(b, n + ".branch1.0", from, conv(192, 1));
  b1 = basic_conv(b, n + ".branch1.1", b1, conv(224, 3, 1, 1));
  b1 = basic_conv(b, n + ".branch1.2", b1, conv(256, 3, 2));
  const std::string b2 = b.maxpool(n + ".branch2", from, pool(3, 2));
  return b.concat(n, {b0, b1, b2});
}

std::string v4_block_b(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b0 = basic_conv(b, n + ".branch0", from, conv(384, 1));
  std::string b1 = basic_conv(b, n + ".branch1.0", from, conv(192, 1));
  b1 = basic_conv(b, n + ".branch1.1", b1, conv_hw(224, 1, 7, 0, 3));
  b1 = basic_conv(b, n + ".branch1.2", b1, conv_hw(256, 7, 1, 3, 0));
  std::string b2 = basic_conv(b, n + ".branch2.0", from, conv(192, 1));
  b2 = basic_conv(b, n + ".branch2.1", b2, conv_hw(192, 7, 1, 3, 0));
  b2 = basic_conv(b, n + ".branch2.2", b2, conv_hw(224, 1, 7, 0, 3));
  b2 = basic_conv(b, n + ".branch2.3", b2, conv_hw(224, 7, 1, 3, 0));
  b2 = basic_conv(b, n + ".branch2.4", b2, conv_hw(256, 1, 7, 0, 3));
  std::string b3 = b.avgpool(n + ".branch3.avgpool", from, pool(3, 1, 1));
  b3 = basic_conv(b, n + ".branch3.1", b3, conv(128, 1));
  return b.concat(n, {b0, b1, b2, b3});
}

// `pad` on the stride-2 convs and pool: 0 in the paper, 1 in the CIFAR form.
std::string v4_reduction_b(ModelBuilder& b, const std::string& n, const std::string& from, int64_t pad) {
  std::string b0 = basic_conv(b, n + ".branch0.0", from, conv(192, 1));
  b0 = basic_conv(b, n + ".branch0.1", b0, conv(192, 3, 2, pad));
  std::string b1 = basic_conv(b, n + ".branch1.0", from, conv(256, 1));
  b1 = basic_conv(b, n + ".branch1.1", b1, conv_hw(256, 1, 7, 0, 3));
  b1 = basic_conv(b, n + ".branch1.2", b1, conv_hw(320, 7, 1, 3, 0));
  b1 = basic_conv(b, n + ".branch1.3", b1, conv(320, 3, 2, pad));
  const std::string b2 = b.maxpool(n + ".branch2", from, pool(3, 2, pad));
  return b.concat(n, {b0, b1, b2});
}

std::string v4_block_c(ModelBuilder& b, const std::string& n, const std::string& from) {
  const std::string b0 = basic_conv(b, n + ".branch0", from, conv(256, 1));
  const std::string b1 = basic_conv(b, n + ".branch1_0", from, conv(384, 1));
  const std::string b1a = basic_conv(b, n + ".branch1_1a", b1, conv_hw(256, 1, 3, 0, 1));
  const std::string b1b = basic_conv(b, n + ".branch1_1b", b1, conv_hw(256, 3, 1, 1, 0));
  const std::string b1_cat = b.concat(n + ".branch1", {b1a, b1b});
  std::string b2 = basic_conv(b, n + ".branch2_0", from, conv(384, 1));
  b2 = basic_conv(b, n + ".branch2_1", b2, conv_hw(448, 3, 1, 1, 0));
  b2 = basic_conv(b, n + ".branch2_2", b2, conv_hw(512, 1, 3, 0, 1));
  const std::string b2a = basic_conv(b, n + ".branch2_3a", b2, conv_hw(256, 1, 3, 0, 1));
  const std::string b2b = basic_conv(b, n + ".branch2_3b", b2, conv_hw(256, 3, 1, 1, 0));
  const std::string b2_cat = b.concat(n + ".branch2", {b2a, b2b});
  std::string b3 = b.avgpool(n + ".branch3.avgpool", from, pool(3, 1, 1));
  b3 = basic_conv(b, n + ".branch3.1", b3, conv(256, 1));
  return b.concat(n, {b0, b1_cat, b2_cat, b3});
}

// Inception-v4 for `task`: the paper's form (ImageNet 299×299), or with
// `cifar` the resolution-keeping stem and padded Reduction-B (32×32).
Model build_inception_v4_for(const std::string& name, const ImageTask& task, bool cifar, int64_t default_batch) {
  const std::string form = cifar ? "Inception-v4 (stride-1 'same' stem, as pytorch-cifar100); "
                                 : "Inception-v4 (Szegedy et al. 2017, timm/Cadene); ";
  ModelBuilder b(name, form + task_text(task), {3, task.side, task.side}, default_batch);
  std::string x = v4_stem(b, cifar);
  for (int i = 1; i <= 4; ++i) x = v4_block_a(b, "inception_a" + std::to_string(i), x);
  x = v4_reduction_a(b, "reduction_a", x);
  for (int i = 1; i <= 7; ++i) x = v4_block_b(b, "inception_b" + std::to_string(i), x);
  x = v4_reduction_b(b, "reduction_b", x, cifar ? 1 : 0);
  for (int i = 1; i <= 3; ++i) x = v4_block_c(b, "inception_c" + std::to_string(i), x);
  x = b.global_avgpool("avgpool", x);
  b.linear("last_linear", x, task.classes);
  return std::move(b).build();
}

// default_batch 128: seed 000 §4.1 sets batch 128 for all its models, Inception v4 included.
Model build_inception_v4() { return build_inception_v4_for("inception-v4", kImageNet299, false, 128); }

// default_batch 128: seed 000 §4.1, on CIFAR-10.
Model build_inception_v4_cifar10() { return build_inception_v4_for("inception-v4-cifar10", kCifar10, true, 128); }

// --- CIFAR-100 CNN -------------------------------------------------------------
// Seed 002 §4 trains "the simple AlexNet-style CIFAR100 architecture in [31]"
// (Liao et al. 2016): 3 convs and 2 fully connected layers. From [31]'s
// reference configuration (CIFAR100_baseline): 5×5 convs 3→32→32→64, stride 1,
// SAME padding, each followed by ReLU then a 3×3 stride-2 SAME pool (max, avg,
// avg: 32→16→8→4), then fc 1024→64 and fc 64→100 with no activation between.
// TensorFlow SAME pooling gives ceil(in/2), which ceil-mode pooling reproduces.
// Parameters: conv1 5·5·3·32+32 = 2,432; conv2 5·5·32·32+32 = 25,632;
// conv3 5·5·32·64+64 = 51,264; fc1 1024·64+64 = 65,600; fc2 64·100+100 = 6,500;
// total 151,428.
constexpr int64_t kCifar100CnnParams = 151'428;

Model build_cifar100_cnn() {
  // default_batch 100: [31]'s configuration (bat_size); seed 002's own figure is not legible.
  ModelBuilder b("cifar100-cnn", "Pipe-SGD's CIFAR100-CNN (Liao et al. 2016): 3 conv + 2 fc; 3x32x32, 100 classes",
                 {3, 32, 32}, 100);
  std::string x = conv_relu(b, "conv1", "relu1", kModelInput, conv(32, 5, 1, 2));
  x = b.maxpool("pool1", x, pool(3, 2, 0, true));
  x = conv_relu(b, "conv2", "relu2", x, conv(32, 5, 1, 2));
  x = b.avgpool("pool2", x, pool(3, 2, 0, true));
  x = conv_relu(b, "conv3", "relu3", x, conv(64, 5, 1, 2));
  x = b.avgpool("pool3", x, pool(3, 2, 0, true));
  x = b.linear("fc1", b.flatten("flatten", x), 64);
  b.linear("fc2", x, 100);
  return std::move(b).build();
}

// --- Fashion-MNIST CNN -----------------------------------------------------------
// A small CNN a CPU trains in seconds per epoch: conv 1→32 5×5 pad 2, ReLU,
// maxpool 2; conv 32→64 5×5 pad 2, ReLU, maxpool 2; fc 3136→128, ReLU, fc 128→10.
// Parameters: conv1 25·32+32 = 832; conv2 5·5·32·64+64 = 51,264;
// fc1 7·7·64·128+128 = 401,536; fc2 128·10+10 = 1,290; total 454,922.
constexpr int64_t kFmnistCnnParams = 454'922;

Model build_fmnist_cnn() {
  // default_batch 64: the common PyTorch MNIST-example batch; no seed trains this model.
  ModelBuilder b("fmnist-cnn", "Small CNN (2 conv + 2 fc) for Fashion-MNIST 1x28x28, 10 classes", {1, 28, 28}, 64);
  std::string x = conv_relu(b, "conv1", "relu1", kModelInput, conv(32, 5, 1, 2));
  x = b.maxpool("pool1", x, pool(2, 2));
  x = conv_relu(b, "conv2", "relu2", x, conv(64, 5, 1, 2));
  x = b.maxpool("pool2", x, pool(2, 2));
  x = b.relu("relu3", b.linear("fc1", b.flatten("flatten", x), 128));
  b.linear("fc2", x, 10);
  return std::move(b).build();
}

}  // namespace

std::vector<ZooEntry> classic_cnn_zoo_entries() {
  return {
      {"alexnet", "AlexNet, BVLC Caffe (grouped convs, LRN; seed 003), ImageNet 227x227", 60'965'224,
       "BVLC Caffe models/bvlc_alexnet (sum of its 8 layers' weights and biases)", &build_alexnet},
      {"vgg16", "VGG-16, configuration D, no BN, ImageNet 224x224", 138'357'544, "torchvision 0.15 vgg16",
       &build_vgg16},
      {"vgg16-cifar10", "VGG-16 on CIFAR-10 32x32 (seed 000): 13 convs, fc 512-4096-4096-10", kVgg16Cifar10Params,
       "derived: torchvision vgg16 with fc6 fed 512 features (32x32 after 5 pools) and 10 classes",
       &build_vgg16_cifar10},
      {"vgg19", "VGG-19, configuration E, no BN, ImageNet 224x224", 143'667'240, "torchvision 0.15 vgg19",
       &build_vgg19},
      {"vgg19-cifar100", "VGG-19 on CIFAR-100 32x32 (seed 001): 16 convs, fc 512-4096-4096-100", kVgg19Cifar100Params,
       "derived: torchvision vgg19 with fc6 fed 512 features (32x32 after 5 pools) and 100 classes",
       &build_vgg19_cifar100},
      {"googlenet", "GoogLeNet (Inception-v1), BN convs, no aux heads, ImageNet 224x224", 6'624'904,
       "torchvision 0.15 googlenet (IMAGENET1K_V1 num_params)", &build_googlenet},
      {"inception-v3", "Inception-v3 without aux head (seed 004: 24 M), ImageNet 299x299", 23'834'568,
       "torchvision 0.15 inception_v3: 27,161,264 less its AuxLogits head (3,326,696)", &build_inception_v3},
      {"inception-v4", "Inception-v4, ImageNet 299x299, 1000 classes", 42'679'816,
       "Cadene pretrainedmodels / timm inception_v4 with 1000 classes", &build_inception_v4},
      {"inception-v4-cifar10", "Inception-v4 on CIFAR-10 32x32 (seed 000), stride-1 'same' stem",
       kInceptionV4Cifar10Params,
       "derived: timm inception_v4 with 10 classes (pytorch-cifar100's stride-1 stem changes no kernel); "
       "pytorch-cifar100 prints 41.3M at 100 classes",
       &build_inception_v4_cifar10},
      {"cifar100-cnn", "Pipe-SGD's CIFAR100-CNN: 3 conv + 2 fc, CIFAR-100 32x32", kCifar100CnnParams,
       "hand count of Liao et al. 2016 CIFAR100_baseline (seed 002 ref. [31])", &build_cifar100_cnn},
      {"fmnist-cnn", "2 conv + 2 fc CNN, Fashion-MNIST 28x28, CPU-trainable", kFmnistCnnParams,
       "hand count of the architecture (this file)", &build_fmnist_cnn},
  };
}

}  // namespace trainsim
