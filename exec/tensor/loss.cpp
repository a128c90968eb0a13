// The training loss and the accuracy count: softmax cross-entropy over the
// classes of each row of the logits, averaged over the batch.
#include <algorithm>
#include <cmath>
#include <string>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

void check_labels(const Tensor& logits, std::span<const int32_t> labels, const char* where) {
  if (static_cast<int64_t>(labels.size()) != logits.rows()) {
    throw InputError(std::string(where) + ": labels", std::to_string(labels.size()) + " labels",
                     "one per row of the logits (" + std::to_string(logits.rows()) + ")");
  }
  const int64_t classes = logits.row_size();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw InputError(std::string(where) + ": labels[" + std::to_string(i) + "]",
                       "is " + std::to_string(labels[i]), "a class in [0, " + std::to_string(classes) + ")");
    }
  }
}

}  // namespace

// Per row: loss = log Σ_j exp(z_j - m) + m - z_label with m = max_j z_j (the
// shift keeps exp from overflowing); dL/dz_j = (softmax_j - [j = label]) / B
// because the loss is the batch mean.
double softmax_cross_entropy(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) {
  check_labels(logits, labels, "softmax_cross_entropy");
  const int64_t batch = logits.rows(), classes = logits.row_size();
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
  check_labels(logits, labels, "count_correct");
  const int64_t classes = logits.row_size();
  int64_t correct = 0;
  for (int64_t b = 0; b < logits.rows(); ++b) {
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
