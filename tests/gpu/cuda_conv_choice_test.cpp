// cuDNN's convolution algorithms chosen once per shape, GPU and precision in
// a process (exec/cuda/cuda_layer_ops.cpp): a later network of that shape
// takes the first one's choice (in validate, the profile's) and searches
// nothing. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/layers.hpp"
#include "model/zoo/zoo.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

TEST(CudaConvolutions, ANetworkOfAShapeSearchedBeforeTakesItsAlgorithms) {
  SKIP_WITHOUT_GPU();
  const Model model = build_zoo_model("fmnist-cnn");
  const Weights weights = init_weights(build_network(model), 3);
  int64_t convolutions = 0;
  for (const Layer& layer : model.layers) convolutions += layer.op == "conv2d";
  ASSERT_EQ(convolutions, 2);
  static int64_t repeat = 0;  // a batch no other test, nor an earlier repeat (--gtest_repeat), made networks of
  const int64_t batch = 37 + repeat++;
  Tensor x({batch, 1, 28, 28});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>((13 * i) % 17) / 17.0f - 0.5f;
  const std::vector<int32_t> labels(batch, 3);

  const int64_t before = cuda_convolution_searches();
  CudaNetwork first(model, weights, batch, 0);
  EXPECT_EQ(cuda_convolution_searches() - before, convolutions);
  CudaNetwork second(model, weights, batch, 0);
  EXPECT_EQ(cuda_convolution_searches() - before, convolutions);  // the first's algorithms
  first.set_batch(x, labels);
  second.set_batch(x, labels);
  EXPECT_EQ(first.forward_and_loss(), second.forward_and_loss());
  CudaNetwork exact(model, weights, batch, 0, {CudaPrecision::exact, false});  // another precision: its own search
  EXPECT_EQ(cuda_convolution_searches() - before, 2 * convolutions);
}

}  // namespace
}  // namespace trainsim
