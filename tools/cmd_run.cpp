// `trainsim run`: trains a model with one strategy for real on this machine's
// CPU threads or GPU workers (the plan interpreter), and reports the iteration time, the
// losses and the test accuracy (trainsim.run/1). Started by mpirun, or with
// --launcher mpi starting mpirun itself, each rank runs one worker and the
// workers talk over MPI; rank 0 reports.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "exec/data/fashion_mnist.hpp"
#include "exec/data/fortunes_text.hpp"
#include "exec/training.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/commands.hpp"
#include "tools/mpi_launch.hpp"
#include "tools/progress.hpp"

#if defined(TRAINSIM_WITH_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

namespace trainsim {
namespace {

// Each GPU worker's most device memory held, beside its share of the GPU
// (a worker of another process, whose figure stays there, said to be so);
// empty where no worker counted it.
std::string memory_line(const std::vector<Device::MemoryUse>& memory) {
  std::string line;
  bool elsewhere = false;
  for (size_t w = 0; w < memory.size(); ++w) {
    if (memory[w].peak_bytes < 0) {
      elsewhere = true;
      continue;
    }
    line += (line.empty() ? "" : ", ") + std::string("worker ") + std::to_string(w) + " " +
            format_bytes(static_cast<double>(memory[w].peak_bytes)) +
            (memory[w].limit_bytes >= 0 ? " of its " + format_bytes(static_cast<double>(memory[w].limit_bytes)) : "");
  }
  if (line.empty()) return line;
  return "device memory held at most: " + line + (elsewhere ? " (the other workers' in their own processes)" : "") +
         "\n";
}

struct RunOptions {
  std::string model;
  std::string strategy;
  std::vector<std::string> settings;
  std::string devices = "cpu:1";
  std::string precision = "fp32";
  std::string dataset;
  std::string data_dir;  // empty: kFashionMnistDir
  int64_t batch = 0;
  int32_t iterations = 0;
  int32_t epochs = 1;
  uint64_t seed = 1;
  double learning_rate = 0.05;
  double momentum = 0.9;
  std::string trace;
  std::string metrics;
  std::string json;
  bool quiet = false;
  bool no_evaluate = false;  // the final weights not scored on the test set
  std::string profile;     // plan from this measured profile (default: analytic, on the nominal cluster)
  std::string cluster;     // plan for this cluster (default: nominal_cpu_cluster of --devices, on the ranks' hosts)
  std::string checkpoint;  // a directory
  int32_t checkpoint_every = 0;
  std::string resume;      // a directory
  LaunchOptions launch;
};

std::string exact(double v) {
  std::ostringstream text;
  text << std::setprecision(std::numeric_limits<double>::max_digits10) << v;
  return text.str();
}

// The command line of each rank --launcher mpi starts: these options, with
// progress reported as lines.
std::vector<std::string> rank_arguments(const RunOptions& o) {
  std::vector<std::string> a{"run", "--model", o.model, "--strategy", o.strategy, "--devices", o.devices};
  for (const std::string& s : o.settings) a.insert(a.end(), {"--set", s});
  const auto add = [&a](const char* flag, const std::string& value) {
    if (!value.empty()) a.insert(a.end(), {flag, value});
  };
  add("--dataset", o.dataset);
  add("--data-dir", o.data_dir);
  if (o.batch > 0) add("--batch", std::to_string(o.batch));
  if (o.iterations > 0) {
    add("--iterations", std::to_string(o.iterations));
  } else {
    add("--epochs", std::to_string(o.epochs));
  }
  add("--seed", std::to_string(o.seed));
  add("--precision", o.precision);
  add("--learning-rate", exact(o.learning_rate));
  add("--momentum", exact(o.momentum));
  add("--trace", o.trace);
  add("--metrics", o.metrics);
  add("--json", o.json);
  add("--profile", o.profile);
  add("--cluster", o.cluster);
  add("--checkpoint", o.checkpoint);
  if (o.checkpoint_every > 0) add("--checkpoint-every", std::to_string(o.checkpoint_every));
  add("--resume", o.resume);
  a.push_back("--progress-lines");
  if (o.quiet) a.push_back("--quiet");
  if (o.no_evaluate) a.push_back("--no-evaluate");
  return a;
}

void write_metrics(const std::string& path, const TrainingResult& r, std::ostream& standard_output) {
  std::ostringstream csv;
  csv << "iteration,epoch,loss,end_s\n";
  // A resumed run timed only the iterations after its checkpoint: end_s is empty before them.
  const size_t timed_from = r.exec.loss_per_iteration.size() - r.exec.iteration_end_s.size();
  for (size_t i = 0; i < r.exec.loss_per_iteration.size(); ++i) {
    csv << i << ',' << static_cast<int64_t>(i) / std::max(1, r.iterations_per_epoch) << ','
        << r.exec.loss_per_iteration[i] << ',';
    if (i >= timed_from) csv << r.exec.iteration_end_s[i - timed_from];
    csv << '\n';
  }
  write_text_output(path, csv.str(), standard_output, "--metrics");
}

// A run whose loss became NaN or infinite has diverged: its weights, losses
// and accuracy mean nothing, so it stops there, nothing is written and the
// run fails (exit 1).
[[noreturn]] void diverged(const LossDiverged& e, double learning_rate) {
  throw std::runtime_error(std::string(e.what()) + " with --learning-rate " + format_number(learning_rate) +
                           "; try a smaller --learning-rate");
}

void run_training(const RunOptions& o, CommandContext& ctx) {
  if (o.model.empty()) throw InputError("--model", "is missing", "a zoo model to train");
  if (o.strategy.empty()) throw InputError("--strategy", "is missing", "a strategy id");
  if (!std::isfinite(o.learning_rate) || o.learning_rate <= 0) {
    throw InputError("--learning-rate", "is " + format_number(o.learning_rate), "a finite number > 0");
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    throw InputError("--momentum", "is " + format_number(o.momentum), "a number in [0, 1)");
  }
  check_launch_options(o.launch);
  if (o.checkpoint.empty() != (o.checkpoint_every == 0)) {
    throw InputError(o.checkpoint.empty() ? "--checkpoint-every" : "--checkpoint", "is given alone",
                     "--checkpoint DIR with --checkpoint-every N");
  }
  const Model model = load_model(o.model, "--model");
  const WorkerDevices devices = parse_worker_devices(o.devices);
  const CudaPrecision precision = parse_gpu_precision(o.precision, devices.gpu.has_value());
  const int64_t workers = devices.workers;
  Cluster cluster = o.cluster.empty() ? nominal_cpu_cluster(workers) : load_cluster(o.cluster, "--cluster");
  if (device_count(cluster) != workers) {
    throw InputError("--cluster", cluster.name + " has " + std::to_string(device_count(cluster)) + " devices",
                     "a cluster of the " + std::to_string(workers) + " workers --devices " + o.devices + " runs");
  }
  std::optional<Profile> profile;
  if (!o.profile.empty()) {
    profile = read_profile_file(o.profile);
    if (profile->model != model.name || profile->layers.size() != model.layers.size()) {
      throw InputError("--profile", o.profile + " profiles " + profile->model + " (" +
                                        std::to_string(profile->layers.size()) + " layers)",
                       "a profile of " + model.name + " (" + std::to_string(model.layers.size()) + " layers)");
    }
    if (o.batch > 0 && o.batch != profile->batch_size) {
      throw InputError("--batch", "is " + std::to_string(o.batch) + ", the profile's " +
                                      std::to_string(profile->batch_size),
                       "no --batch with --profile, or the profile's");
    }
  }
  StrategyConfig config;
  for (const std::string& text : o.settings) {
    const Setting s = parse_setting(text, "--set");
    config.set(s.key, s.value, s.where);
  }
  std::vector<int> gpus;  // each GPU named: one each (cuda:G0,G1,...), or the one all share (cuda:GxW)
  if (devices.gpu) gpus = devices.gpu->each.empty() ? std::vector<int>{devices.gpu->index} : devices.gpu->each;
  if (o.launch.launcher == "mpi") {
    // The strategy and its settings checked once here: every rank would
    // refuse them alike, amid mpirun's banners.
    const int64_t batch = profile ? profile->batch_size : (o.batch > 0 ? o.batch : model.default_batch);
    generate_plan(find_strategy(o.strategy, "--strategy"), profile ? *profile : analytic_profile(model, batch, cluster),
                  cluster, config, 1);
    // Every rank on this computer (no hosts given; an emulated cluster's are namespaces): its
    // GPUs checked here too, without taking a context on them for the run's length.
    if (o.launch.hosts.empty() && o.launch.hostfile.empty()) {
      for (const int gpu : gpus) check_cuda_device(model, gpu, "--devices", /*select=*/false);
    }
    return launch_ranks(o.launch, workers, rank_arguments(o), ctx, "training", o.quiet);
  }
#if defined(TRAINSIM_WITH_MPI)
  // Made before `options`, so what its transports keep (NCCL's member) goes
  // before MPI does.
  std::unique_ptr<MpiSession> mpi;
#endif
  TrainingOptions options;
  options.evaluate = !o.no_evaluate;
  std::vector<int> gpu_of_worker;  // each worker's GPU: one each (cuda:G0,G1,...), or all on one (cuda:GxW)
  if (devices.gpu) {
    gpu_of_worker =
        devices.gpu->each.empty() ? std::vector<int>(static_cast<size_t>(workers), devices.gpu->index) : gpus;
    options.make_device = [&model, gpu_of_worker, precision, gpu = *devices.gpu](int32_t worker) {
      return make_cuda_device(model, gpu_of_worker.at(static_cast<size_t>(worker)), precision,
                              gpu_worker_budget(gpu, worker));
    };
    options.time_device_work = !o.trace.empty();  // the trace shows the kernels' time beside the host's
    // Checked before the data loads; under mpirun (a rank per worker, its
    // messages and collectives over MPI on the host) each rank checks its
    // own GPU once it knows its rank.
    if (!under_mpirun()) {
      for (const int gpu : gpus) check_cuda_device(model, gpu, "--devices");
    }
    // A GPU each, the library AllReduce by NCCL where it opens (else none:
    // algorithm=mpi is refused, the other algorithms run on the host).
    if (!under_mpirun() && !devices.gpu->each.empty()) {
      options.make_transport = gpu_each_transports(gpus);  // its checks, before the data loads
    }
  }
  const Dataset data = load_dataset(o.dataset, model, o.data_dir);
  bool reports = true;  // rank 0 of a shared run, or the only process
#if defined(TRAINSIM_WITH_MPI)
  if (under_mpirun()) {
    mpi = std::make_unique<MpiSession>(nullptr, nullptr);
    if (mpi->size() != workers) {
      throw InputError(
          "--devices", "is " + o.devices + " under mpirun with " + std::to_string(mpi->size()) + " ranks",
          "cpu:" + std::to_string(mpi->size()) + " or cuda:Gx" + std::to_string(mpi->size()) + ", one worker per rank");
    }
    if (devices.gpu) check_cuda_device(model, gpu_of_worker.at(static_cast<size_t>(mpi->rank())), "--devices");
    if (const std::string note = bound_rank_note(workers); mpi->rank() == 0 && !note.empty()) {
      ctx.err << note << "\n" << std::flush;
    }
    options.local_endpoints = {mpi->rank()};
    const std::vector<int> host_of = mpi_host_of_ranks();
    if (devices.gpu) {  // this rank's share of its GPU: the ranks of its host on the same GPU share it
      const auto rank = static_cast<size_t>(mpi->rank());
      int64_t sharing = 0;
      for (size_t r = 0; r < host_of.size(); ++r) {
        sharing += host_of[r] == host_of[rank] && gpu_of_worker.at(r) == gpu_of_worker.at(rank) ? 1 : 0;
      }
      options.make_device = [&model, gpu_of_worker, precision, gpu = *devices.gpu, sharing](int32_t worker) {
        return make_cuda_device(model, gpu_of_worker.at(static_cast<size_t>(worker)), precision,
                                gpu_worker_budget(gpu, worker, sharing));
      };
    }
    // A GPU each (no two ranks of a host on one) and NCCL on every rank: the
    // library AllReduce by NCCL between the GPUs; otherwise MPI's on the
    // host, every rank alike.
    int nccl_gpu = -1;
    if (devices.gpu && one_rank_per_gpu(gpu_of_worker, host_of)) {
      const std::string unopened = nccl_library_error();
      const std::vector<double> opened = mpi_all_gather(unopened.empty() ? 1.0 : 0.0);
      if (std::all_of(opened.begin(), opened.end(), [](double v) { return v == 1.0; })) {
        nccl_gpu = gpu_of_worker.at(static_cast<size_t>(mpi->rank()));
      } else if (mpi->rank() == 0) {
        ctx.err << "trainsim: note: NCCL could not be opened on every rank"
                << (unopened.empty() ? "" : " (rank 0: " + unopened + ")")
                << "; the ranks' library AllReduce goes over MPI on the host\n"
                << std::flush;
      }
    }
    // One member for the run: each stretch between checkpoints makes a
    // transport of the same ranks, and NCCL's communicator is made once.
    auto member = std::make_shared<std::shared_ptr<LibraryMember>>();
    options.make_transport = [nccl_gpu, member](int endpoints) {
      std::unique_ptr<MpiTransport> transport = MpiTransport::for_endpoints(endpoints);
      if (transport && nccl_gpu >= 0) {
        if (*member == nullptr) *member = make_nccl_rank_member(nccl_gpu, transport->rank(), transport->workers());
        transport->sum_library_by(*member);
      }
      return transport;
    };
    reports = mpi->rank() == 0;
    if (o.cluster.empty()) {  // plan for the machines the ranks run on (a Parallax server on each, ...)
      cluster = nominal_cpu_cluster(workers, host_of);
      const bool hosts = std::any_of(host_of.begin(), host_of.end(), [](int h) { return h > 0; });
      if (hosts && cluster.machines == 1 && reports) {
        ctx.err << "trainsim: warning: the ranks do not fill their hosts in rank order, the same number on each; "
                   "the plan takes them as one machine (give --cluster for another layout)\n"
                << std::flush;
      }
    }
  }
#else
  if (under_mpirun()) {
    throw InputError("mpirun", "started trainsim, which was built without MPI",
                     "a build with TRAINSIM_WITH_MPI (libopenmpi-dev installed)");
  }
#endif
  options.strategy = o.strategy;
  options.batch_size = profile ? profile->batch_size : o.batch;
  options.iterations = o.iterations;
  options.epochs = o.epochs;
  options.seed = o.seed;
  options.sgd = {o.learning_rate, o.momentum, 0.0};
  ProgressBar bar(ctx.err, "training", !o.quiet && reports && !o.launch.progress_lines);
  auto last_line = std::chrono::steady_clock::now() - std::chrono::hours(1);
  options.on_iteration = [&](int32_t i, int32_t n) {
    bar.update(i + 1, n);
    // The launcher's progress and the iteration it names when a rank is
    // lost: a line at most every 0.1 s, and the last one.
    const auto now = std::chrono::steady_clock::now();
    if (o.launch.progress_lines && reports && (now - last_line > std::chrono::milliseconds(100) || i + 1 == n)) {
      ctx.err << progress_line(i + 1, n) << '\n' << std::flush;
      last_line = now;
    }
  };
  // Stale gradients with momentum: one line before training when unstable (docs/results.md).
  options.on_stale_gradients = [&](const StaleMomentumCheck& check) {
    const std::string warning = stale_momentum_warning(check, o.strategy);
    if (!warning.empty() && reports) ctx.err << warning << "\n" << std::flush;
  };
  options.stop_on_divergence = true;
  // Checkpoints: what a resumed run must share with the one that wrote them
  // (not --checkpoint-every: stretches of another length drain elsewhere).
  nlohmann::json identity = {
      {"model", model.name},   {"strategy", o.strategy}, {"settings", o.settings}, {"devices", o.devices},
      {"batch", o.batch},      {"seed", o.seed},         {"dataset", data.name},   {"learning_rate", o.learning_rate},
      {"momentum", o.momentum}};
  if (precision != CudaPrecision::fast) identity["precision"] = o.precision;  // fp32 checkpoints keep their identity
  Checkpoint resume;
  if (!o.resume.empty()) {
    resume = read_checkpoint(o.resume);
    check_same_run(resume, identity);
    options.resume = &resume;
  }
  if (!o.checkpoint.empty()) {
    options.checkpoint_every = o.checkpoint_every;
    options.on_checkpoint = [&](const Checkpoint& c) {
      if (!reports) return;  // across MPI processes rank 0 holds every worker's state and writes it
      Checkpoint named = c;
      named.identity = identity;
      write_checkpoint(o.checkpoint, named);
    };
  }
  TrainingResult r;
  try {
    r = train(model, data, cluster, config, options, profile ? &*profile : nullptr);
  } catch (const LossDiverged& e) {
    bar.finish();
    diverged(e, o.learning_rate);
  }
  bar.finish();
  if (!reports) return;  // rank 0 writes what the run gathered

  if (!o.trace.empty()) write_text_output(o.trace, exec_chrome_trace(r.plan, r.exec).dump() + "\n", ctx.out, "--trace");
  if (!o.metrics.empty()) write_metrics(o.metrics, r, ctx.out);
  if (!o.json.empty()) {
    nlohmann::json j = training_to_json(r, model.name, o.devices, o.trace, o.seed);
    j["dataset"] = data.name;
    j["precision"] = o.precision;
    write_text_output(o.json, j.dump(2) + "\n", ctx.out, "--json");
  }
  if (!o.quiet && o.json != "-") {
    ctx.out << r.plan.strategy << " on " << model.name << " (" << data.name << "), " << o.devices << ", batch "
            << r.profile.batch_size << " per device: " << r.exec.loss_per_iteration.size() << " iterations"
            << (o.resume.empty() ? "" : " (" + std::to_string(resume.next_iteration) + " before --resume)") << "\n"
            << "iteration " << format_seconds(r.iteration.median_s) << " median (min "
            << format_seconds(r.iteration.min_s) << ", max " << format_seconds(r.iteration.max_s) << "), "
            << format_count(r.samples_per_s) << " samples/s\n"
            << "train loss " << r.train_loss.back() << " (last epoch), ";
    if (o.no_evaluate) {
      ctx.out << "test accuracy not measured (--no-evaluate)\n";
    } else {
      ctx.out << "test accuracy " << r.test_accuracy << "\n";
    }
    ctx.out << memory_line(r.exec.memory);
  }
}

}  // namespace

void add_run_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Train a model with one strategy for real on CPU threads or a GPU, or one process per worker over MPI");
  cmd->add_option("--model", o->model, "Zoo model id or model JSON file (of layers the CPU executor has kernels for)");
  cmd->add_option("--strategy", o->strategy, "Strategy id (see trainsim predict --help)");
  cmd->add_option("--set", o->settings, "Strategy setting key=value (repeatable)");
  cmd->add_option(
         "--devices", o->devices,
         "cpu:N (N worker threads), or cuda, cuda:G or cuda:GxW (W workers sharing GPU G, each with a W-th of its "
         "memory; every worker's "
         "forwards, backwards, gradient sums and SGD steps on the GPU, its messages on the host), or "
         "cuda:G,H,... (a worker on each GPU listed; in one process, --set algorithm=mpi: the library "
         "AllReduce, NCCL's); with --launcher mpi or under mpirun, one worker per rank (cuda:GxN: every "
         "rank's on GPU G), its messages and collectives over MPI")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "fp32, or with --devices cuda tf32 (cuBLAS and cuDNN on TF32 tensor cores, as PyTorch's "
                  "allow_tf32) or bf16 (cuBLAS's products on bfloat16-rounded inputs with fp32 sums; cuDNN's as "
                  "tf32)")
      ->capture_default_str();
  cmd->add_option("--dataset", o->dataset, kDatasetHelp);
  cmd->add_option("--data-dir", o->data_dir,
                  "Folder holding Fashion-MNIST's IDX files (default: " + std::string(kFashionMnistDir) +
                      ") or the fortune files (default: " + std::string(kFortunesDir) + ")");
  cmd->add_option("--batch", o->batch, "Per-device batch size (default: the model's)")->check(CLI::PositiveNumber);
  auto* iterations = cmd->add_option("--iterations", o->iterations, "Mini-batches to train")
                         ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--epochs", o->epochs, "Epochs of the training set (without --iterations)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str()
      ->excludes(iterations);
  cmd->add_option("--seed", o->seed, "Seed of the weights and the shuffling")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--learning-rate", o->learning_rate, "SGD learning rate")->capture_default_str();
  cmd->add_option("--momentum", o->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--trace", o->trace, "Write the Chrome trace of the run here");
  cmd->add_option("--metrics", o->metrics, "Write per-iteration loss and time (CSV) here");
  cmd->add_option("--json", o->json, "Write the trainsim.run/1 summary here ('-' for standard output)");
  cmd->add_flag("--quiet", o->quiet, "No progress bar and no summary");
  cmd->add_flag("--no-evaluate", o->no_evaluate,
                "Do not score the final weights on the test set (a forward of it on this machine's CPU, seconds "
                "for a timing run); test_accuracy is then null");
  cmd->add_option("--profile", o->profile,
                  "Plan from this measured profile of the model (trainsim profile --device cpu; default: the "
                  "analytic one), as validate and predict price it");
  cmd->add_option("--cluster", o->cluster,
                  "Plan for this cluster (trainsim profile --cluster-out, or a preset) of --devices' workers "
                  "(default: nominal figures of this machine; across MPI ranks, of the machines they run on)");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Write a checkpoint into this directory every --checkpoint-every iterations (DIR/checkpoint, "
                  "replaced atomically)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every,
                  "Iterations between checkpoints; the plan drains at each (a pipeline's bubble), and --trace "
                  "shows the last stretch")
      ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--resume", o->resume,
                  "Go on from the checkpoint in this directory: the same command that wrote it, --iterations "
                  "(or --epochs) as long or longer");
  add_launch_options(*cmd, o->launch);
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_training(*o, ctx); }; });
}

}  // namespace trainsim
