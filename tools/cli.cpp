// run_trainsim: builds the CLI11 app from the subcommands, parses, runs the
// chosen command, and turns exceptions into exit codes and one-line errors.
#include "tools/cli.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "exec/data/fashion_mnist.hpp"
#include "exec/data/synthetic_text.hpp"
#include "model/error.hpp"
#include "model/model_json.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "tools/commands.hpp"

namespace trainsim {

Model load_model(const std::string& name_or_path, const std::string& where) {
  const bool looks_like_file = name_or_path.find('/') != std::string::npos ||
                               name_or_path.ends_with(".json");
  if (looks_like_file || (std::filesystem::exists(name_or_path) && !std::filesystem::is_directory(name_or_path))) {
    return read_model_file(name_or_path);
  }
  return build_zoo_model(name_or_path, where);
}

Profile resolve_profile_input(const std::string& profile_path, const std::string& model, int64_t batch,
                              const Cluster& cluster) {
  if (!profile_path.empty() && !model.empty()) {
    throw InputError("--profile", "given with --model", "either --profile FILE or --model M [--batch B]");
  }
  if (!profile_path.empty()) {
    if (batch > 0) throw InputError("--batch", "given with --profile", "the profile's own batch size");
    return read_profile_file(profile_path);
  }
  if (model.empty()) throw InputError("--profile", "no model given", "--profile FILE or --model M [--batch B]");
  const Model m = load_model(model, "--model");
  return analytic_profile(m, batch > 0 ? batch : m.default_batch, cluster);
}

SimOptions parse_sim_options(const std::string& straggler, double jitter, uint64_t seed) {
  SimOptions options;
  options.seed = seed;
  options.jitter = jitter;
  if (!straggler.empty()) {
    const auto colon = straggler.find(':');
    const char* expected = "PROB:SLOWDOWN with 0 <= PROB <= 1 and SLOWDOWN >= 1, e.g. 0.33:1.5";
    if (colon == std::string::npos) throw InputError("--straggler", "'" + straggler + "'", expected);
    options.straggler_probability = parse_number(straggler.substr(0, colon), "--straggler");
    options.straggler_slowdown = parse_number(straggler.substr(colon + 1), "--straggler");
    if (options.straggler_probability < 0 || options.straggler_probability > 1 || options.straggler_slowdown < 1) {
      throw InputError("--straggler", "'" + straggler + "'", expected);
    }
  }
  return options;
}

// "cpu:N" -> N worker threads.
int64_t parse_cpu_devices(const std::string& text) {
  const std::string prefix = "cpu:";
  if (text == "cpu") return 1;
  if (text.rfind(prefix, 0) == 0) {
    const double n = parse_number(text.substr(prefix.size()), "--devices");
    if (n >= 1 && n == static_cast<double>(static_cast<int64_t>(n))) return static_cast<int64_t>(n);
  }
  if (text.rfind("cuda", 0) == 0) {
    throw InputError("--devices", "'" + text + "': the CUDA executor is not built yet", "cpu:N");
  }
  throw InputError("--devices", "'" + text + "'", "cpu:N with N >= 1 worker threads");
}

Dataset load_dataset(const std::string& name, const Model& model) {
  const bool text_model = model.input_shape.size() == 1;
  const std::string chosen = name.empty() ? (text_model ? "synthetic" : "fashion-mnist") : name;
  if (chosen == "fashion-mnist") return load_fashion_mnist();
  if (chosen == "synthetic") {
    return make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, kTextTrainSamples,
                               kTextTestSamples, 1);
  }
  throw InputError("--dataset", "'" + chosen + "'", "fashion-mnist or synthetic");
}

void write_text_output(const std::string& path, const std::string& text, std::ostream& out,
                       const std::string& where) {
  if (path == "-") {
    out << text;
    return;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp);
    if (!file) throw InputError(where, "cannot write '" + path + "'", "a writable path");
    file << text;
    if (!file) throw InputError(where, "could not finish writing '" + path + "'", "a path with free space");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw InputError(where, "cannot replace '" + path + "': " + ec.message(), "a writable path");
}

int run_trainsim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"trainsim: predict, choose and run parallel DNN training strategies"};
  app.name("trainsim");
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainsim 0.1.0");
  CommandContext ctx{out, err, {}};
  add_zoo_command(app, ctx);
  add_cluster_command(app, ctx);
  add_profile_command(app, ctx);
  add_predict_command(app, ctx);
  add_simulate_command(app, ctx);
  add_partition_command(app, ctx);
  add_chunk_command(app, ctx);
  add_choose_command(app, ctx);
  add_run_command(app, ctx);
  add_validate_command(app, ctx);
  add_report_command(app, ctx);
  add_devices_command(app, ctx);

  try {
    if (!args.empty() && !args.front().starts_with("-")) {
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
      }
      if (std::find(names.begin(), names.end(), args.front()) == names.end()) {
        throw InputError(args.front(), "is not a trainsim command", "one of " + join(names, ", "));
      }
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
    if (ctx.action) ctx.action();
    return 0;
  } catch (const CLI::CallForHelp&) {
    // The innermost subcommand that was named gets its own help.
    const CLI::App* target = &app;
    while (!target->get_subcommands().empty()) target = target->get_subcommands().front();
    out << target->help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "trainsim: error: command line: " << e.what() << " (see trainsim --help)\n";
    return 2;
  } catch (const InputError& e) {
    err << "trainsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "trainsim: failed: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trainsim
