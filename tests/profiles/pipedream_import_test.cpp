// PipeDream graph.txt importer: every peer graph imports and matches the
// README's table, ordering is deterministic, batches are inferred, and
// malformed files raise InputError with the line.
#include "profiles/pipedream_import.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "model/error.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

fs::path peer_dir() { return fs::path(TRAINSIM_TEST_DATA_DIR) / "pipedream"; }

std::string peer_graph(const std::string& relative) { return (peer_dir() / relative).string(); }

// A folder of its own under the temp directory for one test's graph files,
// removed afterwards.
class TempGraphs {
 public:
  TempGraphs()
      : root_(fs::temp_directory_path() /
              ("trainsim-pd-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  ~TempGraphs() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  TempGraphs(const TempGraphs&) = delete;
  TempGraphs& operator=(const TempGraphs&) = delete;

  // Writes `text` to <root>/<folder>/graph.txt (the folder names the model).
  std::string write(const std::string& text, const std::string& folder = "model") const {
    fs::create_directories(root_ / folder);
    const fs::path path = root_ / folder / "graph.txt";
    std::ofstream(path) << text;
    return path.string();
  }

 private:
  fs::path root_;
};

double total_ms(const Profile& p) { return 1e3 * (total_forward_s(p) + total_backward_s(p)); }

TEST(PipedreamImport, EveryPeerGraphImportsAndValidates) {
  // GNMT graphs have three Input nodes and the toy graphs none: no batch to infer.
  const std::set<std::string> needs_batch{"gnmt", "gnmt_large", "toy"};
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(peer_dir())) {
    if (entry.path().extension() != ".txt") continue;
    const std::string folder = entry.path().parent_path().filename().string();
    SCOPED_TRACE(entry.path().string());
    const std::optional<int64_t> batch = needs_batch.count(folder) ? std::optional<int64_t>(64) : std::nullopt;
    const Profile p = import_pipedream_graph(entry.path().string(), batch);
    EXPECT_NO_THROW(validate_profile(p, entry.path().string()));
    EXPECT_EQ(p.model, folder);
    EXPECT_EQ(p.source, "imported:pipedream");
    EXPECT_EQ(p.device.name, "unknown (PipeDream profile)");
    ++files;
  }
  EXPECT_EQ(files, 20);  // the README's table lists 20 graph files
}

struct TableRow {
  const char* file;
  size_t layers;         // the README's nodes minus its Input nodes
  double sum_ms;         // fwd+bwd sum, rounded to 0.1 ms in the README
  double param_mb;       // parameter MB (1e6 bytes), rounded to 0.1
  int64_t batch;         // implied batch (GNMT: passed in)
};

TEST(PipedreamImport, TotalsMatchTheReadmeTable) {
  const TableRow rows[] = {
      {"alexnet/graph.txt", 22, 85.3, 244.4, 256},      {"densenet121/graph.txt", 428, 326.2, 31.9, 64},
      {"inception_v3/graph.txt", 325, 689.0, 108.6, 128}, {"nasnetalarge/graph.txt", 1250, 658.3, 369.0, 16},
      {"nasnetamobile/graph.txt", 920, 584.3, 34.3, 128}, {"resnet101/graph.txt", 346, 411.1, 178.2, 64},
      {"resnet18/graph.txt", 70, 259.7, 46.8, 256},      {"resnet50/graph.txt", 176, 443.4, 102.2, 128},
      {"resnext101/graph.txt", 346, 557.4, 176.7, 64},   {"resnext50/graph.txt", 176, 590.8, 100.1, 128},
      {"squeezenet1_0/graph.txt", 67, 285.4, 5.0, 256},  {"vgg16/graph.txt", 40, 672.5, 553.4, 128},
      {"gnmt/graph.txt", 45, 89.4, 775.1, 0},            {"gnmt_large/graph.txt", 93, 520.5, 1110.9, 0},
  };
  for (const TableRow& row : rows) {
    SCOPED_TRACE(row.file);
    const Profile p =
        import_pipedream_graph(peer_graph(row.file), row.batch > 0 ? std::nullopt : std::optional<int64_t>(64));
    EXPECT_EQ(p.layers.size(), row.layers);
    EXPECT_NEAR(total_ms(p), row.sum_ms, 0.05 + 1e-9);
    EXPECT_NEAR(total_param_bytes(p) / 1e6, row.param_mb, 0.05 + 1e-9);
    if (row.batch > 0) {
      EXPECT_EQ(p.batch_size, row.batch);
    }
  }
}

TEST(PipedreamImport, BatchIsInferredFromTheInputNode) {
  // vgg16: Input activation 77,070,336 = 4·3·224·224 × 128.
  EXPECT_EQ(import_pipedream_graph(peer_graph("vgg16/graph.txt"), std::nullopt).batch_size, 128);
  // inception_v3: 137,319,936 = 4·3·299·299 × 128 (not a multiple of 4·3·224·224).
  EXPECT_EQ(import_pipedream_graph(peer_graph("inception_v3/graph.txt"), std::nullopt).batch_size, 128);
  // A given batch wins.
  EXPECT_EQ(import_pipedream_graph(peer_graph("vgg16/graph.txt"), 32).batch_size, 32);
}

TEST(PipedreamImport, UninferableBatchAsksForTheBatchFlag) {
  try {
    import_pipedream_graph(peer_graph("gnmt/graph.txt"), std::nullopt);
    FAIL() << "gnmt's batch was inferred from three empty Input nodes";
  } catch (const InputError& e) {
    EXPECT_NE(e.expected().find("--batch"), std::string::npos);
  }
}

TEST(PipedreamImport, ReadyNodesAreOrderedByTheirLines) {
  // toy/test.txt: nodes 0..5 on lines 1..6; edges 5->2, 5->0, 4->0, 4->1,
  // 2->3, 3->1. Kahn: ready {4, 5} -> 4 (earlier line); ready {5} -> 5, which
  // frees 2 and 0 -> 0 then 2; then 3; then 1.
  const Profile p = import_pipedream_graph(peer_graph("toy/test.txt"), 1);
  std::vector<std::string> order;
  for (const LayerProfile& l : p.layers) order.push_back(l.name);
  EXPECT_EQ(order, (std::vector<std::string>{"4", "5", "0", "2", "3", "1"}));
  // Node 0's inputs in edge-line order; sources without an Input node have none.
  EXPECT_EQ(p.layers[2].inputs, (std::vector<std::string>{"5", "4"}));
  EXPECT_TRUE(p.layers[0].inputs.empty());
}

TEST(PipedreamImport, InputNodesBecomeTheModelInputAndTimesBecomeSeconds) {
  // Input activation 602,112 = 4·3·224·224: batch 1. Lines out of order.
  const TempGraphs temp;
  const std::string path = temp.write(
      "node3 -- ReLU() -- forward_compute_time=0.250, backward_compute_time=0.500, activation_size=64.0, "
      "parameter_size=0.000\n"
      "node1 -- Input -- forward_compute_time=7.000, backward_compute_time=0.000, activation_size=602112.0, "
      "parameter_size=0.000\n"
      "node2 -- Linear(in_features=4, out_features=2) -- forward_compute_time=1.500, backward_compute_time=3.000, "
      "activation_size=[64.0; 32.0], parameter_size=40.000 -- stage_id=0\n"
      "\tnode2 -- node3\n"
      "\tnode1 -- node2\n"
      "\tnode1 -- node3\n",
      "mymodel");
  const Profile p = import_pipedream_graph(path, std::nullopt);
  EXPECT_EQ(p.model, "mymodel");
  EXPECT_EQ(p.batch_size, 1);
  ASSERT_EQ(p.layers.size(), 2u);  // the Input node is dropped
  EXPECT_EQ(p.layers[0].name, "node2");
  EXPECT_EQ(p.layers[0].inputs, (std::vector<std::string>{"input"}));
  EXPECT_EQ(p.layers[1].inputs, (std::vector<std::string>{"node2", "input"}));
  EXPECT_DOUBLE_EQ(p.layers[0].forward_s, 1.5e-3);   // 1.500 ms
  EXPECT_DOUBLE_EQ(p.layers[0].backward_s, 3e-3);    // 3.000 ms
  EXPECT_EQ(p.layers[0].activation_bytes, 96.0);     // [64; 32] summed
  EXPECT_EQ(p.layers[0].param_bytes, 40.0);
  EXPECT_DOUBLE_EQ(total_forward_s(p), 1.75e-3);     // Input's 7 ms of data loading left out
}

struct MalformedCase {
  std::string name;
  std::string text;
  std::string where_suffix;  // where() is the path plus this ("" = the path alone)
};

TEST(PipedreamImport, MalformedGraphsRaiseInputErrorWithTheLine) {
  const TempGraphs temp;
  const std::string n1 =
      "n1 -- Conv -- forward_compute_time=1, backward_compute_time=2, activation_size=4, parameter_size=8\n";
  const std::string n2 =
      "n2 -- ReLU -- forward_compute_time=1, backward_compute_time=2, activation_size=4, parameter_size=0\n";
  const std::vector<MalformedCase> cases = {
      {"neither form", n1 + "this is not a graph line\n", ":line 2"},
      {"missing field", "n1 -- Conv -- forward_compute_time=1, backward_compute_time=2, activation_size=4\n",
       ":line 1"},
      {"not a number",
       "n1 -- Conv -- forward_compute_time=fast, backward_compute_time=2, activation_size=4, parameter_size=8\n",
       ":line 1"},
      {"nan", "n1 -- Conv -- forward_compute_time=nan, backward_compute_time=2, activation_size=4, parameter_size=8\n",
       ":line 1"},
      {"negative",
       n1 + "n2 -- ReLU -- forward_compute_time=1, backward_compute_time=-2, activation_size=4, parameter_size=0\n",
       ":line 2"},
      {"bad list entry",
       "n1 -- LSTM -- forward_compute_time=1, backward_compute_time=2, activation_size=[4.0; x], parameter_size=8\n",
       ":line 1"},
      {"bad stage field",
       "n1 -- Conv -- forward_compute_time=1, backward_compute_time=2, activation_size=4, parameter_size=8 -- "
       "stage=1\n",
       ":line 1"},
      {"bad edge line", n1 + n2 + "\tn1 n2\n", ":line 3"},
      {"unknown node in edge", n1 + n2 + "\tn1 -- n9\n", ":line 3"},
      {"duplicate node", n1 + n1, ":line 2"},
      {"cycle", n1 + n2 + "\tn1 -- n2\n\tn2 -- n1\n", ":line 1"},
      {"self loop", n1 + "\tn1 -- n1\n", ":line 1"},
      {"edge into an Input node",
       n1 + "n0 -- Input -- forward_compute_time=0, backward_compute_time=0, activation_size=0, parameter_size=0\n" +
           "\tn1 -- n0\n",
       ":line 3"},
      {"empty file", "", ""},
      {"only an Input node",
       "n0 -- Input -- forward_compute_time=0, backward_compute_time=0, activation_size=602112, parameter_size=0\n",
       ""},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp.write(c.text);
    try {
      import_pipedream_graph(path, 1);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), path + c.where_suffix);
    }
  }
}

TEST(PipedreamImport, MissingFileIsAnInputError) {
  EXPECT_THROW(import_pipedream_graph(peer_graph("no-such-model/graph.txt"), 1), InputError);
}

TEST(PipedreamImport, ADirectoryIsNamedAsOne) {
  try {
    import_pipedream_graph(peer_dir().string(), 1);
    ADD_FAILURE() << "a directory was imported";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), "is a directory");
  }
}

TEST(PipedreamImport, AnEndlessInputStopsAtTheFileLimit) {
  try {
    import_pipedream_graph("/dev/zero", 1);
    ADD_FAILURE() << "/dev/zero was imported";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), "is larger than 64 MiB");
  }
}

TEST(PipedreamImport, ALineOverOneMebibyteIsRejectedWithItsNumber) {
  TempGraphs temp;
  const std::string path = temp.write(
      "n0 -- Input -- forward_compute_time=0, backward_compute_time=0, activation_size=0, parameter_size=0\n" +
      std::string((1 << 20) + 1, 'x') + "\n");
  try {
    import_pipedream_graph(path, 1);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), path + ":line 2");
    EXPECT_EQ(e.problem(), "is longer than 1 MiB");
  }
}

TEST(PipedreamImport, BatchBelowOneIsRejected) {
  EXPECT_THROW(import_pipedream_graph(peer_graph("vgg16/graph.txt"), 0), InputError);
}

TEST(PipedreamImport, LargestGraphImportsWellUnderASecond) {
  // nasnetalarge: 1251 nodes, 1468 edges.
  const auto start = std::chrono::steady_clock::now();
  const Profile p = import_pipedream_graph(peer_graph("nasnetalarge/graph.txt"), std::nullopt);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(p.layers.size(), 1250u);
  EXPECT_LT(elapsed_s, 0.5);
}

}  // namespace
}  // namespace trainsim
