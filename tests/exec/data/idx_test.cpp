// The IDX reader: dimensions and values of plain and gzip'ed files, and an
// InputError naming the file for each defect (bad magic, truncation, trailing
// bytes, missing file, label/image count mismatch, label out of range).
#include "exec/data/idx.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "tests/exec/data/idx_files.hpp"

namespace trainsim {
namespace {

using testing_data::idx_bytes;
using testing_data::TempDir;

// Expects read() to throw an InputError whose message names `path` and contains `fragment`.
template <typename Read>
void expect_input_error(Read read, const std::string& path, const std::string& fragment) {
  try {
    read();
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), path);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Two images of 2x3 pixels holding 0..11.
const std::vector<uint8_t> kTwelve{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

TEST(Idx, ReadsAPlainImagesFileWithItsDimensions) {
  TempDir dir("idx");
  const std::string path = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {2, 2, 3}, kTwelve));
  const IdxArray array = read_idx(path, kIdxImagesMagic);
  EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(array.values, kTwelve);
}

TEST(Idx, ReadsTheSameFileGzipped) {
  TempDir dir("idx");
  const std::string path = dir.write_gzip("images.gz", idx_bytes(kIdxImagesMagic, {2, 2, 3}, kTwelve));
  const IdxArray array = read_idx(path, kIdxImagesMagic);
  EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(array.values, kTwelve);
}

TEST(Idx, ReadsDimensionsAsBigEndian) {
  TempDir dir("idx");
  // 0x00000100 = 256 labels, as a little-endian reader would see 65,536.
  const std::string path =
      dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {256}, std::vector<uint8_t>(256, 7)));
  EXPECT_EQ(read_idx(path, kIdxLabelsMagic).dims, std::vector<int64_t>{256});
}

TEST(Idx, RejectsAWrongMagicNamingTheFileAndTheExpectedOne) {
  TempDir dir("idx");
  const std::string path = dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "0x00000801");
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "0x00000803");
}

TEST(Idx, RejectsValuesShorterThanTheHeaderAnnounces) {
  TempDir dir("idx");
  // 2·2·3 = 12 values announced, 11 present.
  const std::vector<uint8_t> eleven(kTwelve.begin(), kTwelve.end() - 1);
  const std::string path = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {2, 2, 3}, eleven));
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "truncated: 11 of 12 values");
}

TEST(Idx, RejectsAHeaderCutShort) {
  TempDir dir("idx");
  std::vector<uint8_t> bytes = idx_bytes(kIdxImagesMagic, {2, 2, 3}, {});
  bytes.resize(10);  // magic + two and a half dimensions
  const std::string path = dir.write_plain("images", bytes);
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "truncated inside its header");
}

TEST(Idx, RejectsAFileShorterThanItsMagic) {
  TempDir dir("idx");
  const std::string path = dir.write_plain("images", {0, 0});
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "truncated");
}

TEST(Idx, RejectsBytesAfterTheValues) {
  TempDir dir("idx");
  const std::string path = dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {2}, {1, 2, 3}));
  expect_input_error([&] { read_idx(path, kIdxLabelsMagic); }, path, "bytes after its 2 values");
}

TEST(Idx, RejectsACutGzipStream) {
  TempDir dir("idx");
  const std::string whole =
      dir.write_gzip("whole.gz", idx_bytes(kIdxImagesMagic, {10, 28, 28}, std::vector<uint8_t>(7840, 42)));
  std::ifstream in(whole, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  const std::string path = dir.write_plain("cut.gz", bytes);
  // zlib reports the stream ending early, or fewer values arrive: either way
  // an InputError on this file that says which.
  try {
    read_idx(path, kIdxImagesMagic);
    ADD_FAILURE() << "a cut gzip stream was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), path);
    const std::string what = e.what();
    EXPECT_TRUE(what.find("cannot be decompressed") != std::string::npos ||
                what.find("truncated") != std::string::npos)
        << what;
  }
}

// Found by fuzzing (tests/fuzz/corpus/idx/overflow-dims): two dimensions of
// 3,789,677,025 each, whose product overflows 64 bits.
TEST(Idx, RejectsDimensionsWhoseProductOverflows) {
  TempDir dir("idx");
  const std::string path = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {0xe1e1e1e1, 0xe1e1e1e1, 2}, {}));
  expect_input_error([&] { read_idx(path, kIdxImagesMagic); }, path, "announces more than 4294967296 values");
}

TEST(Idx, RejectsAMissingFile) {
  TempDir dir("idx");
  const std::string path = dir.file("absent");
  expect_input_error([&] { read_idx(path, kIdxLabelsMagic); }, path, "cannot be opened");
}

TEST(IdxImageSet, PairsImagesWithTheirLabels) {
  TempDir dir("idx");
  const std::string images = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {2, 2, 3}, kTwelve));
  const std::string labels = dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {2}, {9, 4}));
  const IdxImageSet set = read_idx_image_set(images, labels, 10);
  EXPECT_EQ(set.count, 2);
  EXPECT_EQ(set.rows, 2);
  EXPECT_EQ(set.cols, 3);
  EXPECT_EQ(set.pixels, kTwelve);
  EXPECT_EQ(set.labels, (std::vector<uint8_t>{9, 4}));
}

TEST(IdxImageSet, RejectsMoreLabelsThanImagesNamingBothFiles) {
  TempDir dir("idx");
  const std::string images = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {2, 2, 3}, kTwelve));
  const std::string labels = dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  expect_input_error([&] { read_idx_image_set(images, labels, 10); }, labels, "has 3 labels but " + images);
}

TEST(IdxImageSet, RejectsALabelOutsideTheClasses) {
  TempDir dir("idx");
  const std::string images = dir.write_plain("images", idx_bytes(kIdxImagesMagic, {2, 2, 3}, kTwelve));
  const std::string labels = dir.write_plain("labels", idx_bytes(kIdxLabelsMagic, {2}, {3, 10}));
  expect_input_error([&] { read_idx_image_set(images, labels, 10); }, labels, "label 10 at index 1");
}

}  // namespace
}  // namespace trainsim
