// read_text_file: a bounded read of a whole file; see text_file.hpp.
#include "model/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr std::streamsize kChunkBytes = std::streamsize{1} << 16;

std::string size_text(int64_t bytes) {
  return bytes % (int64_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& kind, int64_t max_bytes) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw InputError(path, "is a directory", kind);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, std::string("cannot be opened: ") + std::strerror(errno), "a readable file, " + kind);
  // Read in chunks up to the limit: the size a device or a pipe reports says
  // nothing about how much it holds.
  std::string text;
  std::vector<char> chunk(static_cast<size_t>(kChunkBytes));
  do {
    in.read(chunk.data(), kChunkBytes);
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      throw InputError(path, "is larger than " + size_text(max_bytes), kind + " of at most " + size_text(max_bytes));
    }
  } while (in);
  if (in.bad()) throw InputError(path, "cannot be read", "a readable file, " + kind);
  return text;
}

}  // namespace trainsim
