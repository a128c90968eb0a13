// The fortunes as next-byte samples: separators dropped, windows of the
// context with the following bytes as labels, the last windows held out.
#include "exec/data/fortunes_text.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/error.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() : path(fs::temp_directory_path() / ("trainsim-fortunes-" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
  fs::path path;
};

TEST(Fortunes, WindowsOfTheTextWithTheNextBytesAsLabels) {
  TempDir dir;
  // b sorts after a; the strfile index and the separators are left out:
  // the stream is "ab\n" × 40 + "xy\n" × 20 (180 bytes).
  std::string a, b;
  for (int i = 0; i < 40; ++i) a += "ab\n%\n";
  for (int i = 0; i < 20; ++i) b += "xy\n%\n";
  dir.write("a", a);
  dir.write("b", b);
  dir.write("a.dat", "binary index");
  const Dataset d = load_fortunes(dir.path.string(), 3);
  // (180 - 1) / 3 = 59 windows; 5% of them, 2, are the test set.
  EXPECT_EQ(d.train_x.shape, (std::vector<int64_t>{57, 3}));
  EXPECT_EQ(d.test_x.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(d.labels_per_sample, 3);
  EXPECT_EQ(d.classes, 256);
  EXPECT_EQ(d.train_y.size(), 57u * 3);
  EXPECT_EQ(d.train_x.data[0], 'a');
  EXPECT_EQ(d.train_x.data[1], 'b');
  EXPECT_EQ(d.train_y[0], 'b');   // the byte after each
  EXPECT_EQ(d.train_y[1], '\n');
  EXPECT_EQ(d.train_y[2], 'a');
  // The last window, bytes 174..176 = "xy\n", labels "y\nx".
  EXPECT_EQ(d.test_x.data[3], 'x');
  EXPECT_EQ(d.test_y[3], 'y');
  EXPECT_EQ(d.test_y[5], 'x');
}

TEST(Fortunes, AFolderWithoutFortunesIsAnInputErrorSayingWhatToInstall) {
  TempDir dir;
  try {
    load_fortunes(dir.path.string(), 64);
    FAIL() << "an empty folder was read";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), "holds no fortune files");
    EXPECT_NE(e.expected().find("apt-get install fortunes"), std::string::npos);
  }
  dir.write("short", "too short\n");
  EXPECT_THROW(load_fortunes(dir.path.string(), 64), InputError);
}

}  // namespace
}  // namespace trainsim
