// `trainsim devices`: what this machine can run plans on.
#include "analysis/table.hpp"
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
      std::string reason;
      if (list_cuda_devices(reason).empty()) ctx.out << "no GPU: " << reason << "\n";
    };
  });
}

}  // namespace trainsim
