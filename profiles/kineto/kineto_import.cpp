// A Kineto trace's steps grouped into a profile's layers (kineto_import.hpp).
#include "profiles/kineto/kineto_import.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/kineto/kineto_steps.hpp"

namespace trainsim {
namespace {

using kineto_detail::ForwardUnit;
using kineto_detail::StepUnits;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string base_name(const std::string& op) {
  const size_t colon = op.rfind("::");
  std::string base = colon == std::string::npos ? op : op.substr(colon + 2);
  std::replace(base.begin(), base.end(), ' ', '_');
  return base;
}

// The forward's units in groups, each a layer: see KinetoImportOptions.
std::vector<std::vector<size_t>> group_units(const KinetoTrace& t, const StepUnits& reference,
                                             const std::string& granularity, const std::vector<double>& unit_us,
                                             std::vector<std::string>& notes, bool& by_module) {
  std::vector<std::vector<size_t>> groups;
  const std::vector<ForwardUnit>& units = reference.forward;
  by_module = granularity == "module" ||
              (granularity != "op" && granularity != "layer" &&
               std::any_of(units.begin(), units.end(), [](const ForwardUnit& u) { return u.module >= 0; }));
  bool weighted = false;  // whether the last layer has an op with weights yet
  int64_t module = -1;    // the last layer's module
  for (size_t u = 0; u < units.size(); ++u) {
    const bool weights = kineto_detail::has_weights(t.names[units[u].name]);
    const int64_t m = units[u].module;
    const bool starts = by_module ? m >= 0 && m != module && module >= 0 : granularity == "op" || (weights && weighted);
    if (groups.empty() || starts) {
      groups.push_back({u});
      weighted = weights;
      module = m;
    } else {  // joins the layer before (those before the first, the first)
      groups.back().push_back(u);
      weighted = weighted || weights;
      if (module < 0) module = m;
    }
  }
  if (by_module && granularity != "module" && granularity != "auto") {
    notes.push_back("layers from the trace's nn.Module spans, merged into --granularity " + granularity);
  }
  if (granularity == "op" || granularity == "layer" || granularity == "module" || granularity == "auto") {
    return groups;
  }
  const auto wanted = static_cast<size_t>(std::strtoll(granularity.c_str(), nullptr, 10));
  if (wanted >= groups.size()) {
    notes.push_back("--granularity " + granularity + ": the forward has only " + std::to_string(groups.size()) +
                    " layers; kept them");
    return groups;
  }
  double total = 0;
  for (const double us : unit_us) total += us;
  std::vector<std::vector<size_t>> merged(1);
  double done = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    double us = 0;
    for (const size_t u : groups[g]) us += unit_us[u];
    const size_t left = groups.size() - g;       // groups still to place, this one included
    const size_t open = wanted - merged.size();  // merged layers still to start after this one
    if (!merged.back().empty() && open > 0 &&
        (done + us / 2 > total * static_cast<double>(merged.size()) / static_cast<double>(wanted) || left == open)) {
      merged.emplace_back();
    }
    merged.back().insert(merged.back().end(), groups[g].begin(), groups[g].end());
    done += us;
  }
  return merged;
}

void check_granularity(const std::string& g) {
  if (g == "op" || g == "layer" || g == "module" || g == "auto") return;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(g.c_str(), &end, 10);
  if (g.empty() || *end != '\0' || n < 1 || errno == ERANGE) {
    throw InputError("--granularity", "'" + g + "'", "auto, module, layer, op, or a number of layers (1 or more)");
  }
}

const KinetoInput* first_tensor(const KinetoTrace& t, const KinetoEvent& e) {
  if (e.inputs >= t.inputs.size()) return nullptr;
  for (const KinetoInput& in : t.inputs[e.inputs]) {
    if (!in.dims.empty() && in.element_bytes > 0) return &in;
  }
  return nullptr;
}

}  // namespace

KinetoImport import_kineto(const KinetoTrace& t, const KinetoImportOptions& o) {
  check_granularity(o.granularity);
  const kineto_detail::TraceSteps traced = kineto_detail::trace_steps(t);
  const bool gpu = std::any_of(t.events.begin(), t.events.end(), [](const KinetoEvent& e) {
    return e.cat == KinetoCat::kKernel || e.cat == KinetoCat::kMemcpy || e.cat == KinetoCat::kMemset;
  });
  KinetoImport out;
  // The steps whose forward runs the ops most steps run.
  std::map<std::string, int64_t> keys;
  for (const StepUnits& s : traced.steps) {
    if (!s.forward.empty()) ++keys[s.key];
  }
  if (keys.empty())
    throw InputError(t.path, "has no forward ops inside its ProfilerStep spans", "a trace of training steps");
  const std::string key = std::max_element(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
                            return a.second < b.second;
                          })->first;
  std::vector<const StepUnits*> analysed;
  for (const StepUnits& s : traced.steps) {
    KinetoStep step;
    const KinetoEvent& span = t.events[s.span];
    step.name = t.names[span.name];
    step.step_s = span.dur_us * 1e-6;
    step.gpu_busy_s = s.gpu_busy_us * 1e-6;
    step.compute_s = s.compute_us * 1e-6;
    step.comm_s = s.comm_us * 1e-6;
    step.overlap_s = s.overlap_us * 1e-6;
    step.data_loader_s = s.data_loader_us * 1e-6;
    for (const ForwardUnit& u : s.forward) {
      step.forward_s += (gpu ? u.forward_us : u.cpu_forward_us) * 1e-6;
      step.backward_s += (gpu ? u.backward_us : u.cpu_backward_us) * 1e-6;
    }
    step.optimizer_s = (gpu ? s.optimizer_us : s.cpu_optimizer_us) * 1e-6;
    step.other_s = (gpu ? s.other_us : 0) * 1e-6;
    step.all_reduce_bytes = s.all_reduce_bytes;
    step.analysed = s.key == key;
    if (step.analysed) analysed.push_back(&s);
    out.steps.push_back(std::move(step));
  }
  const auto steady = [&out](double KinetoStep::*field) {
    std::vector<double> v;
    for (const KinetoStep& s : out.steps) {
      if (s.analysed) v.push_back(s.*field);
    }
    return median(std::move(v));
  };
  for (double KinetoStep::*field :
       {&KinetoStep::step_s, &KinetoStep::gpu_busy_s, &KinetoStep::compute_s, &KinetoStep::comm_s,
        &KinetoStep::overlap_s, &KinetoStep::data_loader_s, &KinetoStep::forward_s, &KinetoStep::backward_s,
        &KinetoStep::optimizer_s, &KinetoStep::other_s}) {
    out.median.*field = steady(field);
  }
  out.median.name = "median of " + std::to_string(analysed.size()) + " steps";
  out.median.analysed = true;
  if (analysed.size() < out.steps.size()) {
    out.notes.push_back(std::to_string(out.steps.size() - analysed.size()) + " of " + std::to_string(out.steps.size()) +
                        " steps left out: their forward runs other ops than the rest (a partial first step?)");
  }
  int64_t early = 0;
  for (const StepUnits& s : traced.steps) early += s.early_kernels;
  if (early > 0) {
    out.notes.push_back("clock skew: " + std::to_string(early) +
                        " GPU events start before their launch on the host; steps take GPU work by its launch, "
                        "durations are the GPU's own");
  }
  if (traced.unlaunched_gpu_events > 0) {
    out.notes.push_back(std::to_string(traced.unlaunched_gpu_events) +
                        " GPU events have no launch in the trace: placed in steps by their own time, outside every op");
  }
  if (gpu) {
    out.host_bound = out.median.step_s > 0 && out.median.step_s - out.median.gpu_busy_s > 0.1 * out.median.step_s;
  } else {
    out.notes.push_back("no GPU events (a trace without ProfilerActivity.CUDA): the layers are the ops' host times");
  }

  // Layers from the first analysed step's units; times the medians over the analysed ones.
  const StepUnits& reference = *analysed.front();
  std::vector<double> unit_us;
  for (const ForwardUnit& u : reference.forward) {
    unit_us.push_back(gpu ? u.forward_us + u.backward_us : u.cpu_forward_us + u.cpu_backward_us);
  }
  bool by_module = false;
  const std::vector<std::vector<size_t>> groups =
      group_units(t, reference, o.granularity, unit_us, out.notes, by_module);
  Profile& p = out.profile;
  p.model = o.model.empty() ? std::filesystem::path(t.path).filename().string() : o.model;
  for (const char* ext : {".gz", ".json"}) {
    if (o.model.empty() && p.model.size() > std::string(ext).size() && p.model.ends_with(ext)) {
      p.model.resize(p.model.size() - std::string(ext).size());
    }
  }
  p.device.name = gpu ? (t.device_name.empty() ? "GPU" : t.device_name) : "CPU";
  p.device.kind = gpu ? "gpu" : "cpu";
  p.source = "imported:kineto";
  std::map<std::string, int> seen;
  double params_total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    LayerProfile layer;
    std::string base;
    for (const size_t u : groups[g]) {  // its module's name (Conv2d from "nn.Module: Conv2d_0"), else its op's
      const int64_t m = reference.forward[u].module;
      if (by_module && base.empty() && m >= 0) {
        const std::string& module = t.names[t.events[static_cast<size_t>(m)].name];
        base = module.substr(std::string("nn.Module: ").size());
        if (const size_t cut = base.rfind('_'); cut != std::string::npos && cut > 0) base.resize(cut);
      }
    }
    for (const size_t u : groups[g]) {
      const std::string& op = t.names[reference.forward[u].name];
      if (base.empty() && kineto_detail::has_weights(op)) base = base_name(op);
      const KinetoEvent& e = t.events[reference.forward[u].event];
      if (e.inputs < t.inputs.size()) layer.param_bytes += kineto_detail::weight_bytes(op, t.inputs[e.inputs]);
    }
    if (base.empty()) base = base_name(t.names[reference.forward[groups[g].front()].name]);
    layer.name = base + "_" + std::to_string(seen[base]++);
    layer.inputs = {g == 0 ? "input" : p.layers.back().name};
    std::vector<double> forward, backward;
    for (const StepUnits* s : analysed) {
      double f = 0, b = 0;
      for (const size_t u : groups[g]) {
        f += gpu ? s->forward[u].forward_us : s->forward[u].cpu_forward_us;
        b += gpu ? s->forward[u].backward_us : s->forward[u].cpu_backward_us;
      }
      if (g == 0 && gpu) f += s->other_us;  // work launched outside every op: before the first layer
      forward.push_back(f * 1e-6);
      backward.push_back(b * 1e-6);
    }
    layer.forward_s = median(std::move(forward));
    layer.backward_s = median(std::move(backward));
    if (g + 1 < groups.size()) {
      const KinetoInput* next = first_tensor(t, t.events[reference.forward[groups[g + 1].front()].event]);
      layer.activation_bytes = next != nullptr ? next->bytes() : 0;
    }
    params_total += layer.param_bytes;
    p.layers.push_back(std::move(layer));
  }
  // Batch and dtype from the first recorded tensor input.
  const KinetoInput* first = nullptr;
  for (size_t u = 0; u < reference.forward.size() && first == nullptr; ++u) {
    first = first_tensor(t, t.events[reference.forward[u].event]);
  }
  p.batch_size = o.batch > 0 ? o.batch : first != nullptr ? first->dims.front() : 0;
  out.batch_known = p.batch_size >= 1;
  if (!out.batch_known) {
    p.batch_size = 1;
    out.notes.push_back("the batch is not recorded (no input shapes): --batch B gives it");
  }
  if (first == nullptr) out.notes.push_back("no input shapes recorded (record_shapes=True): activation sizes are 0");
  // DDP's buckets: the all-reduced bytes of the reference step.
  for (const double b : reference.all_reduce_bytes) out.gradient_bytes += b;
  double kernel_us = 0, bytes = 0;
  for (const StepUnits* s : analysed) {
    kernel_us += s->all_reduce_kernel_us;
    for (const double b : s->all_reduce_bytes) bytes += b;
  }
  out.all_reduce_bytes_per_s = kernel_us > 0 ? bytes / (kernel_us * 1e-6) : 0;
  if (params_total == 0 && out.gradient_bytes > 0) {
    // Each bucket's bytes over the layers whose backward ended before its launch and after the bucket before's.
    std::vector<double> ends;
    for (const auto& group : groups) {
      double end = 0;
      for (const size_t u : group) end = std::max(end, reference.forward[u].backward_end_us);
      ends.push_back(end);
    }
    double previous = -1e300;
    for (size_t k = 0; k < reference.all_reduce_bytes.size(); ++k) {
      const double launch = reference.all_reduce_launch_us[k];
      const bool last = k + 1 == reference.all_reduce_bytes.size();
      std::vector<size_t> members;
      for (size_t g = 0; g < groups.size(); ++g) {
        if (ends[g] > previous && (ends[g] <= launch || last)) members.push_back(g);
      }
      previous = launch;
      if (members.empty()) members.push_back(0);
      std::vector<size_t> weighted;
      for (const size_t g : members) {
        if (kineto_detail::has_weights(t.names[reference.forward[groups[g].front()].name])) weighted.push_back(g);
      }
      const std::vector<size_t>& share = weighted.empty() ? members : weighted;
      for (const size_t g : share)
        p.layers[g].param_bytes += reference.all_reduce_bytes[k] / static_cast<double>(share.size());
    }
    params_total = out.gradient_bytes;
    out.notes.push_back("parameters from DDP's " + std::to_string(reference.all_reduce_bytes.size()) +
                        " all-reduced buckets (" + format_bytes(out.gradient_bytes) +
                        "), each spread over the layers whose backward ended before it was launched");
  } else if (params_total == 0) {
    out.notes.push_back("no parameter sizes: neither input shapes nor all-reduces are recorded");
  }
  // A single-process DataLoader loads each batch on the host while the GPU
  // waits: its time a step is a first layer of the profile.
  if (out.median.data_loader_s > 0) {
    LayerProfile loader;
    loader.name = "dataloader";
    loader.inputs = {"input"};
    loader.forward_s = out.median.data_loader_s;
    loader.activation_bytes = first != nullptr ? first->bytes() : 0;
    p.layers.front().inputs = {loader.name};
    p.layers.insert(p.layers.begin(), std::move(loader));
    out.notes.push_back("the data loader's " + format_seconds(out.median.data_loader_s) +
                        " a step on the host is the first layer, dataloader, with no GPU work");
  }
  // The optimizer's time over the layers by their parameters (equally without sizes).
  std::vector<double> optimizer;
  for (const StepUnits* s : analysed) optimizer.push_back((gpu ? s->optimizer_us : s->cpu_optimizer_us) * 1e-6);
  const double update_s = median(std::move(optimizer));
  for (size_t g = 0; g < groups.size(); ++g) {
    LayerProfile& layer = p.layers[p.layers.size() - groups.size() + g];
    layer.update_s =
        params_total > 0 ? update_s * layer.param_bytes / params_total : update_s / static_cast<double>(groups.size());
  }
  validate_profile(p, t.path);
  return out;
}

}  // namespace trainsim
