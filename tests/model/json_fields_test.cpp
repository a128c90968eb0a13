// Reading trainsim JSON files: the limits checked before parsing (nesting,
// directories) and the shortened echo of bad values.
#include "model/json_fields.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/error.hpp"

namespace trainsim {
namespace {

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("trainsim_json_" + std::to_string(::getpid()) + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of_read(const std::string& path) {
  try {
    read_json_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonFields, AFileNested100000DeepIsRejectedNamingTheFile) {
  const std::string path = temp_file("deep.json", "{\"model\": " + std::string(100'000, '[') +
                                                      std::string(100'000, ']') + "}");
  const std::string message = error_of_read(path);
  EXPECT_EQ(message.rfind(path + ": nests arrays and objects more than 64 levels deep", 0), 0u) << message;
  std::filesystem::remove(path);
}

TEST(JsonFields, NestingUpToTheLimitIsRead) {
  const std::string path = temp_file("ok.json", std::string(64, '[') + std::string(64, ']'));
  EXPECT_NO_THROW(read_json_file(path));
  std::filesystem::remove(path);
}

TEST(JsonFields, BracketsInsideStringsAreNotNesting) {
  EXPECT_NO_THROW(check_json_depth("{\"name\": \"" + std::string(1000, '[') + "\\\"\"}", "x"));
  EXPECT_THROW(check_json_depth(std::string(65, '{'), "x"), InputError);
}

TEST(JsonFields, ADirectoryIsNamedAsOne) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(error_of_read(dir), dir + ": is a directory (a trainsim JSON file)");
}

TEST(JsonFields, ABadValueIsEchoedShortened) {
  const nlohmann::json doc = {{"model", std::string(50'000'000, 'x')}};
  try {
    require_number(doc, "model", "p.json");
    ADD_FAILURE() << "a string was read as a number";
  } catch (const InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("(50000000 bytes)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(echo_json(nlohmann::json::array({1, 2})), "[1,2]");
}

}  // namespace
}  // namespace trainsim
