// `trainsim profile`: per-layer profiles measured on this machine with exec's
// CPU kernels (`--device cpu`) or its GPU device (`--device cuda:N`, `cuda:NxW`, `cuda:G,H,...`), estimated by the
// analytic (roofline) model, or
// imported from PipeDream's graph.txt; `--cluster-out` also writes the
// measured machine as a cluster file. Under mpirun (or --launcher mpi) each
// rank is one CPU worker: all profile at once and the cluster is measured
// across the ranks and their hosts; rank 0 writes.
#include <charconv>
#include <memory>
#include <optional>

#include "model/error.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "profiles/pipedream_import.hpp"
#include "profiles/profile.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"
#include "profiles/profiler/cuda_profiler.hpp"
#include "profiles/profiler/profiler.hpp"
#include "profiles/profiler/timing.hpp"
#include "profiles/profiler/transport_probe.hpp"
#include "sim/chakra/chakra.hpp"
#include "tools/commands.hpp"
#include "tools/mpi_launch.hpp"
#include "tools/progress.hpp"

#if defined(TRAINSIM_WITH_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

namespace trainsim {
namespace {

struct ProfileOptions {
  std::string model;
  int64_t batch = 0;
  bool analytic = false;
  std::string cluster;
  std::string pipedream_graph;
  KinetoCliOptions kineto;
  std::string chakra;
  std::string device;
  int64_t repeats = 20;
  int64_t concurrent = 0;  // 0: not given
  std::string out = "-";
  std::string cluster_out;
  std::string precision = "fp32";
  bool quiet = false;
  LaunchOptions launch;
};

// Measuring threads from `--device cpu` / `cpu:N` and `--concurrent N`.
int64_t parse_cpu_device(const std::string& device, int64_t concurrent) {
  const char* expected = "cpu, or cpu:N for N measuring threads";
  if (device == "cpu") return concurrent > 0 ? concurrent : 1;
  if (!device.starts_with("cpu:")) {
    throw InputError("--device", "'" + device + "' is not a device this profiler measures", expected);
  }
  const std::string count = device.substr(4);
  int64_t n = 0;
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), n);
  if (error != std::errc{} || end != count.data() + count.size() || n < 1) {
    throw InputError("--device", "'" + device + "' does not name a thread count >= 1", expected);
  }
  if (n > max_worker_threads()) {
    throw InputError("--device", "'" + device + "' asks for more threads than this machine runs well",
                     "at most cpu:" + std::to_string(max_worker_threads()) + ", 4 threads per core and never over " +
                         std::to_string(kMaxWorkerThreads));
  }
  if (concurrent > 0 && concurrent != n) {
    throw InputError("--concurrent", std::to_string(concurrent) + " disagrees with --device " + device,
                     "one of them, or the same count in both");
  }
  return n;
}

void run_measured_gpu(const ProfileOptions& o, const Model& model, CommandContext& ctx) {
  const GpuDevice gpu = parse_gpu_device(o.device, "--device");
  for (const int each : gpu.each) check_cuda_device(model, each, "--device");  // every GPU listed, before any runs
  if (o.concurrent > 1) {
    throw InputError("--concurrent", std::to_string(o.concurrent) + " with a GPU",
                     "1: GPU workers are measured alone; cuda:NxW makes W workers for --cluster-out");
  }
  MeasureOptions measure;
  measure.repeats = o.repeats;
  ProgressBar bar(ctx.err, "profiling " + model.name + " on cuda:" + std::to_string(gpu.index), !o.quiet);
  measure.progress = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  const CudaPrecision precision = parse_gpu_precision(o.precision, true);
  const Profile profile =
      measure_cuda_profile(model, o.batch > 0 ? o.batch : model.default_batch, gpu.index, measure, precision);
  bar.finish();
  write_text_output(o.out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
  if (!o.cluster_out.empty()) {
    // A GPU each (cuda:G,H,...): the layers were profiled on the first.
    const Cluster cluster =
        gpu.each.empty()
            ? measure_cuda_workers_cluster(model, profile.batch_size, gpu.index, gpu.workers, measure, precision)
            : measure_cuda_gpus_cluster(model, profile.batch_size, gpu.each, measure, precision);
    write_text_output(o.cluster_out, cluster_to_json(cluster).dump(2) + "\n", ctx.out, "--cluster-out");
  }
}

// The command line of each rank --launcher mpi starts: one measuring thread each.
std::vector<std::string> rank_arguments(const ProfileOptions& o) {
  std::vector<std::string> a{"profile", "--model", o.model, "--device", "cpu", "--repeats", std::to_string(o.repeats),
                             "--out", o.out};
  if (o.batch > 0) a.insert(a.end(), {"--batch", std::to_string(o.batch)});
  if (!o.cluster_out.empty()) a.insert(a.end(), {"--cluster-out", o.cluster_out});
  a.push_back("--progress-lines");
  if (o.quiet) a.push_back("--quiet");
  return a;
}

// A cluster measured by one rank: across MPI its links are measured between
// ranks, and one has none.
InputError one_rank_cluster(const std::string& two_ranks) {
  return InputError("--cluster-out", "is asked of one rank, which has no link to another to measure",
                    "two ranks or more (" + two_ranks + "), or one process without MPI");
}

// Under mpirun: every rank profiles the layers at once (each on one
// thread), then the ranks measure their links and hosts together
// (measure_transport_cluster); rank 0 writes both.
void run_measured_ranks(const ProfileOptions& o, const Model& model, CommandContext& ctx) {
#if defined(TRAINSIM_WITH_MPI)
  MpiSession mpi(nullptr, nullptr);
  if (parse_cpu_device(o.device, o.concurrent) != 1) {
    throw InputError("--device", "is " + o.device + " under mpirun", "cpu: one worker, one measuring thread, per rank");
  }
  if (!o.cluster_out.empty() && mpi.size() < 2) throw one_rank_cluster("mpirun -np 2");
  const bool reports = mpi.rank() == 0;
  MeasureOptions measure;
  measure.repeats = o.repeats;
  measure.concurrent = 1;
  ProgressBar bar(ctx.err, "profiling " + model.name, !o.quiet && reports && !o.launch.progress_lines);
  measure.progress = [&](int64_t done, int64_t total) {
    bar.update(done, total);
    if (o.launch.progress_lines && reports) ctx.err << progress_line(done, total) << '\n' << std::flush;
  };
  const Profile profile = measure_profile(model, o.batch > 0 ? o.batch : model.default_batch, measure);
  bar.finish();
  if (reports) write_text_output(o.out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
  if (o.cluster_out.empty()) return;
  const std::vector<int> host_of = mpi_host_of_ranks();
  MpiTransport transport;
  const Cluster cluster = measure_transport_cluster(transport, mpi.rank(), host_of, probe_options_for(profile));
  if (reports) write_text_output(o.cluster_out, cluster_to_json(cluster).dump(2) + "\n", ctx.out, "--cluster-out");
#else
  (void)o, (void)model, (void)ctx;
  throw InputError("mpirun", "started trainsim, which was built without MPI",
                   "a build with TRAINSIM_WITH_MPI (libopenmpi-dev installed)");
#endif
}

void run_measured(const ProfileOptions& o, CommandContext& ctx) {
  if (o.model.empty()) throw InputError("--model", "is missing", "a model to profile");
  if (o.analytic || !o.pipedream_graph.empty()) {
    throw InputError("--device", "given with --analytic or --import-pipedream", "one source");
  }
  check_launch_options(o.launch);
  if (o.device.starts_with("cuda")) {
    if (o.launch.launcher == "mpi" || under_mpirun()) {  // every rank would measure the GPU at once
      throw InputError("--device", "is a GPU profiled by several processes (--launcher mpi or mpirun)",
                       "one process: its virtual workers (cuda:GxW) or its GPUs (cuda:G,H,...) measured from it");
    }
    return run_measured_gpu(o, load_model(o.model, "--model"), ctx);
  }
  parse_gpu_precision(o.precision, false);
  const int64_t threads = parse_cpu_device(o.device, o.concurrent);
  const Model model = load_model(o.model, "--model");
  if (o.launch.launcher == "mpi") {
    if (!o.cluster_out.empty() && threads < 2) throw one_rank_cluster("--device cpu:2");
    return launch_ranks(o.launch, threads, rank_arguments(o), ctx, "profiling", o.quiet);
  }
  if (under_mpirun()) return run_measured_ranks(o, model, ctx);
  MeasureOptions measure;
  measure.repeats = o.repeats;
  measure.concurrent = threads;
  ProgressBar bar(ctx.err, "profiling " + model.name, !o.quiet);
  measure.progress = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  const Profile profile = measure_profile(model, o.batch > 0 ? o.batch : model.default_batch, measure);
  bar.finish();
  write_text_output(o.out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
  if (!o.cluster_out.empty()) {
    const Cluster cluster = measure_cpu_cluster(threads, probe_options_for(profile));
    write_text_output(o.cluster_out, cluster_to_json(cluster).dump(2) + "\n", ctx.out, "--cluster-out");
  }
}

void run_profile(const ProfileOptions& o, CommandContext& ctx) {
  if (!o.kineto.trace.empty()) {
    for (const auto& [given, flag] :
         {std::pair{!o.device.empty(), "--device"}, std::pair{o.analytic, "--analytic"},
          std::pair{!o.pipedream_graph.empty(), "--import-pipedream"}, std::pair{!o.model.empty(), "--model"}}) {
      if (given) throw InputError(flag, "given with --import-kineto", "one source (--name names the imported model)");
    }
    KinetoCliOptions kineto = o.kineto;
    kineto.batch = o.batch;
    kineto.out = o.out;
    kineto.cluster_out = o.cluster_out;
    return run_kineto_import(kineto, ctx);
  }
  if (!o.chakra.empty()) {
    for (const auto& [given, flag] :
         {std::pair{!o.device.empty(), "--device"}, std::pair{o.analytic, "--analytic"},
          std::pair{!o.pipedream_graph.empty(), "--import-pipedream"}, std::pair{!o.model.empty(), "--model"}}) {
      if (given) throw InputError(flag, "given with --import-chakra", "one source (--name names the imported model)");
    }
    const Profile profile = read_chakra_profile(o.chakra, o.batch, o.kineto.name);
    return write_text_output(o.out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
  }
  for (const auto& [given, flag] :
       {std::pair{o.kineto.summary, "--summary"}, std::pair{!o.kineto.name.empty(), "--name"},
        std::pair{o.kineto.granularity != "auto", "--granularity"}}) {
    if (given) throw InputError(flag, "given without --import-kineto", "--import-kineto TRACE.json[.gz]");
  }
  if (!o.device.empty()) return run_measured(o, ctx);
  if (!o.cluster_out.empty()) throw InputError("--cluster-out", "given without --device", "--device cpu[:N]");
  Profile profile;
  if (!o.pipedream_graph.empty()) {
    if (o.analytic) throw InputError("--import-pipedream", "given with --analytic", "one source");
    profile = import_pipedream_graph(o.pipedream_graph, o.batch > 0 ? std::optional<int64_t>(o.batch) : std::nullopt);
  } else if (o.analytic) {
    if (o.model.empty()) throw InputError("--model", "is missing", "a model to profile");
    if (o.cluster.empty()) throw InputError("--cluster", "is missing", "the cluster whose device to model");
    const Model model = load_model(o.model, "--model");
    const Cluster cluster = load_cluster(o.cluster, "--cluster");
    profile = analytic_profile(model, o.batch > 0 ? o.batch : model.default_batch, cluster);
  } else {
    throw InputError("profile", "no source given",
                     "--device cpu --model M, --analytic --model M --cluster C, or --import-pipedream GRAPH.txt");
  }
  write_text_output(o.out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
}

}  // namespace

void add_profile_command(CLI::App& app, CommandContext& ctx) {
  auto opts = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand("profile", "Write a per-layer profile (trainsim.profile/1)");
  cmd->add_option("--model", opts->model, "Zoo model id or model JSON file");
  cmd->add_option("--batch", opts->batch, "Batch size (default: the model's; for imports, inferred)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", opts->device,
                  "Measure here: cpu, cpu:N (N threads measuring at once; with --launcher mpi, N ranks), cuda, "
                  "cuda:N or cuda:NxW (GPU N; W workers sharing it in --cluster-out), cuda:G,H,... (the "
                  "layers on GPU G; in --cluster-out a worker on each GPU)");
  cmd->add_option("--repeats", opts->repeats, "Timed runs per layer with --device (the median is kept)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--concurrent", opts->concurrent, "Threads measuring at once with --device cpu (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
      "--cluster-out", opts->cluster_out,
      "With --device: also write the measured cluster JSON here; with --import-kineto, the trace's machine");
  cmd->add_option("--precision", opts->precision,
                  "fp32, or with --device cuda tf32 (cuBLAS and cuDNN on TF32 tensor cores, as PyTorch's "
                  "allow_tf32) or bf16 (cuBLAS's products on bfloat16-rounded inputs with fp32 sums; cuDNN's as "
                  "tf32)")
      ->capture_default_str();
  cmd->add_flag("--analytic", opts->analytic, "Estimate each layer by a roofline on the cluster's device");
  cmd->add_option("--cluster", opts->cluster, "Preset or cluster file whose device the estimate is for");
  cmd->add_option("--import-pipedream", opts->pipedream_graph, "Import a PipeDream profiler graph.txt");
  cmd->add_option("--import-kineto", opts->kineto.trace,
                  "Import a PyTorch profiler (Kineto) trace, .json or .json.gz (docs/importing-pytorch.md)");
  cmd->add_option("--granularity", opts->kineto.granularity,
                  "With --import-kineto: module (a layer a leaf nn.Module span), layer (a layer from each op with "
                  "weights), op (each outermost forward op), auto (module where the trace has module spans, else "
                  "layer) or N (those merged into N layers of about equal time)")
      ->capture_default_str();
  cmd->add_option("--import-chakra", opts->chakra,
                  "Import one rank's Chakra execution trace (.et) of another tool, as PyTorch's converted by Chakra "
                  "(needs --batch)");
  cmd->add_option("--name", opts->kineto.name,
                  "With --import-kineto or --import-chakra: the model's name (default: the file's)");
  cmd->add_flag("--summary", opts->kineto.summary,
                "With --import-kineto: print what the trace measured (steps, GPU busy and idle, communication and "
                "its overlap, host-bound or not); the profile is written only with --out FILE");
  cmd->add_option("--out", opts->out, "Where to write the profile JSON ('-' for standard output)")
      ->capture_default_str();
  cmd->add_flag("--quiet", opts->quiet, "No progress bar");
  add_launch_options(*cmd, opts->launch);
  cmd->callback([&ctx, opts] { ctx.action = [&ctx, opts] { run_profile(*opts, ctx); }; });
}

}  // namespace trainsim
