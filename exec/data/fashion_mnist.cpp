// Fashion-MNIST loading: locate the four IDX files, read them, and turn bytes
// into standardised float32 samples.
#include "exec/data/fashion_mnist.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "exec/data/idx.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr const char* kInstallHint =
    "install the Debian package dataset-fashion-mnist, or name the folder holding the files with --data-dir";

// `dir`/`stem`.gz, else `dir`/`stem` uncompressed; InputError if neither.
std::string find_idx_file(const std::string& dir, const std::string& stem) {
  const std::filesystem::path base = std::filesystem::path(dir) / stem;
  for (const std::string& candidate : {base.string() + ".gz", base.string()}) {
    std::error_code error;
    if (std::filesystem::is_regular_file(candidate, error)) return candidate;
  }
  throw InputError(base.string() + ".gz", "is missing (nor is it there uncompressed)", kInstallHint);
}

IdxImageSet read_part(const std::string& dir, const std::string& prefix) {
  const std::string images = find_idx_file(dir, prefix + "-images-idx3-ubyte");  // looked for first
  const std::string labels = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  return read_idx_image_set(images, labels, kFashionMnistClasses);
}

// {count, 1, rows, cols} floats (pixel / 255 - mean) / std.
Tensor standardised(const IdxImageSet& part, const PixelStats& stats) {
  Tensor x;
  x.shape = {part.count, 1, part.rows, part.cols};
  x.data.resize(part.pixels.size());
  const double scale = 1.0 / (255.0 * stats.std);
  const double shift = stats.mean / stats.std;
  for (size_t i = 0; i < part.pixels.size(); ++i) {
    x.data[i] = static_cast<float>(part.pixels[i] * scale - shift);
  }
  return x;
}

std::vector<int32_t> widened(const std::vector<uint8_t>& labels) { return {labels.begin(), labels.end()}; }

}  // namespace

PixelStats pixel_stats(const std::vector<uint8_t>& pixels) {
  // Exact integer sums (at most 255² per pixel), so the result does not
  // depend on summation order.
  uint64_t sum = 0, sum_squares = 0;
  for (uint8_t p : pixels) {
    sum += p;
    sum_squares += uint64_t{p} * p;
  }
  const double n = static_cast<double>(pixels.size());
  if (n == 0) return {};
  const double mean = static_cast<double>(sum) / n;
  const double variance = static_cast<double>(sum_squares) / n - mean * mean;
  return PixelStats{mean / 255.0, std::sqrt(std::max(variance, 0.0)) / 255.0};
}

Dataset load_fashion_mnist(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    throw InputError(dir, "is not a directory holding Fashion-MNIST", kInstallHint);
  }
  const IdxImageSet train = read_part(dir, "train");
  const IdxImageSet test = read_part(dir, "t10k");
  if (test.rows != train.rows || test.cols != train.cols) {
    throw InputError(dir, "has test images of another size than its training images", "one image size");
  }
  PixelStats stats = pixel_stats(train.pixels);
  if (!(stats.std > 0)) {
    throw InputError(dir, "has training images without any pixel variation", "Fashion-MNIST's images");
  }

  Dataset data;
  data.name = "fashion-mnist";
  data.sample_shape = {1, train.rows, train.cols};
  data.classes = kFashionMnistClasses;
  data.train_x = standardised(train, stats);
  data.train_y = widened(train.labels);
  data.test_x = standardised(test, stats);
  data.test_y = widened(test.labels);
  return data;
}

}  // namespace trainsim
