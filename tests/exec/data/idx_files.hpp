// Writing small IDX files for the data tests: a header and values, plain or
// gzip'ed, into a temporary directory removed at the end of the test.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim::testing_data {

// IDX bytes: `magic` then each dimension, big-endian, then `values`.
inline std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& values) {
  std::vector<uint8_t> bytes;
  auto put = [&bytes](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() / ("trainsim_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

  std::string write_plain(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + file(name));
    return file(name);
  }

  std::string write_gzip(const std::string& name, const std::vector<uint8_t>& bytes) const {
    gzFile out = gzopen(file(name).c_str(), "wb");
    if (out == nullptr) throw std::runtime_error("cannot write " + file(name));
    const int written = gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(out);
    if (written != static_cast<int>(bytes.size())) throw std::runtime_error("cannot write " + file(name));
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace trainsim::testing_data
