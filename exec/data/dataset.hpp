// A labelled classification data set held in memory, as the CPU backend
// trains on it: float32 samples (first dimension = sample) and int32 labels,
// split into a training and a test part. Loaders: fashion_mnist.hpp (the
// Debian package's IDX files), synthetic_text.hpp (sparse token ids).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/tensor/tensor.hpp"

namespace trainsim {

struct Dataset {
  std::string name;                   // "fashion-mnist", "synthetic-text"
  std::vector<int64_t> sample_shape;  // per sample, e.g. {1, 28, 28} or {32} token ids
  int64_t classes = 0;                // labels lie in [0, classes)
  Tensor train_x;                     // {train samples, sample_shape...}
  std::vector<int32_t> train_y;       // labels_per_sample labels per train_x row
  int64_t labels_per_sample = 1;      // 1 for a class; a sequence's length for next-token labels
  Tensor test_x;                      // {test samples, sample_shape...}
  std::vector<int32_t> test_y;        // labels_per_sample labels per test_x row
};

}  // namespace trainsim
