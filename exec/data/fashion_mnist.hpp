// Fashion-MNIST (Xiao et al. 2017: 28x28 grey images of 10 kinds of clothing,
// 60,000 for training, 10,000 for test) from the IDX files that the Debian
// package dataset-fashion-mnist installs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/data/dataset.hpp"

namespace trainsim {

// Where the Debian package dataset-fashion-mnist puts its files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kFashionMnistClasses = 10;

// Mean and standard deviation of a set of pixels scaled to [0, 1].
struct PixelStats {
  double mean = 0;
  double std = 0;
};

// Statistics of `pixels` / 255 (population standard deviation).
PixelStats pixel_stats(const std::vector<uint8_t>& pixels);

// Loads train-{images,labels} and t10k-{images,labels} ("-idx3-ubyte" /
// "-idx1-ubyte", gzip'ed or not) from `dir`. Samples {1, 28, 28}; pixels are
// scaled to [0, 1], then standardised with the training set's own statistics
// computed here (Fashion-MNIST's: mean 0.2860, std 0.3530), for both parts.
// InputError naming the directory or file, and the Debian package to install,
// when something is missing; see idx.hpp for damaged files.
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDir);

}  // namespace trainsim
