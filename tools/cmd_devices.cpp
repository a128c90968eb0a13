// `trainsim devices`: what this machine can run plans on.
#include "analysis/table.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "exec/devices.hpp"
#include "model/units.hpp"
#include "tools/commands.hpp"

namespace trainsim {

void add_devices_command(CLI::App& app, CommandContext& ctx) {
  app.add_subcommand("devices", "List this machine's CPU and CUDA devices")->callback([&ctx] {
    ctx.action = [&ctx] {
      TextTable t;
      t.header = {"device", "kind", "cores/SMs", "memory", "name"};
      t.right_aligned = {false, false, true, true, false};
      for (const LocalDevice& d : list_local_devices()) {
        t.rows.push_back({d.id, d.kind, std::to_string(d.cores), format_bytes(d.memory_bytes), d.name});
      }
      print_aligned(ctx.out, t);
      if (const std::string versions = cuda_versions_text(); !versions.empty()) ctx.out << versions << "\n";
      std::string reason;
      if (list_cuda_devices(reason).empty()) {
        ctx.out << "no GPU: " << reason << "\n";
        return;
      }
      // What a GPU each (--devices cuda:G,H,...) sums its library AllReduce with.
      const std::string nccl = nccl_version_text();
      ctx.out << (nccl.empty() ? "NCCL not available (" + nccl_library_error() +
                                     "): workers with a GPU each have no library AllReduce in one process "
                                     "(--set algorithm=mpi), MPI's across processes"
                               : "NCCL " + nccl +
                                     ": workers with a GPU each (--devices cuda:G,H,...) run the "
                                     "library AllReduce (--set algorithm=mpi) on it")
              << "\n";
    };
  });
}

}  // namespace trainsim
