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
// because the loss is the mean over the N positions.
double softmax_cross_entropy(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) {
  if (logits.shape.size() < 2) throw InputError("softmax_cross_entropy: logits", "have no class dimension", "{B, ..., classes}");
  check_labels(logits, labels, "softmax_cross_entropy");
  const int64_t batch = positions(logits), classes = logits.shape.back();
  if (dlogits != nullptr) *dlogits = Tensor(logits.shape);
  if (batch == 0) return 0.0;
  double total = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* z = logits.data.data() + b * classes;
    double max_z = z[0];
    for (int64_t j = 1; j < classes; ++j) max_z = std::max<double>(max_z, z[j]);
    double sum_exp = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum_exp += std::exp(z[j] - max_z);
    const int32_t label = labels[static_cast<size_t>(b)];
    total += std::log(sum_exp) + max_z - z[label];
    if (dlogits == nullptr) continue;
    float* dz = dlogits->data.data() + b * classes;
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(z[j] - max_z) / sum_exp;
      dz[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) / static_cast<double>(batch));
    }
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
