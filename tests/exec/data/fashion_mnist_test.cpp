// Fashion-MNIST loading: on small IDX files written here (standardisation by
// hand, missing files naming the Debian package) and on the real files of
// dataset-fashion-mnist (sizes, class balance, the known pixel statistics).
#include "exec/data/fashion_mnist.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "exec/data/idx.hpp"
#include "model/error.hpp"
#include "tests/exec/data/idx_files.hpp"

namespace trainsim {
namespace {

using testing_data::idx_bytes;
using testing_data::TempDir;

std::string message_of_load(const std::string& dir) {
  try {
    load_fashion_mnist(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PixelStats, MatchesAHandComputedCase) {
  // Pixels 0, 255, 255, 255 scale to 0, 1, 1, 1: mean 3/4; variance
  // E[x²] - mean² = 3/4 - 9/16 = 3/16, std √3/4 = 0.4330127.
  const PixelStats stats = pixel_stats({0, 255, 255, 255});
  EXPECT_DOUBLE_EQ(stats.mean, 0.75);
  EXPECT_NEAR(stats.std, std::sqrt(3.0) / 4.0, 1e-12);
}

TEST(FashionMnist, AMissingDirectoryNamesTheDebianPackage) {
  const std::string message = message_of_load("/nonexistent/fashion-mnist");
  EXPECT_NE(message.find("/nonexistent/fashion-mnist"), std::string::npos) << message;
  EXPECT_NE(message.find("install the Debian package dataset-fashion-mnist"), std::string::npos) << message;
}

TEST(FashionMnist, AMissingFileIsNamedWithTheDebianPackage) {
  TempDir dir("fmnist_missing");
  dir.write_gzip("train-images-idx3-ubyte.gz", idx_bytes(kIdxImagesMagic, {1, 1, 2}, {0, 255}));
  const std::string message = message_of_load(dir.path());
  EXPECT_NE(message.find("train-labels-idx1-ubyte.gz: is missing"), std::string::npos) << message;
  EXPECT_NE(message.find("dataset-fashion-mnist"), std::string::npos) << message;
}

// Train: two 1x2 images {0, 255} → scaled {0, 1}, mean 0.5, std 0.5, so they
// become {-1, 1}. Test (plain files this time): {51, 255} → {0.2, 1} →
// {(0.2 - 0.5)/0.5, (1 - 0.5)/0.5} = {-0.6, 1}: standardised with the
// training set's statistics, not its own.
TEST(FashionMnist, StandardisesBothPartsWithTheTrainingStatistics) {
  TempDir dir("fmnist_small");
  dir.write_gzip("train-images-idx3-ubyte.gz", idx_bytes(kIdxImagesMagic, {2, 1, 2}, {0, 255, 0, 255}));
  dir.write_gzip("train-labels-idx1-ubyte.gz", idx_bytes(kIdxLabelsMagic, {2}, {3, 8}));
  dir.write_plain("t10k-images-idx3-ubyte", idx_bytes(kIdxImagesMagic, {1, 1, 2}, {51, 255}));
  dir.write_plain("t10k-labels-idx1-ubyte", idx_bytes(kIdxLabelsMagic, {1}, {5}));

  const Dataset data = load_fashion_mnist(dir.path());
  EXPECT_EQ(data.name, "fashion-mnist");
  EXPECT_EQ(data.classes, 10);
  EXPECT_EQ(data.sample_shape, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(data.train_x.shape, (std::vector<int64_t>{2, 1, 1, 2}));
  EXPECT_EQ(data.test_x.shape, (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_EQ(data.train_x.data, (std::vector<float>{-1, 1, -1, 1}));
  ASSERT_EQ(data.test_x.data.size(), 2u);
  EXPECT_NEAR(data.test_x.data[0], -0.6f, 1e-6);
  EXPECT_NEAR(data.test_x.data[1], 1.0f, 1e-6);
  EXPECT_EQ(data.train_y, (std::vector<int32_t>{3, 8}));
  EXPECT_EQ(data.test_y, (std::vector<int32_t>{5}));
}

// ---------------------------------------------------------------- the real files

class FashionMnistFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::is_directory(kFashionMnistDir)) data_ = std::make_unique<Dataset>(load_fashion_mnist());
  }
  static void TearDownTestSuite() { data_.reset(); }
  void SetUp() override {
    if (!data_) GTEST_SKIP() << "no " << kFashionMnistDir << ": install the Debian package dataset-fashion-mnist";
  }
  static std::unique_ptr<Dataset> data_;
};

std::unique_ptr<Dataset> FashionMnistFiles::data_;

TEST_F(FashionMnistFiles, Has60000TrainingAnd10000TestImagesOf1x28x28) {
  EXPECT_EQ(data_->sample_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(data_->train_x.shape, (std::vector<int64_t>{60'000, 1, 28, 28}));
  EXPECT_EQ(data_->test_x.shape, (std::vector<int64_t>{10'000, 1, 28, 28}));
  EXPECT_EQ(data_->train_x.data.size(), 60'000u * 784u);
  EXPECT_EQ(data_->train_y.size(), 60'000u);
  EXPECT_EQ(data_->test_y.size(), 10'000u);
}

// Xiao et al. 2017 (the data set's README): 6,000 training and 1,000 test
// images per class.
TEST_F(FashionMnistFiles, HoldsEveryClassEquallyOften) {
  std::vector<int> train_counts(10, 0), test_counts(10, 0);
  for (int32_t label : data_->train_y) {
    ASSERT_TRUE(label >= 0 && label < 10) << label;
    ++train_counts[static_cast<size_t>(label)];
  }
  for (int32_t label : data_->test_y) {
    ASSERT_TRUE(label >= 0 && label < 10) << label;
    ++test_counts[static_cast<size_t>(label)];
  }
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
}

// The widely used Fashion-MNIST normalisation constants (torchvision
// examples): mean 0.2860, std 0.3530 of the training pixels scaled to [0, 1].
TEST_F(FashionMnistFiles, RawTrainingPixelsHaveTheKnownMeanAndStd) {
  const IdxArray images =
      read_idx((std::filesystem::path(kFashionMnistDir) / "train-images-idx3-ubyte.gz").string(), kIdxImagesMagic);
  const PixelStats stats = pixel_stats(images.values);
  EXPECT_NEAR(stats.mean, 0.2860, 1e-4);
  EXPECT_NEAR(stats.std, 0.3530, 1e-4);
}

// Standardised with its own statistics, the training set has mean 0 and
// standard deviation 1 (up to float32 rounding of 47M values).
TEST_F(FashionMnistFiles, TrainingSamplesAreStandardised) {
  double sum = 0, sum_squares = 0;
  for (float v : data_->train_x.data) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(data_->train_x.data.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-5);
  EXPECT_NEAR(std::sqrt(sum_squares / n - (sum / n) * (sum / n)), 1.0, 1e-5);
}

}  // namespace
}  // namespace trainsim
