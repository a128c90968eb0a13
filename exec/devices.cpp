// Local device enumeration: CPU from the OS, GPUs from the CUDA runtime.
#include "exec/devices.hpp"

#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <fstream>
#include <thread>

namespace trainsim {

std::string computer_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::vector<LocalDevice> list_local_devices() {
  LocalDevice cpu;
  cpu.id = "cpu:0";
  cpu.kind = "cpu";
  cpu.cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  struct utsname uts {};
  const std::string machine = uname(&uts) == 0 ? uts.machine : "cpu";
  cpu.name = machine + ", " + std::to_string(cpu.cores) + " hardware threads";
  struct sysinfo info {};
  if (sysinfo(&info) == 0) cpu.memory_bytes = static_cast<double>(info.totalram) * info.mem_unit;
  std::vector<LocalDevice> devices{cpu};
  std::string reason;
  for (LocalDevice& gpu : list_cuda_devices(reason)) devices.push_back(std::move(gpu));
  return devices;
}

#ifndef TRAINSIM_WITH_CUDA
std::vector<LocalDevice> list_cuda_devices(std::string& reason) {
  reason = "trainsim was built without CUDA (TRAINSIM_WITH_CUDA=OFF)";
  return {};
}

std::string cuda_versions_text() { return ""; }
#endif

}  // namespace trainsim
