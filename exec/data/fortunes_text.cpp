// Debian's fortune files as a byte-level language-model data set; see
// fortunes_text.hpp.
#include "exec/data/fortunes_text.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "model/error.hpp"
#include "model/text_file.hpp"

namespace trainsim {
namespace {

constexpr int64_t kMinWindows = 40;
constexpr double kTextTestFraction = 0.05;

// The fortune files of `dir` in name order: regular files without an extension.
std::vector<std::filesystem::path> fortune_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error) && !it->is_symlink(error) && it->path().extension().empty()) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The text without its `%` separator lines.
void append_without_separators(const std::string& text, std::string& out) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string_view line(text.data() + start, end - start);
    if (line != "%\n" && line != "%") out.append(line);
    start = end;
  }
}

}  // namespace

Dataset load_fortunes(const std::string& dir, int64_t context) {
  if (context < 1) throw InputError("fortunes context", std::to_string(context), "at least 1 byte");
  const std::vector<std::filesystem::path> files = fortune_files(dir);
  if (files.empty()) {
    throw InputError(dir, "holds no fortune files",
                     "Debian's fortunes (apt-get install fortunes fortunes-min; make installs them)");
  }
  std::string bytes;
  for (const auto& file : files)
    append_without_separators(read_text_file(file.string(), "a fortune file", kMaxFortuneFileBytes), bytes);
  const auto windows = (static_cast<int64_t>(bytes.size()) - 1) / context;
  if (windows < kMinWindows) {
    throw InputError(dir, "holds " + std::to_string(bytes.size()) + " bytes of fortunes",
                     "at least " + std::to_string(kMinWindows * context + 1) + " for windows of " +
                         std::to_string(context));
  }
  const auto test = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(windows) * kTextTestFraction));
  const int64_t train = windows - test;
  Dataset d;
  d.name = "fortunes";
  d.sample_shape = {context};
  d.classes = kByteVocabulary;
  d.labels_per_sample = context;
  d.train_x = Tensor({train, context});
  d.test_x = Tensor({test, context});
  d.train_y.resize(static_cast<size_t>(train * context));
  d.test_y.resize(static_cast<size_t>(test * context));
  for (int64_t w = 0; w < windows; ++w) {
    Tensor& x = w < train ? d.train_x : d.test_x;
    std::vector<int32_t>& y = w < train ? d.train_y : d.test_y;
    const int64_t row = w < train ? w : w - train;
    for (int64_t t = 0; t < context; ++t) {
      const auto at = static_cast<size_t>(w * context + t);
      x.data[static_cast<size_t>(row * context + t)] = static_cast<float>(static_cast<unsigned char>(bytes[at]));
      y[static_cast<size_t>(row * context + t)] = static_cast<unsigned char>(bytes[at + 1]);
    }
  }
  return d;
}

}  // namespace trainsim
