// Fortunes of four topics as a bag-of-words classification set; see
// fortune_topics.hpp.
#include "exec/data/fortune_topics.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "exec/data/random_bits.hpp"
#include "model/error.hpp"
#include "model/text_file.hpp"

namespace trainsim {
namespace {

constexpr double kTopicsTestFraction = 0.10;
constexpr uint64_t kSplitSeed = 20261126;

bool word_byte(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 && static_cast<unsigned char>(c) < 128; }

// The fortunes of one file: the text between `%` lines, empty ones dropped.
std::vector<std::string_view> split_fortunes(std::string_view text) {
  std::vector<std::string_view> fortunes;
  size_t start = 0, line = 0;
  while (line <= text.size()) {
    size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view content = text.substr(line, end - line);
    const bool separator = content == "%";
    if (separator || end == text.size()) {
      const std::string_view fortune = text.substr(start, (separator ? line : end) - start);
      if (fortune.find_first_not_of(" \t\r\n") != std::string_view::npos) fortunes.push_back(fortune);
      start = end + 1;
    }
    line = end + 1;
  }
  return fortunes;
}

// The first `tokens` word ids of `fortune`, repeated from its first word
// when it is shorter (so every bag sums `tokens` real words, none dominated
// by a padding row); 0s only for a fortune without a word.
void bag_of_words(std::string_view fortune, int64_t vocabulary, int64_t tokens, float* out) {
  int64_t n = 0;
  std::string word;
  const auto flush = [&] {
    while (!word.empty() && word.back() == '\'') word.pop_back();
    if (!word.empty() && n < tokens) out[n++] = static_cast<float>(hashed_word_id(word, vocabulary));
    word.clear();
  };
  for (char c : fortune) {
    if (word_byte(c)) {
      word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (c == '\'' && !word.empty()) {
      word.push_back(c);
    } else {
      flush();
    }
  }
  flush();
  if (n == 0) {
    std::fill(out, out + tokens, 0.0f);
    return;
  }
  for (int64_t i = n; i < tokens; ++i) out[i] = out[i - n];
}

}  // namespace

int64_t hashed_word_id(std::string_view word, int64_t vocabulary) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : word) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return 1 + static_cast<int64_t>(h % static_cast<uint64_t>(vocabulary - 1));
}

Dataset load_fortune_topics(const std::string& dir, int64_t vocabulary, int64_t tokens) {
  if (vocabulary < 2 || vocabulary > (int64_t{1} << 24)) {
    throw InputError("fortune topics vocabulary", std::to_string(vocabulary), "2 to 2^24 ids (exact as floats)");
  }
  if (tokens < 1) throw InputError("fortune topics tokens", std::to_string(tokens), "at least 1 word per sample");
  std::vector<std::string> texts;  // kept while the fortunes (views into them) are read
  std::vector<std::pair<std::string_view, int32_t>> fortunes;
  for (size_t topic = 0; topic < kFortuneTopics.size(); ++topic) {
    const std::string path = (std::filesystem::path(dir) / kFortuneTopics[topic]).string();
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) {
      throw InputError(path, "is not there",
                       "Debian's fortunes, whose topic files text-bag classifies (apt-get install fortunes; make "
                       "installs it)");
    }
    texts.push_back(read_text_file(path, "a fortune file", kMaxFortuneFileBytes));
  }
  for (size_t topic = 0; topic < texts.size(); ++topic) {
    for (std::string_view f : split_fortunes(texts[topic])) fortunes.emplace_back(f, static_cast<int32_t>(topic));
  }
  // Fisher-Yates from raw engine bits, the same on every standard library.
  std::mt19937_64 rng(kSplitSeed);
  for (size_t i = fortunes.size(); i > 1; --i) std::swap(fortunes[i - 1], fortunes[uniform_below(rng, i)]);
  const auto total = static_cast<int64_t>(fortunes.size());
  const auto test = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(total) * kTopicsTestFraction));
  const int64_t train = total - test;
  if (train < 1) throw InputError(dir, "holds " + std::to_string(total) + " fortunes of the topics", "at least 2");
  Dataset d;
  d.name = "fortune-topics";
  d.sample_shape = {tokens};
  d.classes = static_cast<int64_t>(kFortuneTopics.size());
  d.train_x = Tensor({train, tokens});
  d.test_x = Tensor({test, tokens});
  for (int64_t i = 0; i < total; ++i) {
    const bool training = i < train;
    const int64_t row = training ? i : i - train;
    Tensor& x = training ? d.train_x : d.test_x;
    bag_of_words(fortunes[i].first, vocabulary, tokens, x.data.data() + row * tokens);
    (training ? d.train_y : d.test_y).push_back(fortunes[i].second);
  }
  return d;
}

}  // namespace trainsim
