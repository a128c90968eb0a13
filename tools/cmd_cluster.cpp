// `trainsim cluster list` and `trainsim cluster show NAME [--json]`.
#include <memory>

#include "analysis/table.hpp"
#include "model/units.hpp"
#include "profiles/cluster.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

std::string rate_text(double bytes_per_s) { return format_bytes(bytes_per_s) + "/s"; }

void print_cluster_list(std::ostream& out) {
  TextTable t;
  t.header = {"cluster", "devices", "device", "intra link", "inter link", "what"};
  t.right_aligned = {false, true, false, true, true, false};
  for (const Cluster& c : cluster_presets()) {
    t.rows.push_back({c.name, std::to_string(c.machines) + "x" + std::to_string(c.devices_per_machine),
                      c.device.name, rate_text(c.intra_link.bandwidth_bytes_per_s),
                      c.machines > 1 ? rate_text(c.inter_link.bandwidth_bytes_per_s) : "-", c.description});
  }
  print_aligned(out, t);
}

void print_cluster(std::ostream& out, const Cluster& c) {
  out << c.name << ": " << c.description << "\n"
      << "  " << c.machines << " machine(s) x " << c.devices_per_machine << " " << c.device.name << " ("
      << c.device.kind << ", " << format_bytes(c.device.memory_bytes) << ", "
      << format_count(c.device.peak_flops_per_s) << " FLOP/s, memory " << rate_text(c.device.memory_bytes_per_s)
      << ")\n"
      << "  intra-machine link " << rate_text(c.intra_link.bandwidth_bytes_per_s) << ", "
      << format_seconds(c.intra_link.latency_s) << "\n"
      << "  inter-machine link " << rate_text(c.inter_link.bandwidth_bytes_per_s) << ", "
      << format_seconds(c.inter_link.latency_s) << "\n"
      << "  host link " << rate_text(c.host.link_bandwidth_bytes_per_s) << ", "
      << format_seconds(c.host.link_latency_s) << "; host reduction " << rate_text(c.host.reduce_bytes_per_s)
      << " on " << c.host.threads << " threads; stream sync " << format_seconds(c.host.stream_sync_s) << "\n"
      << "  collectives: reduction " << rate_text(c.collective.reduce_bytes_per_s) << ", "
      << format_seconds(c.collective.sync_s) << " per call\n";
}

}  // namespace

void add_cluster_command(CLI::App& app, CommandContext& ctx) {
  CLI::App* cluster = app.add_subcommand("cluster", "The cluster presets: list them or show one");
  cluster->require_subcommand(1);
  cluster->add_subcommand("list", "List the presets")->callback([&ctx] {
    ctx.action = [&ctx] { print_cluster_list(ctx.out); };
  });
  struct Options {
    std::string name;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* show = cluster->add_subcommand("show", "Show a preset or a cluster file");
  show->add_option("name", opts->name, "Preset name (see `trainsim cluster list`) or a cluster JSON file")
      ->required();
  show->add_flag("--json", opts->json, "Print the trainsim.cluster/1 JSON document");
  show->callback([&ctx, opts] {
    ctx.action = [&ctx, opts] {
      const Cluster c = load_cluster(opts->name, "cluster show");
      if (opts->json) {
        ctx.out << cluster_to_json(c).dump(2) << "\n";
      } else {
        print_cluster(ctx.out, c);
      }
    };
  });
}

}  // namespace trainsim
