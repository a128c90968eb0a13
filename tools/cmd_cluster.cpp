// `trainsim cluster list`, `trainsim cluster show NAME [--json]`, and
// `trainsim cluster emulate up|down|status` (emulate.hpp).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "analysis/table.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "profiles/cluster.hpp"
#include "tools/commands.hpp"
#include "tools/emulate.hpp"

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
      << c.device.kind << ", " << format_bytes(c.device.memory_bytes) << ", " << format_count(c.device.peak_flops_per_s)
      << " FLOP/s, memory " << rate_text(c.device.memory_bytes_per_s) << ")\n"
      << "  intra-machine link " << rate_text(c.intra_link.bandwidth_bytes_per_s) << ", "
      << format_seconds(c.intra_link.latency_s) << "\n"
      << "  inter-machine link " << rate_text(c.inter_link.bandwidth_bytes_per_s) << ", "
      << format_seconds(c.inter_link.latency_s) << "\n"
      << "  host link " << rate_text(c.host.link_bandwidth_bytes_per_s) << ", " << format_seconds(c.host.link_latency_s)
      << "; host reduction " << rate_text(c.host.reduce_bytes_per_s) << " on " << c.host.threads
      << " threads; stream sync " << format_seconds(c.host.stream_sync_s) << "\n"
      << "  collectives: reduction " << rate_text(c.collective.reduce_bytes_per_s) << ", "
      << format_seconds(c.collective.sync_s) << " per call";
  if (c.collective.library) {
    out << "; the library AllReduce's own hops " << rate_text(c.collective.library->hop_bytes_per_s) << ", "
        << format_seconds(c.collective.library->hop_latency_s);
  }
  out << "\n";
  // How the workers' cores are shared, where the cluster says (docs/simulator.md).
  std::vector<std::string> cores;
  const auto rate = [](double r) { return format_number(std::round(r * 100) / 100); };  // two decimals
  if (c.device.compute_rate_while_communicating != 1) {
    cores.push_back("compute at " + rate(c.device.compute_rate_while_communicating) +
                    " of its rate beside communication");
  }
  if (c.device.collective_rate_while_computing != 0) {
    cores.push_back("a collective's cores' part at " + rate(c.device.collective_rate_while_computing) +
                    " beside compute");
  }
  if (c.device.handoff_s != 0) cores.push_back("hand-off " + format_seconds(c.device.handoff_s));
  if (c.shared_cores != 0) cores.push_back("every worker on one computer's " + std::to_string(c.shared_cores) + " cores");
  if (c.link_kernel_s_per_byte != 0) {
    const double ns = std::round(c.link_kernel_s_per_byte * 1e12) / 1e3;  // to the picosecond
    cores.push_back("the links' kernel work " + format_number(ns) + " ns per byte");
  }
  if (!cores.empty()) out << "  cores: " << join(cores, "; ") << "\n";
  if (c.shared_devices != 0) {
    const int64_t w = workers_per_shared_device(c);
    out << "  virtual workers: " << w << " on each of " << c.shared_devices << " physical device(s) per machine, "
        << "each computing at " << rate(shared_device_rate(c, w)) << " of its rate while all " << w << " compute"
        << (c.device.compute_rate_while_shared == 0 ? " (processor sharing)" : "") << "\n";
  }
  if (c.device.host_per_op.any())
    out << "  a worker's host per compute op: " << host_per_op_text(c.device.host_per_op) << "\n";
}

void add_emulate_command(CLI::App& cluster, CommandContext& ctx) {
  CLI::App* emulate = cluster.add_subcommand(
      "emulate", "Emulate a cluster on this machine: hosts as network namespaces on a switch, links shaped by tc (root)");
  emulate->require_subcommand(1);
  struct Options {
    std::string name = "emu";
    int hosts = 2;
    int workers_per_host = 1;
    std::string link;
    int mtu = kEmulatedMtu;
    int64_t burst = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* up = emulate->add_subcommand("up", "Build the hosts and print what mpirun needs to start ranks on them");
  up->add_option("--hosts", o->hosts, "Hosts (network namespaces)")->capture_default_str();
  up->add_option("--workers-per-host", o->workers_per_host, "Ranks per host (the hostfile's slots)")
      ->capture_default_str();
  up->add_option("--link", o->link, "Each host's link to the switch, as tc writes rates: 1gbit, 200mbit")->required();
  up->add_option("--mtu", o->mtu,
                 "The links' MTU in bytes (jumbo frames by default: at 1500 the kernel's packet work shares the "
                 "ranks' cores)")
      ->capture_default_str();
  up->add_option("--burst", o->burst,
                 "Bytes each link's tbf bucket lets across at once after it idles, from the MTU to 1 GiB (default: "
                 "what the link sends in 1 ms, 16 KB at least)");
  up->add_option("--name", o->name, "The cluster's name (1-6 lowercase letters or digits)")->capture_default_str();
  up->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      const EmulatedCluster c = emulate_up(o->name, o->hosts, o->workers_per_host, o->link, o->mtu, o->burst);
      ctx.out << "emulated cluster " << c.name << ": " << c.hosts << " hosts x " << c.workers_per_host << " workers, "
              << c.link << " each way to the switch (MTU " << c.mtu << ", bucket " << c.burst_bytes << " B), subnet "
              << c.subnet << "\n";
      for (int i = 0; i < c.hosts; ++i)
        ctx.out << "  " << c.namespaces[static_cast<size_t>(i)] << "  " << c.host_address(i) << "\n";
      ctx.out << "hostfile " << c.hostfile() << "\n"
              << "trainsim run --launcher mpi --emulated " << c.name << " --devices cpu:" << c.hosts * c.workers_per_host
              << " ...\n"
              << "or: mpirun " << c.mpirun_options() << " -np " << c.hosts * c.workers_per_host << " trainsim run ...\n"
              << "remove it with: trainsim cluster emulate down --name " << c.name << "\n";
    };
  });
  CLI::App* down = emulate->add_subcommand("down", "Remove everything an emulated cluster made");
  down->add_option("--name", o->name, "The cluster's name")->capture_default_str();
  down->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      ctx.out << (emulate_down(o->name) ? "removed " : "nothing to remove for ") << o->name << "\n";
    };
  });
  emulate->add_subcommand("status", "List the emulated clusters")->callback([&ctx] {
    ctx.action = [&ctx] {
      const std::vector<EmulatedStatus> all = emulate_status();
      if (all.empty()) ctx.out << "no emulated cluster\n";
      for (const EmulatedStatus& s : all) {
        ctx.out << s.cluster.name << ": " << s.cluster.hosts << " hosts x " << s.cluster.workers_per_host << ", "
                << s.cluster.link << ", MTU " << s.cluster.mtu
                << (s.cluster.burst_bytes > 0 ? ", bucket " + std::to_string(s.cluster.burst_bytes) + " B" : "") << ", "
                << s.cluster.subnet << (s.alive ? "" : " (incomplete: run down)") << "\n";
      }
    };
  });
}

}  // namespace

void add_cluster_command(CLI::App& app, CommandContext& ctx) {
  CLI::App* cluster = app.add_subcommand("cluster", "The cluster presets: list them or show one; emulate a cluster");
  cluster->require_subcommand(1);
  add_emulate_command(*cluster, ctx);
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
