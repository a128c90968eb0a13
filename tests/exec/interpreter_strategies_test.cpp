// The interpreter runs the strategies with their own weight semantics:
// dualpipe's SpecTrain prediction (seed 000), DSP's recomputation on the
// backward parameters (seed 001 eq. 5), Pipe-SGD's hop-by-hop compression
// (seed 002 §3.2), Parallax's sparse parameter servers (seed 004). Each is checked against a hand-derived case or an
// independent emulation built from the tested exec/optim pieces.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <mutex>

#include "exec/interpreter.hpp"
#include "tests/exec/optim/dsp_reference.hpp"
#include "exec/optim/pipesgd.hpp"
#include "exec/transport/codec_all_reduce.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::kBatch;
using strategy_runs::kWeightSeed;
using strategy_runs::run;
using strategy_runs::run_text;
using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;
using strategy_runs::synthetic_batch;

double largest_gap(const Weights& a, const Weights& b, int64_t first, int64_t last) {
  double gap = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (size_t p = 0; p < a[static_cast<size_t>(l)].size(); ++p) {
      const auto& x = a[static_cast<size_t>(l)][p].data;
      const auto& y = b[static_cast<size_t>(l)][p].data;
      for (size_t i = 0; i < x.size(); ++i) gap = std::max(gap, static_cast<double>(std::fabs(x[i] - y[i])));
    }
  }
  return gap;
}

double largest_gap(const Weights& a, const Weights& b) {
  return largest_gap(a, b, 0, static_cast<int64_t>(a.size()) - 1);
}

// The op of `kind` on `worker` for `iteration`.
OpId find_op(const Plan& plan, OpKind kind, int32_t worker, int32_t iteration) {
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.kind == kind && op.worker == worker && op.iteration == iteration) return static_cast<OpId>(id);
  }
  ADD_FAILURE() << op_kind_name(kind) << " of iteration " << iteration << " on worker " << worker << " not found";
  return 0;
}

double mean_of(const std::vector<double>& v, size_t first, size_t count) {
  double sum = 0;
  for (size_t i = first; i < first + count; ++i) sum += v[i];
  return sum / static_cast<double>(count);
}

// --- SpecTrain (dualpipe, spectrain=true) ----------------------------------------

TEST(InterpreterSpecTrain, FirstIterationEqualsSingle) {
  const StrategyRun single = run({.strategy = "single"});
  const StrategyRun dualpipe = run({.strategy = "dualpipe", .settings = {{"spectrain", "true"}}});
  ASSERT_EQ(dualpipe.plan.workers.size(), 2u);
  // v starts at zero (seed 000 Algorithm 1 line 1), so mini-batch 0 meets the
  // initial weights on both stages whatever version it names.
  EXPECT_NEAR(dualpipe.result.loss_per_iteration[0], single.result.loss_per_iteration[0], 1e-5);
}

TEST(InterpreterSpecTrain, ForwardReadsWeightsPredictedFromTheSmoothedGradient) {
  const StrategyRun r = run({.strategy = "dualpipe", .settings = {{"spectrain", "true"}}, .record_weights = true});
  // Two stages. Stage 0 (worker 0) forwards mini-batch i in unit i and runs its
  // backward in unit i + 2, then applies it: after unit 2 it holds W_1, with
  // W_1 = W_0 − η·g_0 (plain SGD), so g_0 = (W_0 − W_1)/η. In unit 3 its
  // backward of mini-batch 1 reads version 1 (s = k = 0): W_1 itself. Its
  // forward of mini-batch 3 reads version 1 + 2 (s = 2N − k − 2 = 2) and must
  // get Ŵ = W_1 − 2·η·v_0 (eq. 4) with v_0 = γ·0 + (1 − γ)·g_0 (eq. 1), i.e.
  // Ŵ = W_1 − 2·(1 − γ)·(W_0 − W_1), γ = 0.9: W_1 − 0.2·(W_0 − W_1).
  const OpId backward1 = find_op(r.plan, OpKind::kBackward, 0, 1);
  const OpId forward3 = find_op(r.plan, OpKind::kForward, 0, 3);
  const Op& f = r.plan.ops[static_cast<size_t>(forward3)];
  ASSERT_EQ(r.plan.ops[static_cast<size_t>(backward1)].weight_version, 1);
  ASSERT_EQ(f.weight_version, 3);
  const Weights w0 = init_weights(build_network(build_zoo_model("fmnist-mlp")), kWeightSeed);
  const Weights& w1 = r.read.at(backward1);
  Weights expected = w1;
  for (int64_t l = f.first_layer; l <= f.last_layer; ++l) {
    for (size_t p = 0; p < expected[static_cast<size_t>(l)].size(); ++p) {
      auto& e = expected[static_cast<size_t>(l)][p].data;
      const auto& a = w0[static_cast<size_t>(l)][p].data;
      for (size_t i = 0; i < e.size(); ++i) e[i] = e[i] - 0.2f * (a[i] - e[i]);
    }
  }
  // Training moved stage 0: the prediction is not W_1 itself.
  EXPECT_GT(largest_gap(w0, w1, f.first_layer, f.last_layer), 1e-4);
  EXPECT_GT(largest_gap(r.read.at(forward3), w1, f.first_layer, f.last_layer), 1e-5);
  EXPECT_LT(largest_gap(r.read.at(forward3), expected, f.first_layer, f.last_layer), 1e-6);
}

TEST(InterpreterSpecTrain, TrainsWithFiniteDecreasingLoss) {
  const StrategyRun r = run({.strategy = "dualpipe", .settings = {{"spectrain", "true"}}, .iterations = 40});
  const std::vector<double>& loss = r.result.loss_per_iteration;
  ASSERT_EQ(loss.size(), 40u);
  for (double l : loss) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(mean_of(loss, 30, 10), 0.8 * mean_of(loss, 0, 10));
}

// --- DSP -------------------------------------------------------------------------

TEST(InterpreterDsp, FirstIterationEqualsSingle) {
  const StrategyRun single = run({.strategy = "single"});
  const StrategyRun dsp = run({.strategy = "dsp"});
  ASSERT_EQ(dsp.plan.workers.size(), 2u);
  EXPECT_NEAR(dsp.result.loss_per_iteration[0], single.result.loss_per_iteration[0], 1e-5);
}

// The block's layers and its staleness m (forwards before its first backward, less one).
struct Block {
  int32_t first = 0;
  int32_t last = 0;
  int32_t staleness = 0;
};

Block block_of(const Plan& plan, int32_t worker) {
  Block b;
  int32_t forwards = 0;
  for (OpId id : plan.streams[static_cast<size_t>(worker)][static_cast<int>(StreamKind::kCompute)]) {
    const Op& op = plan.ops[static_cast<size_t>(id)];
    if (op.kind == OpKind::kForward) {
      b.first = op.first_layer;
      b.last = op.last_layer;
      ++forwards;
    }
    if (op.kind == OpKind::kBackward) break;
  }
  b.staleness = forwards - 1;
  return b;
}

TEST(InterpreterDsp, BackwardUsesCachesRecomputedOnTheBackwardParameters) {
  constexpr int32_t kIterations = 6;
  const SgdOptions sgd{0.1, 0.9, 0.0};
  const StrategyRun r = run({.strategy = "dsp", .iterations = kIterations, .sgd = sgd});
  const Block b0 = block_of(r.plan, 0);
  const Block b1 = block_of(r.plan, 1);
  // The paper's default queues on 2 blocks: m = (2, 0); block 0 recomputes.
  ASSERT_EQ(b0.staleness, 2);
  ASSERT_EQ(b1.staleness, 0);
  // Block 0 ends past its first hidden layer's ReLU (flatten, linear, relu,
  // ...), whose cache depends on the weights: stale caches would show.
  ASSERT_GE(b0.last, 2) << "block 0 = layers " << b0.first << ".." << b0.last;
  int64_t recomputes = 0;
  for (const Op& op : r.plan.ops) recomputes += op.kind == OpKind::kRecompute && op.worker == 0;
  EXPECT_EQ(recomputes, kIterations);

  // Emulation with DspStage (tests/exec/optim/dsp_reference.hpp, eq. 5): in
  // step t block 0 forwards batch t on its current weights (version t − 2),
  // block 1 runs batch t's forward, loss and backward on its current weights
  // and updates, then block 0 runs batch t − 2's backward on its current
  // weights, version t − 2, recomputing from the kept input, and updates. Had the interpreter
  // used the forward's caches (computed on older weights), block 0's hidden
  // activations, hence its gradient, would differ.
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  Weights w = init_weights(network, kWeightSeed);
  Sgd opt0(sgd);
  Sgd opt1(sgd);
  DspStage block0(network, b0.first, b0.last);
  std::map<int32_t, Tensor> output_grads;  // G_h of block 0's output, per batch
  std::vector<double> losses;
  for (int32_t t = 0; t < kIterations + b0.staleness; ++t) {
    if (t < kIterations) {
      Tensor x;
      std::vector<int32_t> y;
      synthetic_batch(t, kBatch, x, y);
      const Tensor h = block0.forward(w, std::max(0, t - b0.staleness), t, x);
      std::vector<LayerCache> caches;
      const Tensor logits = forward_range(network, w, b1.first, b1.last, h, caches);
      Tensor dlogits;
      losses.push_back(softmax_cross_entropy(logits, y, &dlogits));
      Gradients g = zero_gradients(network, w);
      output_grads[t] = backward_range(network, w, b1.first, b1.last, dlogits, caches, g);
      opt1.step(w, g, b1.first, b1.last);
    }
    const int32_t back = t - b0.staleness;
    if (back >= 0) {
      Gradients g = zero_gradients(network, w);
      const DspBackward done = block0.backward(w, back, back, output_grads.at(back), g);
      EXPECT_EQ(done.layer_wise_staleness, std::min(back, b0.staleness));
      opt0.step(w, g, b0.first, b0.last);
    }
  }
  ASSERT_EQ(r.result.loss_per_iteration.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(r.result.loss_per_iteration[i], losses[i], 1e-5) << i;
  EXPECT_LT(largest_gap(r.result.weights, w), 1e-5);
}

// --- Pipe-SGD --------------------------------------------------------------------

// Runs the codec ring on two workers holding `a` and `b`.
std::vector<std::vector<float>> ring_on_two(std::vector<float> a, std::vector<float> b, const HopCodec& codec) {
  InProcessTransport transport(2, 10);
  std::vector<std::vector<float>> data{std::move(a), std::move(b)};
  run_workers(transport, 2, [&](int w) {
    const std::vector<int> group{0, 1};
    CollectivePeers peers(transport, w, group, -1);
    all_reduce_ring_codec(peers, data[static_cast<size_t>(w)], codec);
  });
  return data;
}

HopCodec codec_of(GradientCompression kind) {
  return {[kind](std::span<const float> v) { return pack_compressed(compress_gradient(v, kind)); },
          [kind](std::span<const float> m, std::span<float> out) {
            decompress_gradient(unpack_compressed(m, static_cast<int64_t>(out.size()), kind), out);
          }};
}

TEST(InterpreterPipeSgd, Trunc16ReducesHopByHopNotPerWorker) {
  // Two workers, two values, so the ring's chunk c holds value c and is summed
  // along ranks c, c+1. Worker 0 holds (1, 1 + 2^-7), worker 1 (1 + 2^-7, 1);
  // all four are exact in 16-bit truncation (7 mantissa bits).
  const float eps = 1.0f / 128.0f;
  const auto result = ring_on_two({1.0f, 1.0f + eps}, {1.0f + eps, 1.0f}, codec_of(GradientCompression::kTrunc16));
  // Per-worker round trip then a float sum: 1 + (1 + 2^-7) = 2 + 2^-7 exactly.
  // Per hop (reduce_step): trunc(trunc(1) + (1 + 2^-7)) = trunc(2 + 2^-7) = 2,
  // since near 2 the truncated spacing is 2^-6. Both values, both workers.
  for (const auto& d : result) {
    EXPECT_EQ(d[0], 2.0f);
    EXPECT_EQ(d[1], 2.0f);
  }
  // The same as exec/optim/pipesgd.hpp's chain, chunk by chunk.
  const std::vector<float> a{1.0f};
  const std::vector<float> b{1.0f + eps};
  const std::vector<std::span<const float>> chain{a, b};
  EXPECT_EQ(compressed_chain_sum(chain, GradientCompression::kTrunc16)[0], result[0][0]);
}

TEST(InterpreterPipeSgd, Quant8RingEqualsTheChainSumPerChunk) {
  // Five values over two ranks: chunk 0 = values 0..2 (rank 0 first), chunk 1
  // = values 3..4 (rank 1 first); every member ends with the chain's bits.
  const std::vector<float> a{0.3f, -1.2f, 2.5f, 0.01f, -0.7f};
  const std::vector<float> b{1.1f, 0.4f, -0.9f, 3.0f, 0.2f};
  const auto result = ring_on_two(a, b, codec_of(GradientCompression::kQuant8));
  const std::vector<std::span<const float>> chunk0{std::span(a).first(3), std::span(b).first(3)};
  const std::vector<std::span<const float>> chunk1{std::span(b).last(2), std::span(a).last(2)};
  const std::vector<float> s0 = compressed_chain_sum(chunk0, GradientCompression::kQuant8);
  const std::vector<float> s1 = compressed_chain_sum(chunk1, GradientCompression::kQuant8);
  for (const auto& d : result) {
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(d[i], s0[i]) << i;
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(d[3 + i], s1[i]) << i;
  }
}

TEST(InterpreterPipeSgd, UncompressedSynchronousEqualsDpRing) {
  // Width K = 1 applies each gradient in its own iteration: with no
  // compression Pipe-SGD is dp-ring.
  const StrategyRun ring = run({.strategy = "dp-ring", .sgd = {0.1, 0.9, 0.0}});
  const StrategyRun pipesgd = run({.strategy = "pipesgd",
                           .settings = {{"width", "1"}, {"compression", "none"}, {"segments", "1"}},
                           .sgd = {0.1, 0.9, 0.0}});
  for (size_t i = 0; i < ring.result.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(pipesgd.result.loss_per_iteration[i], ring.result.loss_per_iteration[i], 1e-6) << i;
  }
  EXPECT_LT(largest_gap(pipesgd.result.weights, ring.result.weights), 1e-6);
}

TEST(InterpreterPipeSgd, CompressedAllReduceMovesFewerBytesAndStillTrains) {
  const RunSpec base{.strategy = "pipesgd", .settings = {{"width", "2"}, {"compression", "none"}, {"segments", "1"}},
                     .iterations = 20};
  RunSpec trunc = base;
  trunc.settings[1].second = "trunc16";
  const StrategyRun none = run(base);
  const StrategyRun half = run(trunc);
  // Trunc16 sends 2 of every 4 bytes (a message of n values is ⌈n/2⌉ words).
  const int64_t none_bytes = none.result.traffic.sent_bytes(0);
  const int64_t half_bytes = half.result.traffic.sent_bytes(0);
  EXPECT_NEAR(static_cast<double>(half_bytes) / static_cast<double>(none_bytes), 0.5, 0.01);
  // The lossy sum changes training a little, not its course.
  EXPECT_NE(half.result.loss_per_iteration.back(), none.result.loss_per_iteration.back());
  for (double l : half.result.loss_per_iteration) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(mean_of(half.result.loss_per_iteration, 15, 5), mean_of(half.result.loss_per_iteration, 0, 5));
}

// --- Parallax --------------------------------------------------------------------

TEST(InterpreterParallax, TwoWorkersEqualSingleWithTwiceTheBatch) {
  const StrategyRun single = run_text("single", 2 * kBatch, 6);
  const StrategyRun parallax = run_text("parallax", kBatch, 6);
  ASSERT_EQ(parallax.plan.workers.size(), 2u);
  ASSERT_EQ(parallax.result.loss_per_iteration.size(), 6u);
  EXPECT_NE(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(parallax.result.loss_per_iteration[i], single.result.loss_per_iteration[i], 1e-4) << i;
  }
  EXPECT_LT(largest_gap(parallax.result.weights, single.result.weights), 1e-4);
}

TEST(InterpreterParallax, AllGatherModeEqualsSingleWithTwiceTheBatch) {
  // mode=ar (seed 004 §3.1): the dense variables by the AllReduce, the sparse
  // rows gathered around the ring; every worker applies every worker's rows.
  const StrategyRun single = run_text("single", 2 * kBatch, 6);
  const StrategyRun gathered = run_text("parallax", kBatch, 6, {{"mode", "ar"}});
  ASSERT_EQ(gathered.plan.workers.size(), 2u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(gathered.result.loss_per_iteration[i], single.result.loss_per_iteration[i], 1e-4) << i;
  }
  EXPECT_LT(largest_gap(gathered.result.weights, single.result.weights), 1e-4);
}

TEST(InterpreterParallax, AllGatherModeSendsRowsNotTheTable) {
  constexpr int32_t kIterations = 4;
  const StrategyRun r = run_text("parallax", kBatch, kIterations, {{"mode", "ar"}});
  const TrafficStats& t = r.result.traffic;
  ASSERT_EQ(t.pair_bytes.size(), 2u);  // no servers
  for (int w = 0; w < 2; ++w) {
    // The dense AllReduce's 17,680 bytes, then one block: a count, at most
    // 256 rows of 2 + 64 floats: at most 1 + 256·66 floats per iteration.
    const int64_t sent = t.pair_bytes[static_cast<size_t>(w)][static_cast<size_t>(1 - w)];
    EXPECT_GT(sent, kIterations * 17'680);
    EXPECT_LE(sent, kIterations * (17'680 + (1 + 256 * 66) * 4));
  }
}

TEST(InterpreterParallax, ParameterServerModeEqualsSingleWithTwiceTheBatch) {
  // mode=ps (seed 004's parameter-server baseline): the table's rows and every
  // dense variable go to servers, which step them on the workers' mean.
  const StrategyRun single = run_text("single", 2 * kBatch, 6);
  const StrategyRun served = run_text("parallax", kBatch, 6, {{"mode", "ps"}});
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(served.result.loss_per_iteration[i], single.result.loss_per_iteration[i], 1e-4) << i;
  }
  EXPECT_LT(largest_gap(served.result.weights, single.result.weights), 1e-4);
}

TEST(InterpreterParallax, ParameterServerModeOnADenseModelEqualsDataParallel) {
  // fmnist-mlp has no sparse layer: ps mode serves every variable.
  const StrategyRun ring = run({.strategy = "dp-ring", .sgd = {0.1, 0.9, 0.0}});
  const StrategyRun served = run({.strategy = "parallax", .settings = {{"mode", "ps"}}, .sgd = {0.1, 0.9, 0.0}});
  ASSERT_EQ(ring.result.loss_per_iteration.size(), served.result.loss_per_iteration.size());
  for (size_t i = 0; i < ring.result.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(served.result.loss_per_iteration[i], ring.result.loss_per_iteration[i], 1e-4) << i;
  }
  EXPECT_LT(largest_gap(served.result.weights, ring.result.weights), 1e-4);
}

}  // namespace
}  // namespace trainsim
