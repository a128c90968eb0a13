// `trainsim profile --import-kineto TRACE`: a PyTorch profiler trace as a
// profile (profiles/kineto/kineto_import.hpp), the machine it ran on as a
// cluster, and with --summary what the trace measured.
#include <algorithm>
#include <ostream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/kineto/kineto_import.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

std::string share(double part, double whole) { return whole > 0 ? format_percent(part / whole) : "-"; }

// The trace's own strategy on its own machine (DDP's bucketed all-reduce
// beside the backward over its world size, else one device), predicted
// from the imported layers beside what the trace measured.
void print_check(const KinetoTrace& trace, const KinetoImport& r, std::ostream& out) {
  const bool ddp = trace.world_size > 1;
  StrategyConfig config;
  if (ddp) config.set("bucket_bytes", "25MB", "the trace's DDP");
  const Prediction p = predict_strategy(find_strategy(ddp ? "dp-overlap" : "single", "the trace"), r.profile,
                                        kineto_cluster(trace, r), config);
  const KinetoStep& m = r.median;
  TextTable t;
  t.header = {"", "step", "compute", "exposed communication", "idle"};
  t.right_aligned = {false, true, true, true, true};
  const std::string how = ddp ? "dp-overlap, 25 MB buckets, " + std::to_string(trace.world_size) + " GPUs" : "single";
  t.rows = {{"measured (the trace)", format_seconds(m.step_s), format_seconds(m.compute_s),
             format_seconds(m.comm_s - m.overlap_s), format_seconds(std::max(0.0, m.step_s - m.gpu_busy_s))},
            {"predicted: " + how, format_seconds(p.iteration_s), format_seconds(p.breakdown.compute_s),
             format_seconds(p.breakdown.exposed_comm_s),
             format_seconds(p.breakdown.idle_transfer_s + p.breakdown.idle_imbalance_s)}};
  out << "its own strategy predicted from these layers on its machine (" << format_percent(p.iteration_s / m.step_s - 1)
      << " from the measured step):\n";
  print_aligned(out, t);
}

void print_summary(const KinetoTrace& trace, const KinetoImport& r, const std::string& granularity, std::ostream& out) {
  const KinetoStep& m = r.median;
  int64_t analysed = 0;
  double shortest = 1e300, longest = 0;
  for (const KinetoStep& s : r.steps) {
    if (!s.analysed) continue;
    ++analysed;
    shortest = std::min(shortest, s.step_s);
    longest = std::max(longest, s.step_s);
  }
  out << trace.path << ": " << (trace.device_name.empty() ? r.profile.device.name : trace.device_name)
      << ", world size " << trace.world_size << (trace.backend.empty() ? "" : " (" + trace.backend + ")") << ", "
      << (trace.legacy ? "the 2021 schema" : "the current schema") << "; " << r.steps.size() << " steps, " << analysed
      << " analysed\n";
  TextTable t;
  t.header = {"a step (median)", "time", "share", "what"};
  t.right_aligned = {false, true, true, false};
  t.rows = {
      {"step", format_seconds(m.step_s), "100%",
       "the ProfilerStep span (" + format_seconds(shortest) + " to " + format_seconds(longest) + ")"},
      {"GPU busy", format_seconds(m.gpu_busy_s), share(m.gpu_busy_s, m.step_s), "any kernel, copy or set running"},
      {"compute", format_seconds(m.compute_s), share(m.compute_s, m.step_s), "kernels, copies and sets but NCCL's"},
      {"communication", format_seconds(m.comm_s), share(m.comm_s, m.step_s),
       "NCCL's kernels, " + format_seconds(m.overlap_s) + " of it beside compute"},
      {"exposed communication", format_seconds(m.comm_s - m.overlap_s), share(m.comm_s - m.overlap_s, m.step_s),
       "NCCL with no compute beside it"},
      {"GPU idle", format_seconds(std::max(0.0, m.step_s - m.gpu_busy_s)),
       share(std::max(0.0, m.step_s - m.gpu_busy_s), m.step_s), "the host's: launches, Python, the data loader"},
      {"data loader", format_seconds(m.data_loader_s), share(m.data_loader_s, m.step_s),
       "enumerate(DataLoader) on the host"},
  };
  print_aligned(out, t);
  out << "GPU time by phase: forward " << format_seconds(m.forward_s) << ", backward " << format_seconds(m.backward_s)
      << ", optimizer " << format_seconds(m.optimizer_s) << ", outside any op " << format_seconds(m.other_s) << "\n";
  const auto plural = [](size_t n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (r.gradient_bytes > 0) {
    const auto first = std::find_if(r.steps.begin(), r.steps.end(), [](const KinetoStep& s) { return s.analysed; });
    out << "all-reduced a step: " << format_bytes(r.gradient_bytes) << " in "
        << plural(first->all_reduce_bytes.size(), "all-reduce") << ", " << format_bytes(r.all_reduce_bytes_per_s)
        << "/s over their kernels' time\n";
  }
  double layers_s = 0;
  size_t layers = 0;
  for (const LayerProfile& l : r.profile.layers) {
    if (l.name == "dataloader") continue;
    layers_s += l.forward_s + l.backward_s + l.update_s.value_or(0);
    ++layers;
  }
  out << plural(layers, "layer") << " (--granularity " << granularity << ")"
      << (layers < r.profile.layers.size() ? " after the data loader's" : "") << ", batch "
      << (r.batch_known ? std::to_string(r.profile.batch_size) : "not recorded")
      << ": forward, backward and update sum to " << format_seconds(layers_s) << ", " << share(layers_s, m.compute_s)
      << " of the GPU's compute time\n";
  print_check(trace, r, out);
  out << (r.host_bound
              ? "host-bound: the GPU idles " + share(m.step_s - m.gpu_busy_s, m.step_s) + " of the step; " +
                    (m.data_loader_s > 0 ? "the data loader's " + format_seconds(m.data_loader_s) +
                                               " is a layer, the rest of the host's work (launches, Python) none"
                                         : "no layer prices the host's work (launches, Python)")
              : "GPU-bound: the GPU idles " + share(std::max(0.0, m.step_s - m.gpu_busy_s), m.step_s) + " of the step")
      << "\n";
  for (const std::string& note : r.notes) out << "note: " << note << "\n";
}

}  // namespace

void run_kineto_import(const KinetoCliOptions& o, CommandContext& ctx) {
  const KinetoTrace trace = read_kineto_trace(o.trace);
  const KinetoImport imported = import_kineto(trace, {o.granularity, o.batch, o.name});
  if (o.out != "-" || !o.summary) {
    if (!imported.batch_known) {
      throw InputError("--batch", "is needed: " + o.trace + " records no input shapes",
                       "the batch of the traced steps, or a trace recorded with record_shapes=True");
    }
    write_text_output(o.out, profile_to_json(imported.profile).dump(2) + "\n", ctx.out, "--out");
  }
  if (!o.cluster_out.empty()) {
    write_text_output(o.cluster_out, cluster_to_json(kineto_cluster(trace, imported)).dump(2) + "\n", ctx.out,
                      "--cluster-out");
  }
  if (o.summary) return print_summary(trace, imported, o.granularity, ctx.out);
  for (const std::string& note : imported.notes) ctx.err << "trainsim: note: " << note << "\n";
  if (imported.host_bound) {
    ctx.err << "trainsim: note: host-bound: the GPU idles "
            << share(imported.median.step_s - imported.median.gpu_busy_s, imported.median.step_s)
            << " of the step (--summary says where)\n";
  }
}

}  // namespace trainsim
