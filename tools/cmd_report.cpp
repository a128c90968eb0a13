// `trainsim report`: what predict (analytic and simulated), choose and
// simulate say of one model on one cluster, written as JSON into --out DIR
// (prediction.json, choice.json, trace-<strategy>.json for the best ranked
// strategies), then turned into DIR/index.html by analysis/report.py.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"
#include "sim/search/choose.hpp"
#include "tools/llm_commands.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

// Strategies whose simulated schedule is traced: the best feasible ones of
// choose's ranking (the page draws the winner's; the others are for Perfetto).
constexpr size_t kTracedStrategies = 3;
// Iterations of every simulated plan, as `predict` and `simulate` default to.
constexpr int32_t kSimulatedIterations = 20;
// Names the analysis/ folder (an installed trainsim); when unset, the first
// analysis/report.py above the executable is used.
constexpr const char* kAnalysisEnv = "TRAINSIM_ANALYSIS_DIR";

struct ReportOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string strategies = "all";
  std::string out;
  bool quiet = false;
  int64_t gpus = 0, global_batch = 0;  // a transformer's job
};

// The analysis/ folder that holds report.py: $TRAINSIM_ANALYSIS_DIR, else the
// first one found walking up from this executable (a build folder inside the
// source tree finds the source's).
fs::path find_analysis_dir() {
  const char* expected = "the path of trainsim's analysis/ folder, which holds report.py";
  if (const char* env = std::getenv(kAnalysisEnv); env != nullptr && *env != '\0') {
    std::error_code ec;
    const fs::path dir = fs::canonical(env, ec);
    if (ec || dir.filename() != "analysis" || !fs::is_regular_file(dir / "report.py")) {
      throw InputError(kAnalysisEnv, "'" + std::string(env) + "' is not an analysis/ folder with report.py", expected);
    }
    return dir;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && !dir.empty(); dir = dir.parent_path()) {
    if (fs::is_regular_file(dir / "analysis" / "report.py")) return dir / "analysis";
    if (dir == dir.root_path()) break;
  }
  throw InputError(kAnalysisEnv, "is not set and no analysis/report.py lies above " + exe.string(), expected);
}

// Debian's python3 (it has python3-matplotlib, make deps), else the first on PATH.
std::string find_python3() {
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/python3";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error("report needs python3 with matplotlib: none at /usr/bin/python3 or on PATH");
}

fs::path prepare_out_dir(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out)) {
    throw InputError("--out", "cannot make the folder '" + out + "'" + (ec ? ": " + ec.message() : ""),
                     "a folder to write the report into");
  }
  return fs::absolute(out);
}

// Runs `python -m analysis.report out_dir` in the analysis folder's parent (so
// the package imports as `analysis`); standard output is dropped. Returns the
// exit status (or 128 + signal) and everything written on standard error.
std::pair<int, std::string> run_report_script(const std::string& python, const fs::path& analysis_dir,
                                              const fs::path& out_dir) {
  const std::string root = analysis_dir.parent_path().string();
  const std::string out_arg = out_dir.string();
  const std::string exec_failed = "cannot run " + python + "\n";
  std::vector<const char*> argv = {python.c_str(), "-m", "analysis.report", out_arg.c_str(), nullptr};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("report: cannot make a pipe for python3");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("report: cannot start " + python);
  if (pid == 0) {  // the child: only async-signal-safe calls until exec (dup2 clears close-on-exec)
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    if (::chdir(root.c_str()) == 0) ::execv(python.c_str(), const_cast<char* const*>(argv.data()));
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  std::string stderr_text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) {
      stderr_text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, stderr_text};
}

std::string last_line(const std::string& text) {
  std::stringstream lines(text);
  std::string last;
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// choice.json: the ranking `trainsim choose --json` writes.
nlohmann::json write_choice(const Profile& profile, const Cluster& cluster, const std::vector<std::string>& ids,
                            const fs::path& path, std::ostream& out) {
  const nlohmann::json choice = choice_to_json(choose_strategies(profile, cluster, ids), profile, cluster);
  write_text_output(path.string(), choice.dump(2) + "\n", out, "--out");
  return choice;
}

// trace-<strategy>.json of the best feasible strategies of `choice`, each at
// the settings choose picked, simulated as `simulate --trace` does. Returns
// the file names written.
std::vector<std::string> write_traces(const nlohmann::json& choice, const Profile& profile, const Cluster& cluster,
                                      const fs::path& out_dir, std::ostream& out) {
  std::vector<std::string> names;
  for (const nlohmann::json& entry : choice.at("ranked")) {
    if (names.size() == kTracedStrategies || !entry.at("feasible").get<bool>()) break;
    const std::string id = entry.at("strategy").get<std::string>();
    StrategyConfig config;
    for (const auto& [key, value] : entry.at("settings").items()) {
      config.set(key, value.is_string() ? value.get<std::string>() : value.dump(), "choice.json: " + id + "." + key);
    }
    const Plan plan = generate_plan(find_strategy(id, "choice.json"), profile, cluster, config, kSimulatedIterations);
    const SimResult result = simulate_plan(plan, cluster, SimOptions{});
    names.push_back("trace-" + id + ".json");
    write_text_output((out_dir / names.back()).string(), chrome_trace(plan, result).dump() + "\n", out, "--out");
  }
  return names;
}

void run_report(const ReportOptions& o, CommandContext& ctx) {
  const bool transformer = is_transformer_config(o.model);
  if (!transformer) refuse_job_size_without_transformer(o.gpus, o.global_batch);
  if (transformer && o.batch > 0) throw InputError("--batch", "with a transformer --model", "--global-batch");
  if (transformer && !o.profile.empty()) throw InputError("--profile", "with a transformer --model", "one of them");
  // Every input error before any file is written.
  const TransformerPredictRequest request{o.model, o.cluster, o.strategies, "both", "", o.gpus, o.global_batch};
  if (transformer)
    predict_transformer({request.model, request.machine, request.families, "analytic", "", o.gpus, o.global_batch});
  const Cluster cluster = transformer ? Cluster{} : load_cluster(o.cluster, "--cluster");
  const Profile profile = transformer ? Profile{} : resolve_profile_input(o.profile, o.model, o.batch, cluster);
  const std::vector<std::string> ids =
      transformer ? std::vector<std::string>{} : parse_strategy_list(o.strategies, "--strategies");
  const fs::path analysis_dir = find_analysis_dir();
  const std::string python = find_python3();
  const fs::path out_dir = prepare_out_dir(o.out);

  std::string why;
  std::vector<std::string> traces;
  if (transformer) {
    std::tie(why, traces) = write_transformer_report_inputs(request, out_dir.string(), ctx);
  } else {
    const PredictionSet set = predict_both(profile, cluster, ids, {}, kSimulatedIterations, SimOptions{});
    write_text_output((out_dir / "prediction.json").string(), prediction_set_to_json(set).dump(2) + "\n", ctx.out,
                      "--out");
    const nlohmann::json choice = write_choice(profile, cluster, ids, out_dir / "choice.json", ctx.out);
    why = choice.value("why", "");
    traces = write_traces(choice, profile, cluster, out_dir, ctx.out);
  }

  const auto [status, stderr_text] = run_report_script(python, analysis_dir, out_dir);
  if (status != 0) {
    const std::string line = last_line(stderr_text);
    throw std::runtime_error(
        python + " -m analysis.report: " + (line.empty() ? "exited with status " + std::to_string(status) : line));
  }
  if (o.quiet) return;
  ctx.out << why << "\nwrote " << (out_dir / "index.html").string() << " from prediction.json, choice.json"
          << (traces.empty() ? "" : ", " + join(traces, ", ")) << "\n";
}

}  // namespace

void add_report_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Predict, choose and simulate a model on a cluster; write the JSON and an HTML page into a folder");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON), e.g. an imported trace's");
  cmd->add_option("--model", o->model,
                  "Zoo model id or model JSON file, profiled analytically on the cluster; or a transformer "
                  "configuration (trainsim llm --list) on --cluster dgx-a100 or dgx-h100");
  cmd->add_option("--batch", o->batch, "Per-device batch size (default: the model's)")->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--strategies", o->strategies, "'all' or strategy ids separated by commas")->capture_default_str();
  cmd->add_option("--out", o->out, "Folder to write prediction.json, choice.json, trace-*.json and index.html into")
      ->required();
  cmd->add_flag("--quiet", o->quiet, "Print nothing");
  add_job_size_options(cmd, o->gpus, o->global_batch);
  cmd->footer(
      "\nThe page is drawn by analysis/report.py with Debian's python3-matplotlib (/usr/bin/python3, else\n"
      "python3 on PATH). The analysis/ folder is $TRAINSIM_ANALYSIS_DIR, else the first found above this\n"
      "executable.\n\nExamples:\n  trainsim report --model vgg16 --batch 64 --cluster p40x4-pcie3 --out report/\n"
      "  trainsim report --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --out report/\n"
      "  trainsim report --profile imported.json --cluster machine.json --out report/   # a traced model\n");
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_report(*o, ctx); }; });
}

}  // namespace trainsim
