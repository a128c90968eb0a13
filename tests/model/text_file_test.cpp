// read_text_file: whole files, and the errors for directories, missing files
// and inputs past the limit (a device that never ends included).
#include "model/text_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/error.hpp"

namespace trainsim {
namespace {

std::string error_of_read(const std::string& path, int64_t max_bytes) {
  try {
    read_text_file(path, "a test file", max_bytes);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TextFile, ReadsAWholeFile) {
  const auto path = std::filesystem::temp_directory_path() / ("trainsim_text_" + std::to_string(::getpid()));
  std::ofstream(path) << "line 1\nline 2\n";
  EXPECT_EQ(read_text_file(path.string(), "a test file", 1 << 20), "line 1\nline 2\n");
  std::filesystem::remove(path);
}

TEST(TextFile, AFileOfManyChunksIsReadWholeUpToExactlyTheLimit) {
  const auto path = std::filesystem::temp_directory_path() / ("trainsim_text_big_" + std::to_string(::getpid()));
  std::string text;
  for (int i = 0; static_cast<int64_t>(text.size()) < 300'000; ++i) text += std::to_string(i) + ' ';
  std::ofstream(path, std::ios::binary) << text;
  const int64_t size = static_cast<int64_t>(text.size());
  EXPECT_EQ(read_text_file(path.string(), "a test file", size), text);
  EXPECT_EQ(error_of_read(path.string(), size - 1), path.string() + ": is larger than " + std::to_string(size - 1) +
                                                        " bytes (a test file of at most " + std::to_string(size - 1) +
                                                        " bytes)");
  std::filesystem::remove(path);
}

TEST(TextFile, ADirectoryIsNamedAsOne) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(error_of_read(dir, 1 << 20), dir + ": is a directory (a test file)");
}

TEST(TextFile, AMissingFileCannotBeOpened) {
  EXPECT_NE(error_of_read("/nonexistent/graph.txt", 1 << 20).find("/nonexistent/graph.txt: cannot be opened"),
            std::string::npos);
}

TEST(TextFile, AnEndlessDeviceStopsAtTheLimit) {
  EXPECT_EQ(error_of_read("/dev/zero", 4 << 20), "/dev/zero: is larger than 4 MiB (a test file of at most 4 MiB)");
}

}  // namespace
}  // namespace trainsim
