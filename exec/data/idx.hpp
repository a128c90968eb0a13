// Reader of IDX files (the MNIST family's format), gzip'ed or plain: a
// big-endian header (two zero bytes, a type byte, a dimension count, then one
// 32-bit size per dimension) followed by the values. Only unsigned bytes
// (type 0x08) are read: images 0x00000803 {count, rows, cols}, labels
// 0x00000801 {count}. Every defect is an InputError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// Magic numbers of the two IDX files a labelled image set consists of.
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // ubyte, 3 dimensions
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // ubyte, 1 dimension

struct IdxArray {
  std::vector<int64_t> dims;    // sizes from the header, e.g. {60000, 28, 28}
  std::vector<uint8_t> values;  // row-major, product(dims) bytes
};

// Reads `path` (gzip or plain; zlib tells them apart) whose magic must be
// `magic` (kIdxImagesMagic or kIdxLabelsMagic). InputError naming `path` if it
// cannot be opened, the magic differs, the data is shorter than the header
// announces (truncated) or longer (trailing bytes).
IdxArray read_idx(const std::string& path, uint32_t magic);

struct IdxImageSet {
  int64_t count = 0;            // images (= labels)
  int64_t rows = 0, cols = 0;   // pixels per image: rows x cols
  std::vector<uint8_t> pixels;  // count·rows·cols, image after image
  std::vector<uint8_t> labels;  // count values
};

// Reads an images file and its labels file; InputError naming both if their
// counts differ, or the labels file if a label is >= `classes`.
IdxImageSet read_idx_image_set(const std::string& images_path, const std::string& labels_path, int64_t classes);

}  // namespace trainsim
