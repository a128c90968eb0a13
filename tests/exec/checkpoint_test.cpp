// Checkpoints: every strategy stopped after N iterations, its state written
// to a file and read back, goes on to train as the run that kept its state
// in memory (bit for bit), and the synchronous ones as a run never stopped;
// the file's refusals (missing, not a checkpoint, truncated, corrupted, of
// another run) and its atomic replacement.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "exec/checkpoint.hpp"
#include "model/error.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::cases;
using strategy_runs::execute;
using strategy_runs::plan_of;
using strategy_runs::RunSpec;
using strategy_runs::StrategyCase;
using strategy_runs::StrategyRun;

constexpr int32_t kStretch = 3;

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / ("trainsim-checkpoint-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(counter_++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
  static inline int counter_ = 0;
};

// Two stretches of kStretch iterations: the second starts from the state the
// first left, in memory or through a checkpoint file.
ExecResult two_stretches(const RunSpec& spec, bool through_file, RunState* middle = nullptr) {
  RunSpec stretch = spec;
  stretch.iterations = kStretch;
  const Plan plan = plan_of(stretch);
  StrategyRun first = execute(stretch, plan, 0, nullptr, true);
  RunState state = first.result.state;
  if (middle != nullptr) *middle = state;
  if (through_file) {
    TempDir dir;
    write_checkpoint(dir.str(), Checkpoint{{{"strategy", spec.strategy}}, kStretch, first.result.loss_per_iteration, state});
    const Checkpoint read = read_checkpoint(dir.str());
    EXPECT_EQ(read.next_iteration, kStretch);
    EXPECT_EQ(read.losses, first.result.loss_per_iteration);
    state = read.state;
  }
  StrategyRun second = execute(stretch, plan, kStretch, &state, true);
  ExecResult both = std::move(second.result);
  both.loss_per_iteration.insert(both.loss_per_iteration.begin(), first.result.loss_per_iteration.begin(),
                                 first.result.loss_per_iteration.end());
  return both;
}

// The strategies whose iterations share nothing in flight: stopping between
// two changes nothing.
bool synchronous(const std::string& strategy) {
  static const std::set<std::string> all = {"single", "dp-ps", "dp-ring", "dp-overlap",
                                            "cgdp",   "gpipe", "1f1b",    "parallax"};
  return all.contains(strategy);
}

class Checkpoints : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(Checkpoints, AResumedRunTrainsAsOneThatKeptItsStateInMemory) {
  RunSpec spec = GetParam().spec;
  RunState middle;
  const ExecResult in_memory = two_stretches(spec, false, &middle);
  const ExecResult resumed = two_stretches(spec, true);
  ASSERT_EQ(resumed.loss_per_iteration.size(), 2u * kStretch);
  EXPECT_EQ(resumed.loss_per_iteration, in_memory.loss_per_iteration);
  EXPECT_EQ(strategy_runs::largest_weight_gap(resumed.weights, in_memory.weights), 0.0);
  // The state holds every worker and server, with momentum's velocity where it is on.
  const Plan plan = plan_of(spec);
  ASSERT_EQ(middle.endpoints.size(), plan.workers.size() + plan.servers.size());
  if (spec.sgd.momentum > 0) {
    bool stepped = false;
    for (const EndpointState& e : middle.endpoints) {
      for (const LayerParams& v : e.velocity) stepped = stepped || !v.empty();
    }
    EXPECT_TRUE(stepped);
  }
  if (synchronous(spec.strategy)) {
    spec.iterations = 2 * kStretch;
    const StrategyRun whole = strategy_runs::run(spec);
    EXPECT_EQ(resumed.loss_per_iteration, whole.result.loss_per_iteration);
    EXPECT_EQ(strategy_runs::largest_weight_gap(resumed.weights, whole.result.weights), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, Checkpoints, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<StrategyCase>& param) { return param.param.name; });

TEST(Checkpoints, ResumingAnotherPlansStateIsRefused) {
  const RunSpec ring{.strategy = "dp-ring", .iterations = 2};
  const StrategyRun ran = execute(ring, plan_of(ring), 0, nullptr, true);
  const RunSpec ps{.strategy = "parallax", .settings = {{"mode", "ps"}}, .iterations = 2};  // a dense server
  const Plan with_server = plan_of(ps);
  ASSERT_FALSE(with_server.servers.empty());
  EXPECT_THROW(execute(ps, with_server, 2, &ran.result.state), InputError);
  const RunSpec text{.strategy = "dp-ring", .iterations = 2, .text = true};
  EXPECT_THROW(execute(text, plan_of(text), 2, &ran.result.state), InputError);  // another model's weights
}

Checkpoint small_checkpoint() {
  Checkpoint c;
  c.identity = {{"model", "fmnist-mlp"}, {"seed", 3}};
  c.next_iteration = 2;
  c.losses = {2.25, 1.5};
  Tensor w({2, 3});
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = 0.5f * static_cast<float>(i) - 1.0f;
  c.state.endpoints.push_back(EndpointState{{{w}, {}}, {{w}, {}}, {}, {{}, {Tensor({4}, 1.0f)}}});
  return c;
}

TEST(CheckpointFile, ReadsBackWhatWasWritten) {
  TempDir dir;
  const Checkpoint c = small_checkpoint();
  write_checkpoint(dir.str(), c);
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(dir.str()) + ".tmp"));
  const Checkpoint read = read_checkpoint(dir.str());
  EXPECT_EQ(read.identity, c.identity);
  EXPECT_EQ(read.next_iteration, 2);
  EXPECT_EQ(read.losses, c.losses);
  ASSERT_EQ(read.state.endpoints.size(), 1u);
  const EndpointState& e = read.state.endpoints[0];
  ASSERT_EQ(e.weights.size(), 2u);
  EXPECT_EQ(e.weights[0][0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e.weights[0][0].data, c.state.endpoints[0].weights[0][0].data);
  EXPECT_TRUE(e.weights[1].empty());
  EXPECT_EQ(e.velocity[0][0].data, c.state.endpoints[0].velocity[0][0].data);
  EXPECT_TRUE(e.smoothed.empty());
  EXPECT_EQ(e.statistics[1][0].data, (std::vector<float>(4, 1.0f)));
  // A second write replaces the first.
  Checkpoint later = c;
  later.next_iteration = 4;
  later.losses = {2.25, 1.5, 1.25, 1.0};
  write_checkpoint(dir.str(), later);
  EXPECT_EQ(read_checkpoint(dir.str()).next_iteration, 4);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The refusal's message, or "" when the read succeeded.
std::string refusal(const std::string& dir) {
  try {
    read_checkpoint(dir);
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--resume");
    return e.problem();
  }
  return "";
}

TEST(CheckpointFile, RefusesWhatIsNotAWholeCheckpoint) {
  TempDir dir;
  EXPECT_NE(refusal(dir.str()).find("holds no checkpoint"), std::string::npos);
  write_checkpoint(dir.str(), small_checkpoint());
  const std::string path = checkpoint_path(dir.str()), whole = file_bytes(path);
  for (size_t keep : {size_t{0}, size_t{10}, whole.size() / 2, whole.size() - 1}) {
    put_bytes(path, whole.substr(0, keep));
    const std::string why = refusal(dir.str());
    EXPECT_TRUE(why.find("truncated") != std::string::npos || why.find("not a trainsim checkpoint") != std::string::npos)
        << keep << ": " << why;
  }
  for (size_t at : {size_t{30}, whole.size() / 2, whole.size() - 2}) {
    std::string flipped = whole;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    put_bytes(path, flipped);
    EXPECT_NE(refusal(dir.str()).find("checksum"), std::string::npos) << at;
  }
  put_bytes(path, "{\"format\": \"trainsim.run/1\"}\n");
  EXPECT_NE(refusal(dir.str()).find("not a trainsim checkpoint"), std::string::npos);
  put_bytes(path, whole);
  EXPECT_EQ(refusal(dir.str()), "");
}

TEST(CheckpointFile, RefusesAnotherRunsCheckpointNamingWhatDiffers) {
  const Checkpoint c = small_checkpoint();
  EXPECT_NO_THROW(check_same_run(c, {{"model", "fmnist-mlp"}, {"seed", 3}}));
  try {
    check_same_run(c, {{"model", "fmnist-mlp"}, {"seed", 4}});
    FAIL() << "another seed was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("seed is 3, this run's 4"), std::string::npos) << e.problem();
  }
  EXPECT_THROW(check_same_run(c, {{"strategy", "gpipe"}}), InputError);  // not recorded
}

}  // namespace
}  // namespace trainsim
