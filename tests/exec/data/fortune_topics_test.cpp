// Fortunes of four topics as bags of hashed words: splitting at the `%`
// lines, words lower-cased and hashed, short fortunes repeated to fill the
// bag, labels by topic file, a fixed shuffle and a 10% test set; a missing
// topic file names itself and the package. Then Debian's own files, where
// they are installed.
#include "exec/data/fortune_topics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "exec/data/fortunes_text.hpp"
#include "exec/data/synthetic_text.hpp"
#include "model/error.hpp"
#include "tests/exec/data/idx_files.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

using testing_data::TempDir;

void write(const TempDir& dir, const std::string& name, const std::string& text) { std::ofstream(dir.file(name)) << text; }

// Topic t's file: `count` fortunes "Word<t> <t>b'c, x!" and, for t = 0, an
// empty fortune between two separators (dropped) and no separator at the end.
void write_topics(const TempDir& dir, int count) {
  for (size_t t = 0; t < kFortuneTopics.size(); ++t) {
    std::string text;
    for (int i = 0; i < count; ++i) text += "Word" + std::to_string(t) + " " + std::to_string(t) + "b'c, x!\n%\n";
    if (t == 0) text += "%\n  \n%\nlast one\n";
    write(dir, kFortuneTopics[t], text);
  }
}

float id(const std::string& word) { return static_cast<float>(hashed_word_id(word, 1000)); }

TEST(FortuneTopics, EachFortuneIsABagOfHashedWordsLabelledByItsTopic) {
  const TempDir dir("topics");
  write_topics(dir, 9);
  const Dataset d = load_fortune_topics(dir.path(), 1000, 7);
  // 4 · 9 + "last one" = 37 fortunes: 10% (3) held out.
  EXPECT_EQ(d.name, "fortune-topics");
  EXPECT_EQ(d.classes, 4);
  EXPECT_EQ(d.train_x.shape, (std::vector<int64_t>{34, 7}));
  EXPECT_EQ(d.test_x.shape, (std::vector<int64_t>{3, 7}));
  ASSERT_EQ(d.train_y.size() + d.test_y.size(), 37u);
  std::map<int32_t, int> per_label;
  for (const Tensor* x : {&d.train_x, &d.test_x}) {
    const std::vector<int32_t>& y = x == &d.train_x ? d.train_y : d.test_y;
    for (int64_t r = 0; r < x->rows(); ++r) {
      const float* row = x->data.data() + r * 7;
      const int32_t label = y[static_cast<size_t>(r)];
      ++per_label[label];
      if (row[0] == id("last")) {
        // Two words, repeated: last one last one last one last.
        EXPECT_EQ(label, 0);
        EXPECT_EQ(std::vector<float>(row, row + 7),
                  (std::vector<float>{id("last"), id("one"), id("last"), id("one"), id("last"), id("one"), id("last")}));
        continue;
      }
      // "word<t>", "<t>b'c" (inner apostrophe kept), "x", then repeated.
      const std::string t = std::to_string(label);
      EXPECT_EQ(std::vector<float>(row, row + 4), (std::vector<float>{id("word" + t), id(t + "b'c"), id("x"), id("word" + t)}))
          << "row " << r;
    }
  }
  EXPECT_EQ(per_label, (std::map<int32_t, int>{{0, 10}, {1, 9}, {2, 9}, {3, 9}}));
  // The order is shuffled, the same way each time.
  EXPECT_NE(std::vector<int32_t>(d.train_y.begin(), d.train_y.begin() + 9), std::vector<int32_t>(9, 0));
  EXPECT_EQ(load_fortune_topics(dir.path(), 1000, 7).train_y, d.train_y);
}

TEST(FortuneTopics, WordIdsLieInTheVocabularyAboveZero) {
  for (const char* word : {"a", "computer", "don't", "0"}) {
    const int64_t v = hashed_word_id(word, 50);
    EXPECT_GE(v, 1) << word;
    EXPECT_LT(v, 50) << word;
  }
  EXPECT_NE(hashed_word_id("cat", 50'000), hashed_word_id("dog", 50'000));
}

TEST(FortuneTopics, AMissingTopicFileIsNamedWithThePackageToInstall) {
  const TempDir dir("topics");
  write_topics(dir, 3);
  fs::remove(dir.file("science"));
  try {
    load_fortune_topics(dir.path(), 1000, 8);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("science"), std::string::npos) << what;
    EXPECT_NE(what.find("apt-get install fortunes"), std::string::npos) << what;
  }
  EXPECT_THROW(load_fortune_topics(dir.path(), 1, 8), InputError);
  EXPECT_THROW(load_fortune_topics(dir.path(), 1000, 0), InputError);
}

// Debian's files: every topic in both parts, about 3,100 fortunes, and
// text-bag's shape.
TEST(FortuneTopics, DebiansTopicFilesMakeTextBagsDataSet) {
  if (!fs::exists(fs::path(kFortunesDir) / "computers")) GTEST_SKIP() << "Debian's fortunes are not installed";
  const Dataset d = load_fortune_topics(kFortunesDir, kTextVocabulary, kTextTokensPerSample);
  const int64_t total = d.train_x.rows() + d.test_x.rows();
  EXPECT_GT(total, 2500);
  EXPECT_EQ(d.test_x.rows(), total / 10);
  EXPECT_EQ(d.sample_shape, (std::vector<int64_t>{kTextTokensPerSample}));
  EXPECT_EQ(d.classes, kTextClasses);
  EXPECT_EQ(std::set<int32_t>(d.train_y.begin(), d.train_y.end()), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::set<int32_t>(d.test_y.begin(), d.test_y.end()), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(std::all_of(d.train_x.data.begin(), d.train_x.data.end(),
                          [](float v) { return v >= 0 && v < kTextVocabulary && v == static_cast<int64_t>(v); }));
}

}  // namespace
}  // namespace trainsim
