// `simulate --export-chakra` and `--import-chakra`: the traces a plan
// writes simulate, read back, to the same iteration; the other inputs are
// refused with one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
using testing_fixtures::run_cli;

TEST(ChakraCli, AnExportedPlanSimulatesBackToTheSameIteration) {
  const fs::path dir = fs::temp_directory_path() / ("trainsim-chakra-cli-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const auto exported =
      run_cli({"simulate", "--model", "fmnist-mlp", "--batch", "32", "--cluster", "p40x4-pcie3", "--strategy", "gpipe",
               "--iterations", "4", "--export-chakra", dir.string(), "--json", "-"});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_TRUE(fs::exists(dir / "trainsim.3.et"));
  const auto imported =
      run_cli({"simulate", "--import-chakra", (dir / "trainsim").string(), "--cluster", "p40x4-pcie3", "--json", "-"});
  ASSERT_EQ(imported.status, 0) << imported.err;
  EXPECT_EQ(nlohmann::json::parse(imported.out)["iteration_s"], nlohmann::json::parse(exported.out)["iteration_s"]);
  const auto text = run_cli({"simulate", "--import-chakra", (dir / "trainsim").string(), "--cluster", "p40x4-pcie3"});
  EXPECT_NE(text.out.find("gpipe from "), std::string::npos) << text.out;
  const auto small = run_cli({"simulate", "--import-chakra", (dir / "trainsim").string(), "--cluster",
                              "titanxp-4node-10gbe", "--strategy", "gpipe"});
  EXPECT_EQ(small.status, 2);
  EXPECT_NE(small.err.find("--strategy: given with --import-chakra"), std::string::npos) << small.err;
  const auto missing = run_cli({"simulate", "--import-chakra", (dir / "nothing").string(), "--cluster", "p40x4-pcie3"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nothing.0.et: cannot be read"), std::string::npos) << missing.err;
  // A trainsim export is a plan, not a profile; --import-chakra takes no model.
  const auto as_profile = run_cli({"profile", "--import-chakra", (dir / "trainsim.0.et").string(), "--batch", "8"});
  EXPECT_EQ(as_profile.status, 2);
  EXPECT_NE(as_profile.err.find("is a trainsim export"), std::string::npos) << as_profile.err;
  const auto both = run_cli({"profile", "--import-chakra", (dir / "trainsim.0.et").string(), "--model", "vgg16"});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("--model: given with --import-chakra"), std::string::npos) << both.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainsim
