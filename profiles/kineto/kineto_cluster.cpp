// The machine a Kineto trace ran on, as a cluster for `predict`
// (kineto_import.hpp): its GPUs' datasheet rates by name, its memory and
// world size from the trace, its link as the trace's all-reduces measured it.
#include <string>

#include "profiles/kineto/kineto_import.hpp"

namespace trainsim {
namespace {

struct KnownGpu {
  const char* name;         // a substring of the trace's device name
  double fp32_flops_per_s;  // datasheet peak, fp32 without tensor cores
  double memory_bytes_per_s;
  double nvlink_bytes_per_s;  // per direction per GPU, as NCCL reaches it (80% assumed)
  double pcie_bytes_per_s;    // host link per direction, achieved (assumed)
};

// NVIDIA's datasheets: V100 SXM2 (15.7 TFLOP/s, 900 GB/s HBM2, NVLink 2
// 300 GB/s both ways), A100 SXM4 (19.5 TFLOP/s; 1,555 GB/s at 40 GB, 2,039
// at 80 GB; NVLink 3 600 GB/s), H100 SXM5 (67 TFLOP/s, 3.35 TB/s, NVLink 4
// 900 GB/s); PCIe 3, 4 and 5 x16 at about 12, 24 and 55 GB/s achieved.
constexpr KnownGpu kKnown[] = {
    {"V100", 15.7e12, 900e9, 0.8 * 150e9, 12e9},
    {"A100", 19.5e12, 2039e9, 0.8 * 300e9, 24e9},
    {"H100", 67e12, 3.35e12, 0.8 * 450e9, 55e9},
};

}  // namespace

Cluster kineto_cluster(const KinetoTrace& trace, const KinetoImport& imported) {
  Cluster c;
  c.name = "kineto-" + std::to_string(trace.world_size) + "x";
  c.machines = 1;
  c.devices_per_machine = std::max<int64_t>(1, trace.world_size);
  const KnownGpu* known = nullptr;
  for (const KnownGpu& g : kKnown) {
    if (trace.device_name.find(g.name) != std::string::npos) known = &g;
  }
  const KnownGpu fallback{"", 19.5e12, 1555e9, 0.8 * 300e9, 24e9};  // an A100 40GB, stated below
  const KnownGpu& gpu = known != nullptr ? *known : fallback;
  c.device.name = imported.profile.device.name;
  c.device.kind = imported.profile.device.kind;
  c.device.memory_bytes = trace.device_memory_bytes > 0 ? trace.device_memory_bytes : 40e9;
  c.device.peak_flops_per_s = gpu.fp32_flops_per_s;
  c.device.memory_bytes_per_s =
      std::string(gpu.name) == "A100" && c.device.memory_bytes < 60e9 ? 1555e9 : gpu.memory_bytes_per_s;
  // A ring all-reduce of B bytes over n moves 2(n − 1)/n · B through each link.
  const auto n = static_cast<double>(c.devices_per_machine);
  const double measured =
      n > 1 && imported.all_reduce_bytes_per_s > 0 ? imported.all_reduce_bytes_per_s * 2 * (n - 1) / n : 0;
  c.intra_link = {measured > 0 ? measured : gpu.nvlink_bytes_per_s, 10e-6};
  c.inter_link = c.intra_link;
  c.host = {gpu.pcie_bytes_per_s, 10e-6, 50e9, 8, 10e-6};
  c.collective = {c.device.memory_bytes_per_s / 3, 10e-6};
  c.description = "the machine of " + trace.path + ": " + std::to_string(c.devices_per_machine) + " " + c.device.name +
                  (known != nullptr ? " (datasheet rates)" : " (unknown GPU: an A100 40GB's rates assumed)") +
                  (measured > 0 ? ", the link as its NCCL all-reduces measured it"
                                : ", the link at its NVLink's datasheet rate (80% assumed)") +
                  "; 10 us a message and a call assumed";
  validate_cluster(c, "the cluster of " + trace.path);
  return c;
}

}  // namespace trainsim
