// The GPU device's embedding bag (text-bag's sparse 50,000 x 64 table)
// against exec's CPU kernel, the reference: alone and in text-bag over two
// and five momentum-SGD steps (the table's gradient compared as the dense
// table its rows add up to; the step moving only the rows a batch touched,
// as Sgd's lazy step); in a range pass, as the interpreter runs it, the
// same sparse rows as the CPU's in the same order, a second backward's
// appended; ids outside the table refused, padding passed. Labelled gpu;
// skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"
#include "tests/gpu/conformance.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

// Seven ids over six rows: rows repeat within and across samples (their
// gradients add, one step each), and every fifth id is padding.
Model small_bag() {
  ModelBuilder b("small-bag", "test", {7}, 8);
  b.linear("fc", b.embedding_bag("bag", kModelInput, 6, 5), 3);
  return std::move(b).build();
}

TEST(CudaEmbeddingBag, ConformsToItsCpuKernelWithRepeatedRowsAndPadding) {
  SKIP_WITHOUT_GPU();
  expect_layer_conforms(make_case(small_bag(), 4));
  expect_layer_conforms(make_case(layer_alone(build_zoo_model("text-bag"), 0), 8));
}

// Five steps of the whole model: its first gradients and its losses within
// 1e-4, its weights within 1e-2 (a ReLU output within rounding of 0).
TEST(CudaEmbeddingBag, TextBagTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  expect_network_trains_alike(make_case(build_zoo_model("text-bag"), 8), CudaPrecision::exact,
                              {kExactTolerance, 1e-2, kExactTolerance});
}

TEST(CudaEmbeddingBag, ARangePassGivesTheCpusSparseRowsInOrder) {
  SKIP_WITHOUT_GPU();
  const Model model = small_bag();
  const Network net = build_network(model);
  const Weights w = init_weights(net, 7);
  const Case c = make_case(model, 4);
  const auto last = static_cast<int64_t>(net.layers.size()) - 1;
  CudaNetworkOptions options;
  options.precision = CudaPrecision::exact;
  options.input_gradient = true;
  options.model_input_gradient = false;  // as a worker's networks
  CudaNetwork gpu(model, w, c.batch, 0, options);
  gpu.load_weights(w, 0, last);

  std::vector<LayerCache> caches;
  Tensor dy;
  const double loss = softmax_cross_entropy(forward_range(net, w, 0, last, c.x, caches), c.labels, &dy);
  Gradients cpu = zero_gradients(net, w);
  backward_range(net, w, 0, last, dy, caches, cpu);
  Gradients once = zero_gradients(net, w);
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE("pass " + std::to_string(pass));
    EXPECT_NEAR(gpu.forward_range_loss(net, 0, last, &c.x, c.labels, 1.0f).read(), loss,
                kExactTolerance * std::abs(loss));
    gpu.backward_range(net, 0, last, nullptr, once);
    ASSERT_TRUE(once[0][0].sparse);
    const size_t rows = cpu[0][0].rows.size();
    ASSERT_EQ(once[0][0].rows.size(), (pass + 1) * rows);
    // The second pass's rows come after the first's, each pass's the CPU's.
    const std::vector<int64_t> last_pass(once[0][0].rows.end() - static_cast<std::ptrdiff_t>(rows),
                                         once[0][0].rows.end());
    EXPECT_EQ(last_pass, cpu[0][0].rows);
    EXPECT_EQ(once[0][0].row_values.shape, (std::vector<int64_t>{static_cast<int64_t>((pass + 1) * rows), 5}));
  }
  Tensor first_pass({static_cast<int64_t>(cpu[0][0].rows.size()), 5});
  std::copy_n(once[0][0].row_values.data.begin(), first_pass.data.size(), first_pass.data.begin());
  EXPECT_LE(relative_error(first_pass, cpu[0][0].row_values), kExactTolerance);
  Tensor twice = cpu[1][0].dense;
  for (float& v : twice.data) v *= 2;
  EXPECT_LE(relative_error(once[1][0].dense, twice), kExactTolerance);  // fc's dense gradient summed over both
}

// Ids are checked where the batch arrives: padding (below 0) passes, an
// id beyond the table or between integers does not.
TEST(CudaEmbeddingBag, AnIdOutsideTheTableIsRefusedAndPaddingPasses) {
  SKIP_WITHOUT_GPU();
  Case c = make_case(small_bag(), 2);
  CudaNetwork gpu(c.model, init_weights(build_network(c.model), 7), c.batch, 0);
  for (const float padding : {-1.0f, -0.5f, -7.0f}) {
    c.x.data[3] = padding;
    EXPECT_NO_THROW(gpu.set_batch(c.x, c.labels)) << padding;
  }
  for (const float bad : {6.0f, 2.5f}) {
    c.x.data[3] = bad;
    EXPECT_THROW(gpu.set_batch(c.x, c.labels), InputError) << bad;
  }
}

}  // namespace
}  // namespace trainsim
