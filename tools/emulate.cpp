// Emulated clusters: the `ip` and `tc` commands that build and remove them,
// and the files mpirun reads (see emulate.hpp).
#include "tools/emulate.hpp"

#include "tools/mpi_launch.hpp"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "model/error.hpp"

extern char** environ;

namespace trainsim {
namespace {

struct CommandResult {
  int status = -1;     // the exit status; -1 if it could not be started or was killed
  std::string output;  // stdout and stderr together
};

// Runs `argv` (found on PATH) and waits for it.
CommandResult run_command(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {-1, "pipe failed"};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  CommandResult r;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) r.output.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  if (spawned != 0) return {-1, argv[0] + ": " + std::strerror(spawned)};
  int status = 0;
  if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.status = WEXITSTATUS(status);
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' ')) r.output.pop_back();
  return r;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs a step of building a cluster; throws, saying which and why, if it fails.
void step(const std::vector<std::string>& argv) {
  const CommandResult r = run_command(argv);
  if (r.status != 0) {
    throw InputError("cluster emulate up", "`" + joined(argv) + "` failed: " + r.output,
                     "a machine where this user may make network namespaces, bridges and tc qdiscs (root)");
  }
}

std::string bridge_of(const std::string& name) { return name + "-br"; }
std::string veth_of(const std::string& name, int host) { return name + "-v" + std::to_string(host); }
std::string namespace_of(const std::string& name, int host) { return name + "-h" + std::to_string(host); }

// tc's rate ("1gbit", "200mbit", "500kbit", "10gbit") in bits per second.
double rate_bits_per_s(const std::string& link) {
  static const std::regex pattern(R"(([0-9]+(\.[0-9]+)?)([kmg]?)bit)");
  std::smatch m;
  if (!std::regex_match(link, m, pattern)) {
    throw InputError("--link", "is \"" + link + "\"", "a rate as tc writes it: 100mbit, 1gbit, 2.5gbit, 500kbit");
  }
  const double scale = m[3] == "g" ? 1e9 : m[3] == "m" ? 1e6 : m[3] == "k" ? 1e3 : 1.0;
  const double rate = std::stod(m[1]) * scale;
  if (!(rate >= 1e5 && rate <= 1e11)) throw InputError("--link", "is " + link, "a rate between 100kbit and 100gbit");
  return rate;
}

// The third octet of the cluster's subnet 10.77.x.0/24, from its name (FNV-1a).
int subnet_octet(const std::string& name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return 20 + static_cast<int>(h % 200);
}

std::vector<std::string> namespaces_named(const std::string& name) {
  std::vector<std::string> found;
  std::istringstream list(run_command({"ip", "netns", "list"}).output);
  for (std::string line; std::getline(list, line);) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(name + "-h", 0) == 0) found.push_back(ns);
  }
  return found;
}

// The links in this namespace of the cluster's hosts (NAME-vI): deleting one
// deletes its pair, even where the host's namespace lives on after `ip netns
// del` (a killed rank's sockets can hold it for minutes).
std::vector<std::string> veths_named(const std::string& name) {
  std::vector<std::string> found;
  std::istringstream list(run_command({"ip", "-o", "link", "show"}).output);
  for (std::string line; std::getline(list, line);) {  // "1155: kl-v0@if1154: <...> ..."
    const size_t start = line.find(": ");
    if (start == std::string::npos) continue;
    const std::string link = line.substr(start + 2, line.find_first_of("@:", start + 2) - start - 2);
    const std::string prefix = name + "-v";
    if (link.rfind(prefix, 0) == 0 && link.size() > prefix.size() &&
        link.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
      found.push_back(link);
    }
  }
  return found;
}

nlohmann::json to_json(const EmulatedCluster& c) {
  return {{"format", "trainsim.emulated/1"},
          {"name", c.name},
          {"hosts", c.hosts},
          {"workers_per_host", c.workers_per_host},
          {"link", c.link},
          {"mtu", c.mtu},
          {"burst_bytes", c.burst_bytes},
          {"subnet", c.subnet},
          {"namespaces", c.namespaces},
          {"hostfile", c.hostfile()},
          {"agent", c.agent()},
          {"mpirun_options", c.mpirun_options()}};
}

void write_file(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) throw InputError(path, "could not be written", "a writable folder for the emulated cluster's files");
  if (executable) chmod(path.c_str(), 0755);
}

}  // namespace

// 5 ms of the link, 128 KiB at least: what a completed send leaves behind,
// as a NIC's short queue does. Open MPI's own blocking collectives move
// about one socket buffer per 4 ms between the emulated hosts: 64 KiB held
// MPI_Allreduce to 15-16 MB/s on a 25 MB/s link, 128 KiB to 22-32 MB/s at
// 1 Gbit/s; 5 ms of the link keeps it at the link's rate
// (docs/results.md).
int64_t emulated_socket_buffer_bytes(const std::string& link) {
  return std::max<int64_t>(131072, static_cast<int64_t>(rate_bits_per_s(link) / 8 * 0.005));
}

std::string EmulatedCluster::host_address(int host) const {
  return subnet.substr(0, subnet.rfind(".0/")) + "." + std::to_string(10 + host);
}

// rtc_hwloc_vmhole none: Open MPI 4.1's daemons otherwise share the machine's
// topology through memory mapped into a hole they look for in their address
// space, and one crashed doing so (SIGSEGV in hwloc_shmem_topology_write) in
// about one start in ten here.
//
// btl_tcp_sndbuf (emulated_socket_buffer_bytes): a link's token bucket
// queues up to 100 ms of its rate, and Linux lets one socket keep 4 MB in
// that queue (tcp_limit_output_bytes), so a send completed with megabytes
// still to cross: a server's weights sent to three workers one after
// another crossed at once, sharing the link.
//
// --bind-to none: each host's daemon sees this machine's cores, and where a
// job has two ranks or fewer Open MPI binds each to one core, the first:
// two hosts' ranks ran on core 0 together, a blocking message between them
// taking a scheduler tick (4 ms; docs/results.md). The executor pins each
// worker's threads itself.
std::string EmulatedCluster::mpirun_options() const {
  return "--hostfile " + hostfile() + " --bind-to none --mca plm_rsh_agent " + agent() +
         " --mca btl tcp,self --mca btl_tcp_if_include " + subnet + " --mca oob_tcp_if_include " + subnet +
         " --mca rtc_hwloc_vmhole none --mca btl_tcp_eager_limit " + kTcpEagerLimit + " --mca btl_tcp_sndbuf " +
         std::to_string(emulated_socket_buffer_bytes(link));
}

std::string emulate_root() { return "/run/trainsim-emulate"; }

std::string emulate_unavailable_reason() {
  if (geteuid() != 0) {
    return "needs root (network namespaces, bridges and tc need CAP_SYS_ADMIN and CAP_NET_ADMIN); this runs as uid " +
           std::to_string(geteuid());
  }
  const std::string probe = "tsprobe" + std::to_string(getpid() % 100000);
  const CommandResult made = run_command({"ip", "netns", "add", probe});
  if (made.status != 0) return "`ip netns add` failed: " + made.output;
  run_command({"ip", "netns", "del", probe});
  const CommandResult tc = run_command({"tc", "-V"});
  if (tc.status != 0) return "tc (iproute2) is missing: " + tc.output;
  return "";
}

int64_t emulated_burst_bytes(const std::string& link) {
  // A real NIC never sends above its rate, and a bucket of 4 ms let a 470 KB
  // ring step through at the bridge's speed (docs/results.md). TCP still
  // carries 23.6 of 25 MB/s each way at 200 Mbit/s and 119 of 125 at 1 Gbit/s.
  return static_cast<int64_t>(std::max(16384.0, rate_bits_per_s(link) / 8 * 0.001));
}

EmulatedCluster emulate_up(const std::string& name, int hosts, int workers_per_host, const std::string& link, int mtu,
                           int64_t burst_bytes) {
  static const std::regex valid_name("[a-z0-9]{1,6}");
  if (!std::regex_match(name, valid_name)) {
    throw InputError("--name", "is \"" + name + "\"", "1-6 lowercase letters or digits (interface names stay short)");
  }
  if (hosts < 1 || hosts > 64) throw InputError("--hosts", "is " + std::to_string(hosts), "1 to 64 hosts");
  if (workers_per_host < 1 || workers_per_host > 64) {
    throw InputError("--workers-per-host", "is " + std::to_string(workers_per_host), "1 to 64");
  }
  // tbf drops a packet larger than its bucket that it cannot cut.
  const int64_t default_burst = emulated_burst_bytes(link);  // checks the rate
  const bool burst_asked = burst_bytes != 0;
  if (!burst_asked) burst_bytes = default_burst;
  if (burst_asked && (burst_bytes < std::max(mtu, 1280) || burst_bytes > (int64_t{1} << 30))) {
    throw InputError("--burst", "is " + std::to_string(burst_bytes),
                     "the bytes of the links' tbf bucket, from the MTU (" + std::to_string(mtu) + ") to 1 GiB");
  }
  if (mtu < 1280 || mtu > std::min<int64_t>(65535, burst_bytes)) {
    throw InputError("--mtu", "is " + std::to_string(mtu),
                     "1280 to " + std::to_string(std::min<int64_t>(65535, burst_bytes)) +
                         " bytes; the link's tbf bucket holds " + std::to_string(burst_bytes));
  }
  const std::string why = emulate_unavailable_reason();
  if (!why.empty()) throw InputError("cluster emulate up", why, "root, on a kernel that allows network namespaces");
  emulate_down(name);

  EmulatedCluster c;
  c.name = name;
  c.hosts = hosts;
  c.workers_per_host = workers_per_host;
  c.link = link;
  c.subnet = "10.77." + std::to_string(subnet_octet(name)) + ".0/24";
  c.folder = emulate_root() + "/" + name;
  c.mtu = mtu;
  c.burst_bytes = burst_bytes;
  const std::string burst = std::to_string(burst_bytes), mtu_text = std::to_string(mtu);
  const std::string prefix = c.subnet.substr(0, c.subnet.rfind(".0/"));
  try {
    step({"ip", "link", "add", bridge_of(name), "mtu", mtu_text, "type", "bridge"});
    step({"ip", "addr", "add", prefix + ".1/24", "dev", bridge_of(name)});
    step({"ip", "link", "set", bridge_of(name), "up"});
    for (int i = 0; i < hosts; ++i) {
      const std::string ns = namespace_of(name, i), outside = veth_of(name, i), inside = name + "-p" + std::to_string(i);
      step({"ip", "netns", "add", ns});
      c.namespaces.push_back(ns);
      step({"ip", "link", "add", outside, "mtu", mtu_text, "type", "veth", "peer", "name", inside, "mtu", mtu_text});
      step({"ip", "link", "set", inside, "netns", ns});
      step({"ip", "-n", ns, "link", "set", inside, "name", "eth0"});
      step({"ip", "-n", ns, "addr", "add", c.host_address(i) + "/24", "dev", "eth0"});
      step({"ip", "-n", ns, "link", "set", "eth0", "up"});
      step({"ip", "-n", ns, "link", "set", "lo", "up"});
      step({"ip", "link", "set", outside, "master", bridge_of(name)});
      step({"ip", "link", "set", outside, "up"});
      // Both directions shaped: into the host (the switch's port) and out of it.
      step({"tc", "qdisc", "add", "dev", outside, "root", "tbf", "rate", link, "burst", burst, "latency", "100ms"});
      step({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", link, "burst",
            burst, "latency", "100ms"});
    }
    std::filesystem::create_directories(c.folder);
    std::string hostfile;
    for (const std::string& ns : c.namespaces) hostfile += ns + " slots=" + std::to_string(workers_per_host) + "\n";
    write_file(c.hostfile(), hostfile);
    // mpirun calls its agent as `agent HOST COMMAND...`: HOST is a namespace.
    // Each host's daemon keeps its session directory apart: the namespaces
    // share the machine's name and /tmp, where Open MPI's daemons otherwise
    // make and remove one tree, and a daemon sometimes found its directory
    // gone ("session_dir.c ... No such file or directory").
    const std::string sessions = c.folder + "/sessions/";
    write_file(c.agent(), "#!/bin/sh\nhost=\"$1\"\nshift\nmkdir -p \"" + sessions + "$host\"\nexec ip netns exec \"$host\" env OMPI_MCA_orte_tmpdir_base=\"" +
                              sessions + "$host\" /bin/sh -c \"$*\"\n",
               true);
    write_file(c.folder + "/state.json", to_json(c).dump(2) + "\n");
  } catch (...) {
    emulate_down(name);
    throw;
  }
  return c;
}

bool emulate_down(const std::string& name) {
  bool removed = false;
  for (const std::string& ns : namespaces_named(name)) {
    removed |= run_command({"ip", "netns", "del", ns}).status == 0;  // its veth pair goes with it, once it ends
  }
  for (const std::string& link : veths_named(name)) {
    removed |= run_command({"ip", "link", "del", link}).status == 0;
  }
  if (run_command({"ip", "link", "show", bridge_of(name)}).status == 0) {
    removed |= run_command({"ip", "link", "del", bridge_of(name)}).status == 0;
  }
  std::error_code ignored;
  removed |= std::filesystem::remove_all(emulate_root() + "/" + name, ignored) > 0;
  return removed;
}

std::vector<EmulatedStatus> emulate_status() {
  std::vector<EmulatedStatus> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(emulate_root(), error)) {
    std::ifstream in(entry.path() / "state.json");
    if (!in) continue;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "trainsim.emulated/1") continue;
    EmulatedStatus s;
    s.cluster.name = j.value("name", "");
    s.cluster.hosts = j.value("hosts", 0);
    s.cluster.workers_per_host = j.value("workers_per_host", 1);
    s.cluster.link = j.value("link", "");
    s.cluster.mtu = j.value("mtu", 1500);  // clusters made before the field: the kernel's default
    s.cluster.burst_bytes = j.value("burst_bytes", int64_t{0});  // 0: made before the field
    s.cluster.subnet = j.value("subnet", "");
    s.cluster.folder = entry.path().string();
    s.cluster.namespaces = j.value("namespaces", std::vector<std::string>{});
    const std::vector<std::string> present = namespaces_named(s.cluster.name);
    s.alive = present.size() == s.cluster.namespaces.size() &&
              run_command({"ip", "link", "show", bridge_of(s.cluster.name)}).status == 0;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace trainsim
