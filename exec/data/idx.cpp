// IDX reading through zlib's gz* calls, which read gzip and plain files alike.
// Data is read in chunks so a header announcing more than the file holds is
// reported as truncated instead of allocating what it claims.
#include "exec/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

// Largest value count accepted: well above any IDX data set (Fashion-MNIST's
// training images are 47 MB), well below what a corrupt header could claim.
constexpr int64_t kMaxIdxValues = int64_t{1} << 32;
constexpr int64_t kReadChunkBytes = int64_t{1} << 20;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

// Reads up to `count` bytes; fewer only at the end of the data. InputError
// naming `path` if zlib reports a damaged stream.
int64_t read_up_to(gzFile file, const std::string& path, uint8_t* out, int64_t count) {
  const int got = gzread(file, out, static_cast<unsigned>(count));
  if (got < 0) {
    int code = 0;
    throw InputError(path, std::string("cannot be decompressed: ") + gzerror(file, &code),
                     "a gzip'ed or plain IDX file");
  }
  return got;
}

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

std::string what_magic_means(uint32_t magic) {
  return hex32(magic) + (magic == kIdxImagesMagic   ? ", an IDX file of unsigned-byte images"
                         : magic == kIdxLabelsMagic ? ", an IDX file of unsigned-byte labels"
                                                    : ", an IDX file");
}

// Reads the header after the magic: one big-endian u32 size per dimension.
std::vector<int64_t> read_dims(gzFile file, const std::string& path, int dim_count) {
  std::vector<uint8_t> header(4 * static_cast<size_t>(dim_count));
  const int64_t got = read_up_to(file, path, header.data(), static_cast<int64_t>(header.size()));
  if (got < static_cast<int64_t>(header.size())) {
    throw InputError(path, "is truncated inside its header (" + std::to_string(4 + got) + " bytes)",
                     "4 + 4·" + std::to_string(dim_count) + " header bytes, then the values");
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < dim_count; ++d) dims.push_back(big_endian_u32(&header[4 * static_cast<size_t>(d)]));
  return dims;
}

}  // namespace

IdxArray read_idx(const std::string& path, uint32_t magic) {
  GzHandle file(gzopen(path.c_str(), "rb"));
  if (!file) throw InputError(path, "cannot be opened", "a readable IDX file");

  uint8_t magic_bytes[4];
  if (read_up_to(file.get(), path, magic_bytes, 4) < 4) {
    throw InputError(path, "is truncated: shorter than its 4-byte magic number", what_magic_means(magic));
  }
  const uint32_t found = big_endian_u32(magic_bytes);
  if (found != magic) throw InputError(path, "has magic number " + hex32(found), what_magic_means(magic));

  IdxArray array;
  array.dims = read_dims(file.get(), path, static_cast<int>(magic & 0xff));
  int64_t total = 1;
  for (int64_t d : array.dims) {
    if (d > 0 && total > kMaxIdxValues / d) {  // total·d > the limit, checked before it can overflow
      throw InputError(path, "announces more than " + std::to_string(kMaxIdxValues) + " values",
                       "an IDX file of a data set that fits in memory");
    }
    total *= d;
  }

  while (static_cast<int64_t>(array.values.size()) < total) {
    const int64_t have = static_cast<int64_t>(array.values.size());
    const int64_t want = std::min(kReadChunkBytes, total - have);
    array.values.resize(static_cast<size_t>(have + want));
    const int64_t got = read_up_to(file.get(), path, array.values.data() + have, want);
    if (got < want) {
      throw InputError(path, "is truncated: " + std::to_string(have + got) + " of " + std::to_string(total) +
                                 " values present",
                       "as many values as the header's dimensions announce");
    }
  }
  uint8_t extra = 0;
  if (read_up_to(file.get(), path, &extra, 1) > 0) {
    throw InputError(path, "has bytes after its " + std::to_string(total) + " values",
                     "exactly as many values as the header's dimensions announce");
  }
  return array;
}

IdxImageSet read_idx_image_set(const std::string& images_path, const std::string& labels_path, int64_t classes) {
  IdxArray images = read_idx(images_path, kIdxImagesMagic);
  IdxArray labels = read_idx(labels_path, kIdxLabelsMagic);
  if (images.dims[1] == 0 || images.dims[2] == 0) {
    throw InputError(images_path,
                     "has images of " + std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]) +
                         " pixels",
                     "images of at least 1x1 pixel");
  }
  if (labels.dims[0] != images.dims[0]) {
    throw InputError(labels_path,
                     "has " + std::to_string(labels.dims[0]) + " labels but " + images_path + " has " +
                         std::to_string(images.dims[0]) + " images",
                     "one label per image");
  }
  for (size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] >= classes) {
      throw InputError(labels_path, "label " + std::to_string(labels.values[i]) + " at index " + std::to_string(i),
                       "labels in [0, " + std::to_string(classes - 1) + "]");
    }
  }
  return IdxImageSet{images.dims[0], images.dims[1], images.dims[2], std::move(images.values),
                     std::move(labels.values)};
}

}  // namespace trainsim
