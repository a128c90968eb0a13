// run_trainsim: builds the CLI11 app from the subcommands, parses, runs the
// chosen command, and turns exceptions into exit codes and one-line errors.
#include "tools/cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>

#include "exec/data/fashion_mnist.hpp"
#include "exec/data/fortune_topics.hpp"
#include "exec/data/fortunes_text.hpp"
#include "exec/data/synthetic_text.hpp"
#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/model_json.hpp"
#include "model/output_file.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

// Longest error line printed, before it is shortened (strings.hpp).
constexpr size_t kMaxErrorLineBytes = 700;

}  // namespace

Model load_model(const std::string& name_or_path, const std::string& where) {
  const bool looks_like_file = name_or_path.find('/') != std::string::npos ||
                               name_or_path.ends_with(".json");
  std::error_code error;  // a name too long for a path is no file, not a failure
  if (looks_like_file || (std::filesystem::exists(name_or_path, error) &&
                          !std::filesystem::is_directory(name_or_path, error))) {
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

Dataset load_dataset(const std::string& name, const Model& model, const std::string& data_dir) {
  const bool token_input = model.input_shape.size() == 1;
  const std::vector<int64_t> output = model.layers.empty() ? std::vector<int64_t>{} : model.layers.back().output_shape;
  // A label per position ({T, classes} out of {T} tokens): a language model.
  const bool language_model = token_input && output.size() == 2;
  const std::string chosen =
      !name.empty() ? name : (language_model ? "fortunes" : token_input ? "fortune-topics" : "fashion-mnist");
  if (chosen == "fashion-mnist") return load_fashion_mnist(data_dir.empty() ? kFashionMnistDir : data_dir);
  if (chosen == "fortunes") {
    if (!language_model) {
      throw InputError("--dataset", "fortunes is next-byte text for language models, not " + model.name + "'s input",
                       "a model from {T} bytes to {T, 256} logits, e.g. fortunes-gpt");
    }
    return load_fortunes(data_dir.empty() ? kFortunesDir : data_dir, model.input_shape[0]);
  }
  if (chosen == "fortune-topics") {
    const auto topics = static_cast<int64_t>(kFortuneTopics.size());
    if (!token_input || language_model || output != std::vector<int64_t>{topics}) {
      throw InputError("--dataset", "fortune-topics is bags of word ids in " + std::to_string(topics) +
                                        " topics, not " + model.name + "'s input and output",
                       "a model from {T} word ids to " + std::to_string(topics) + " classes, e.g. text-bag");
    }
    return load_fortune_topics(data_dir.empty() ? kFortunesDir : data_dir, kTextVocabulary, model.input_shape[0]);
  }
  if (!data_dir.empty()) {
    throw InputError("--data-dir", "given for the " + chosen + " data set, which is generated",
                     "--data-dir only with --dataset fashion-mnist, fortunes or fortune-topics");
  }
  if (chosen == "synthetic") {
    return make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, kTextTrainSamples,
                               kTextTestSamples, 1);
  }
  throw InputError("--dataset", "'" + chosen + "'", "fashion-mnist, fortunes, fortune-topics or synthetic");
}

void write_text_output(const std::string& path, const std::string& text, std::ostream& out,
                       const std::string& where) {
  write_output_file(path, text, out, where);
}

const CLI::Validator& seed_check() {
  static const CLI::Validator check(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        return digits ? std::string() : "'" + shorten(text, 40) + "' is not a seed (an integer >= 0)";
      },
      "INTEGER >= 0");
  return check;
}

namespace {

// CLI11's range check prints its bounds with std::to_string, the largest
// double as 310 digits: "Value 0 not in range 0.000000 to 1797...". Rewritten
// with short bounds ("Value 0 is not > 0", "Value 0 is not in [1, 1000000]").
std::string readable_parse_error(const std::string& text) {
  const std::string marker = " not in range ";
  const size_t at = text.find(marker);
  const size_t to = at == std::string::npos ? at : text.find(" to ", at + marker.size());
  if (to == std::string::npos) return text;
  const double low = std::strtod(text.c_str() + at + marker.size(), nullptr);
  const double high = std::strtod(text.c_str() + to + 4, nullptr);
  const std::string head = text.substr(0, at) + " is not ";
  if (high >= std::numeric_limits<double>::max()) return head + (low == 0 ? "> 0" : ">= " + format_number(low));
  return head + "in [" + format_number(low) + ", " + format_number(high) + "]";
}

// An option given with an empty value ("--memory-limit ''") is an error, not
// the option left out.
void reject_empty_values(const CLI::App& app) {
  for (const CLI::App* sub = &app; sub != nullptr;) {
    for (const CLI::Option* option : sub->get_options()) {
      if (option->get_type_size_min() == 0 || option->count() == 0) continue;  // a flag, or not given
      for (const std::string& value : option->results()) {
        if (value.empty()) {
          throw InputError(option->get_name(), "is given an empty value", "a value, or the option left out");
        }
      }
    }
    const auto chosen = sub->get_subcommands();
    sub = chosen.empty() ? nullptr : chosen.front();
  }
}

}  // namespace

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
  add_llm_command(app, ctx);
  add_devices_command(app, ctx);

  // One line, at most a few hundred characters, whatever it echoes.
  const auto error_line = [&err](const std::string& prefix, const std::string& text) {
    err << prefix << shorten(text, kMaxErrorLineBytes) << "\n";
  };
  try {
    for (const std::string& arg : args) check_json_depth(arg, "command line");
    if (!args.empty() && !args.front().starts_with("-")) {
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
      }
      if (args.front().empty()) {
        throw InputError("command line", "the command name is empty", "one of " + join(names, ", "));
      }
      if (std::find(names.begin(), names.end(), args.front()) == names.end()) {
        throw InputError(args.front(), "is not a trainsim command", "one of " + join(names, ", "));
      }
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
    reject_empty_values(app);
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
    error_line("trainsim: error: command line: ", readable_parse_error(e.what()) + " (see trainsim --help)");
    return 2;
  } catch (const InputError& e) {
    error_line("trainsim: error: ", e.what());
    return 2;
  } catch (const std::logic_error& e) {
    // A broken invariant (InternalError): the message, never the source location.
    error_line("trainsim: internal error: ", std::string(e.what()) + " (a bug in trainsim; please report it)");
    return 1;
  } catch (const std::bad_alloc&) {
    error_line("trainsim: failed: ", "out of memory");
    return 1;
  } catch (const std::exception& e) {
    error_line("trainsim: failed: ", e.what());
    return 1;
  }
}

}  // namespace trainsim
