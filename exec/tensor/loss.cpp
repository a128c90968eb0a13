// The training loss and the accuracy count: softmax cross-entropy over the
// classes (the last dimension) of each position of the logits, one per
// sample {B, classes} or one per token {B, T, classes}, averaged over them.
#include <algorithm>
#include <cmath>
#include <string>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

// Positions of the logits: all but their last dimension.
int64_t positions(const Tensor& logits) {
  const int64_t classes = logits.shape.size() < 2 ? 0 : logits.shape.back();
  return classes > 0 ? logits.size() / classes : 0;
}

void check_labels(const Tensor& logits, std::span<const int32_t> labels, const char* where) {
  if (static_cast<int64_t>(labels.size()) != positions(logits)) {
    throw InputError(std::string(where) + ": labels", std::to_string(labels.size()) + " labels",
                     "one per position of the logits (" + std::to_string(positions(logits)) + ")");
  }
  const int64_t classes = logits.shape.back();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw InputError(std::string(where) + ": labels[" + std::to_string(i) + "]",
                       "is " + std::to_string(labels[i]), "a class in [0, " + std::to_string(classes) + ")");
    }
  }
}

}  // namespace

// Per position: loss = log Σ_j exp(z_j - m) + m - z_label with m = max_j z_j
// (the shift keeps exp from overflowing); dL/dz_j = (softmax_j - [j = label]) / N
// because the loss is the mean over the N positions. The exponentials are
// taken once, in float packets (as PyTorch's); the loss sums in double.
double softmax_cross_entropy(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) {
  if (logits.shape.size() < 2) throw InputError("softmax_cross_entropy: logits", "have no class dimension", "{B, ..., classes}");
  check_labels(logits, labels, "softmax_cross_entropy");
  const int64_t batch = positions(logits), classes = logits.shape.back();
  if (dlogits != nullptr) *dlogits = Tensor(logits.shape);
  if (batch == 0) return 0.0;
  double total = 0.0;
  Eigen::ArrayXf exps(classes);
  const double per_position = 1.0 / static_cast<double>(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const Eigen::Map<const Eigen::ArrayXf> z(logits.data.data() + b * classes, classes);
    const float max_z = z.maxCoeff();
    exps = (z - max_z).exp();
    const double sum_exp = exps.cast<double>().sum();
    const int32_t label = labels[static_cast<size_t>(b)];
    total += std::log(sum_exp) + max_z - z[label];
    if (dlogits == nullptr) continue;
    Eigen::Map<Eigen::ArrayXf> dz(dlogits->data.data() + b * classes, classes);
    dz = exps * static_cast<float>(per_position / sum_exp);
    dz[label] -= static_cast<float>(per_position);
  }
  return total / static_cast<double>(batch);
}

// Ties go to the first maximum, as torch.argmax does.
int64_t count_correct(const Tensor& logits, std::span<const int32_t> labels) {
  if (logits.shape.size() < 2) throw InputError("count_correct: logits", "have no class dimension", "{B, ..., classes}");
  check_labels(logits, labels, "count_correct");
  const int64_t classes = logits.shape.back();
  int64_t correct = 0;
  for (int64_t b = 0; b < positions(logits); ++b) {
    const float* z = logits.data.data() + b * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j) {
      if (z[j] > z[best]) best = j;
    }
    if (best == labels[static_cast<size_t>(b)]) ++correct;
  }
  return correct;
}

}  // namespace trainsim
