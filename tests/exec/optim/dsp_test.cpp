// DSP's forward and backward parameters (seed 001 eq. 5) on a chain of
// scalar linear layers y = w·x, against the formula computed by hand.
#include "tests/exec/optim/dsp_reference.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace trainsim {
namespace {

// y = w·x element-wise, one scalar parameter w: dL/dw = Σ x·dy, dL/dx = w·dy.
class ScaleLayer : public ExecLayer {
 public:
  std::vector<std::vector<int64_t>> param_shapes() const override { return {{1}}; }
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    cache.saved = {x};
    Tensor y = x;
    for (float& value : y.data) value *= params[0].data[0];
    return y;
  }
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    const Tensor& x = cache.saved.at(0);
    Tensor dx = dy;
    for (size_t i = 0; i < dy.data.size(); ++i) {
      grads[0].dense.data[0] += x.data[i] * dy.data[i];
      dx.data[i] = params[0].data[0] * dy.data[i];
    }
    return dx;
  }
};

Network scale_chain(int64_t layers) {
  Network network;
  network.model = "scale-chain";
  for (int64_t i = 0; i < layers; ++i) {
    network.layer_names.push_back("scale" + std::to_string(i));
    network.layers.push_back(std::make_unique<ScaleLayer>());
    network.output_shapes.push_back({1});
  }
  network.input_shape = {1};
  network.classes = 1;
  link_network(network);
  return network;
}

Weights scale_weights(std::vector<float> values) {
  Weights weights;
  for (float value : values) {
    Tensor w({1});
    w.data = {value};
    weights.push_back({w});
  }
  return weights;
}

Tensor scalar(float value) {
  Tensor t({1, 1});
  t.data = {value};
  return t;
}

// A zero dense gradient of one scalar parameter.
ParamGrad scalar_grad() {
  ParamGrad grad;
  grad.dense = Tensor({1});
  return grad;
}

TEST(Dsp, TwoBlockLinearChainMatchesEquationFive) {
  // K = 2 blocks, block 0 = layer 0, block 1 = layer 1; x = h_0 = 3, label l = 1,
  // loss ½(h_2 − l)². Forward parameters (version 0): w0 = 2, w1 = 0.5.
  // Backward parameters: w1 = 1.5 (block 1, version 1), w0 = 4 (block 0, version 2).
  // Forward:   h_1 = 2·3 = 6, h_2 = 0.5·6 = 3, G_h2 = h_2 − l = 2 (eq. 5, forward output).
  // Block 1:   G_w1 = h_1·G_h2 = 6·2 = 12,  G_h1 = w1_bwd·G_h2 = 1.5·2 = 3.
  // Block 0:   G_w0 = h_0·G_h1 = 3·3 = 9,   G_h0 = w0_bwd·G_h1 = 4·3 = 12.
  // (Weight stashing would give G_h1 = 0.5·2 = 1 and G_w0 = 3.)
  const Network network = scale_chain(2);
  DspStage block0(network, 0, 0);
  DspStage block1(network, 1, 1);
  const Weights forward_weights = scale_weights({2.0f, 0.5f});
  const Weights backward_weights = scale_weights({4.0f, 1.5f});
  const Tensor h1 = block0.forward(forward_weights, 0, /*batch=*/0, scalar(3.0f));
  const Tensor h2 = block1.forward(forward_weights, 0, 0, h1);
  ASSERT_EQ(h2.data[0], 3.0f);
  const Tensor g_h2 = scalar(h2.data[0] - 1.0f);
  Gradients grads = {{scalar_grad()}, {scalar_grad()}};
  const DspBackward back1 = block1.backward(backward_weights, 1, 0, g_h2, grads);
  EXPECT_EQ(grads[1][0].dense.data[0], 12.0f);
  EXPECT_EQ(back1.input_grad.data[0], 3.0f);
  EXPECT_EQ(back1.layer_wise_staleness, 1);
  const DspBackward back0 = block0.backward(backward_weights, 2, 0, back1.input_grad, grads);
  EXPECT_EQ(grads[0][0].dense.data[0], 9.0f);
  EXPECT_EQ(back0.input_grad.data[0], 12.0f);
  EXPECT_EQ(back0.layer_wise_staleness, 2);
  EXPECT_EQ(block0.inputs_held(), 0);
  EXPECT_EQ(block1.inputs_held(), 0);
}

TEST(Dsp, RecomputationRebuildsInnerActivationsOnBackwardParameters) {
  // One block of two layers [0, 1]; input h = 2, G_out = 1.
  // Forward parameters w0 = 1, w1 = 1; backward parameters w0 = 3, w1 = 5.
  // Recomputed inner activation a = w0_bwd·h = 6 (not the forward's 1·2 = 2):
  //   G_w1 = a·G_out = 6,  G_a = w1_bwd·G_out = 5,  G_w0 = h·G_a = 10,  G_h = w0_bwd·G_a = 15.
  const Network network = scale_chain(2);
  DspStage block(network, 0, 1);
  EXPECT_EQ(block.forward(scale_weights({1.0f, 1.0f}), 0, 7, scalar(2.0f)).data[0], 2.0f);
  EXPECT_EQ(block.inputs_held(), 1);
  Gradients grads = {{scalar_grad()}, {scalar_grad()}};
  const DspBackward back = block.backward(scale_weights({3.0f, 5.0f}), 4, 7, scalar(1.0f), grads);
  EXPECT_EQ(grads[1][0].dense.data[0], 6.0f);
  EXPECT_EQ(grads[0][0].dense.data[0], 10.0f);
  EXPECT_EQ(back.input_grad.data[0], 15.0f);
  EXPECT_EQ(back.layer_wise_staleness, 4);
}

TEST(Dsp, KeepsOneInputPerBatchInFlight) {
  // Batches 0, 1, 2 forwarded, then 0 backward: two inputs left, and batch 1's
  // backward uses its own input 20 (G_w = 20·1 with w = 1).
  const Network network = scale_chain(1);
  DspStage block(network, 0, 0);
  const Weights weights = scale_weights({1.0f});
  for (int64_t batch = 0; batch < 3; ++batch) block.forward(weights, batch, batch, scalar(10.0f * (batch + 1)));
  EXPECT_EQ(block.inputs_held(), 3);
  Gradients grads = {{scalar_grad()}};
  block.backward(weights, 3, 0, scalar(1.0f), grads);
  EXPECT_EQ(block.inputs_held(), 2);
  grads[0][0].dense.data[0] = 0.0f;
  const DspBackward back = block.backward(weights, 3, 1, scalar(1.0f), grads);
  EXPECT_EQ(grads[0][0].dense.data[0], 20.0f);
  EXPECT_EQ(back.layer_wise_staleness, 2);  // forward at version 1, backward at 3
}

}  // namespace
}  // namespace trainsim
