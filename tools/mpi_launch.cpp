// `--launcher mpi` (mpi_launch.hpp): mpirun as a child process whose two
// output streams are read here, line by line.
#include "tools/mpi_launch.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "exec/interpreter.hpp"
#include "model/error.hpp"
#include "tools/emulate.hpp"
#include "tools/launch_watchdog.hpp"
#include "tools/progress.hpp"

namespace trainsim {
namespace {

constexpr const char* kProgressTag = "trainsim-progress ";

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// An Open MPI parameter is set where the environment or the options set it.
bool mca_set(const std::vector<std::string>& options, const std::string& name) {
  if (std::getenv(("OMPI_MCA_" + name).c_str()) != nullptr) return true;
  for (size_t i = 0; i + 1 < options.size(); ++i) {
    if (options[i] == "--mca" && options[i + 1] == name) return true;
  }
  return false;
}

// Where the ranks are bound: the environment's or the options' binding policy.
bool binding_set(const std::vector<std::string>& options) {
  return mca_set(options, "hwloc_base_binding_policy") ||
         std::find(options.begin(), options.end(), "--bind-to") != options.end();
}

// The slots of mpirun's --host list: a host of each entry, `name` one,
// `name:N` N; -1 where an entry is not of that form.
int64_t host_list_slots(const std::string& hosts) {
  static const std::regex entry(R"(([^:,\s]+)(:([1-9][0-9]{0,5}))?)");
  int64_t slots = 0;
  std::istringstream in(hosts);
  for (std::string e; std::getline(in, e, ',');) {
    std::smatch m;
    if (!std::regex_match(e, m, entry)) return -1;
    slots += m[3].matched ? std::stoll(m[3].str()) : 1;
  }
  return slots;
}

// The options that place `ranks` ranks: an emulated cluster's or --hosts'
// (InputError where their slots are fewer), or --hostfile's.
std::vector<std::string> host_options(const LaunchOptions& o, int64_t ranks) {
  if (!o.hosts.empty()) {
    const int64_t slots = host_list_slots(o.hosts);
    if (slots < 0)
      throw InputError("--hosts", "is '" + o.hosts + "'", "hosts separated by commas, each name or name:N");
    if (ranks > slots) {
      throw InputError(
          "--hosts",
          "'" + o.hosts + "' gives " + std::to_string(slots) + " slots for " + std::to_string(ranks) + " ranks",
          "as many workers as slots or fewer; name:N for N ranks on a host");
    }
    return {"--host", o.hosts};
  }
  if (!o.hostfile.empty()) {
    if (!std::filesystem::is_regular_file(o.hostfile)) {
      throw InputError("--hostfile", "'" + o.hostfile + "' is not a file", "mpirun's hostfile: one host per line");
    }
    return {"--hostfile", o.hostfile};
  }
  if (o.emulated.empty()) return {};
  for (const EmulatedStatus& s : emulate_status()) {
    if (s.cluster.name != o.emulated) continue;
    if (!s.alive) {
      throw InputError("--emulated", "cluster '" + o.emulated + "' is no longer whole",
                       "a cluster `trainsim cluster emulate up` made again");
    }
    const int64_t slots = int64_t{s.cluster.hosts} * s.cluster.workers_per_host;
    if (ranks > slots) {
      throw InputError("--emulated",
                       "cluster '" + o.emulated + "' has " + std::to_string(slots) + " slots (" +
                           std::to_string(s.cluster.hosts) + " hosts of " + std::to_string(s.cluster.workers_per_host) +
                           ") for " + std::to_string(ranks) + " ranks",
                       "as many workers as slots or fewer, or a cluster made with more --hosts or --workers-per-host");
    }
    return split_words(s.cluster.mpirun_options());
  }
  throw InputError("--emulated", "no emulated cluster is called '" + o.emulated + "'",
                   "one `trainsim cluster emulate status` lists");
}

// Reads `fd` into `pending`, calling `line` for each whole line; false at its end.
template <typename OnLine>
bool drain(int fd, std::string& pending, OnLine&& line) {
  std::array<char, 4096> buffer{};
  const ssize_t n = read(fd, buffer.data(), buffer.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!pending.empty()) line(pending);
    pending.clear();
    return false;
  }
  pending.append(buffer.data(), static_cast<size_t>(n));
  for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
    line(pending.substr(0, end));
    pending.erase(0, end + 1);
  }
  return true;
}

// Starts `command` with its standard output and error into two pipes; the
// child receives SIGTERM should this process die first.
pid_t start(const std::vector<std::string>& command, int& out_fd, int& err_fd) {
  std::array<int, 2> out{}, err{};
  if (pipe(out.data()) != 0 || pipe(err.data()) != 0) throw std::runtime_error("cannot make pipes for mpirun");
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    for (const int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    execvp(argv[0], argv.data());
    const std::string message = std::string("trainsim: failed: cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  out_fd = out[0];
  err_fd = err[0];
  return pid;
}

// Whether `program` runs: a path to an executable, or a name on PATH.
bool runnable(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

void add_launch_options(CLI::App& cmd, LaunchOptions& o) {
  cmd.add_option("--launcher", o.launcher,
                 "local: every worker a thread of this process; mpi: mpirun starts one process per worker")
      ->check(CLI::IsMember({"local", "mpi"}))
      ->capture_default_str();
  cmd.add_option("--hosts", o.hosts, "With --launcher mpi: the hosts, as mpirun's --host (a,b or a:2,b:2)");
  cmd.add_option("--hostfile", o.hostfile, "With --launcher mpi: mpirun's hostfile");
  cmd.add_option("--emulated", o.emulated,
                 "With --launcher mpi: the emulated cluster of this name (trainsim cluster emulate up)");
  cmd.add_option("--mpirun", o.mpirun, "With --launcher mpi: the mpirun to start")->capture_default_str();
  cmd.add_flag("--progress-lines", o.progress_lines, "Progress as lines for the launcher")->group("");
}

bool under_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr; }

void check_launch_options(const LaunchOptions& o) {
  const int sources = !o.hosts.empty() + !o.hostfile.empty() + !o.emulated.empty();
  const char* named = !o.hosts.empty() ? "--hosts" : (!o.hostfile.empty() ? "--hostfile" : "--emulated");
  if (sources > 0 && o.launcher != "mpi") {
    throw InputError(named, "is given without --launcher mpi", "--launcher mpi, which starts the ranks on them");
  }
  if (sources > 1) throw InputError(named, "is one of several sources of hosts", "one of --hosts, --hostfile, --emulated");
  if (o.launcher == "mpi" && under_mpirun()) {
    throw InputError("--launcher", "is mpi in a process mpirun started", "either mpirun or --launcher mpi, not both");
  }
}

std::vector<std::string> mpirun_command(const LaunchOptions& o, int64_t ranks, const std::vector<std::string>& rank_args,
                                        const std::string& executable) {
  std::vector<std::string> command{o.mpirun};
  const std::vector<std::string> hosts = host_options(o, ranks);
  command.insert(command.end(), hosts.begin(), hosts.end());
  if (geteuid() == 0 && std::getenv("OMPI_ALLOW_RUN_AS_ROOT") == nullptr) command.push_back("--allow-run-as-root");
  if (hosts.empty() && std::getenv("OMPI_MCA_rmaps_base_oversubscribe") == nullptr) command.push_back("--oversubscribe");
  // Open MPI's daemons crashed writing their shared-memory topology in about
  // one start in ten on the project's machines (docs/results.md).
  if (!mca_set(command, "rtc_hwloc_vmhole")) command.insert(command.end(), {"--mca", "rtc_hwloc_vmhole", "none"});
  // Shared memory between ranks of a host without cross-memory attach,
  // which containers' ptrace rules refuse.
  if (!mca_set(command, "btl_vader_single_copy_mechanism")) {
    command.insert(command.end(), {"--mca", "btl_vader_single_copy_mechanism", "none"});
  }
  // Every message eagerly over TCP: Open MPI sends one above its eager
  // limit (64 KiB) by rendezvous, and two ranks exchanging such messages at
  // once (every step of a ring) got half of a shaped link each way (12 of 25
  // MB/s at 200 Mbit/s, where TCP carries 24 each way); eagerly, 22-24
  // (docs/results.md).
  if (!mca_set(command, "btl_tcp_eager_limit")) command.insert(command.end(), {"--mca", "btl_tcp_eager_limit", kTcpEagerLimit});
  // Every core to every rank; the executor pins each worker's threads
  // itself (worker_thread_core). Open MPI binds each of two ranks or fewer
  // to one core: a GPU rank's launches, communication and summing threads
  // shared it, and an emulated cluster's daemons each bound their rank to
  // core 0 (docs/results.md).
  if (!binding_set(command)) command.insert(command.end(), {"--bind-to", "none"});
  command.insert(command.end(), {"-np", std::to_string(ranks), executable});
  command.insert(command.end(), rank_args.begin(), rank_args.end());
  return command;
}

std::string bound_rank_note(int64_t workers, int64_t usable, int64_t online) {
  const int64_t wanted = std::min(online, cores_per_worker(workers, online));
  if (usable >= online || wanted <= usable) return "";
  return "trainsim: note: this rank may run on " + std::to_string(usable) + " of the " + std::to_string(online) +
         " cores this computer has online, where its worker's threads would take " + std::to_string(wanted) +
         " (mpirun binds each rank of a job of two or fewer to one core); `mpirun --bind-to none` leaves the cores "
         "to trainsim, which pins each thread itself, as --launcher mpi does";
}

std::string bound_rank_note(int64_t workers) {
  return bound_rank_note(workers, usable_cores(), std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string this_executable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("cannot find trainsim's own executable: " + error.message());
  return self.string();
}

std::string progress_line(int64_t done, int64_t total) {
  return kProgressTag + std::to_string(done) + " " + std::to_string(total);
}

bool read_progress_line(const std::string& line, int64_t& done, int64_t& total) {
  if (line.rfind(kProgressTag, 0) != 0) return false;
  std::istringstream in(line.substr(std::strlen(kProgressTag)));
  return static_cast<bool>(in >> done >> total);
}

bool read_lost_rank(const std::string& line, LostRank& lost) {
  static const std::regex pattern(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  std::smatch m;
  if (!std::regex_search(line, m, pattern)) return false;
  lost = {std::stoll(m[1].str()), m[2].str(), std::stoi(m[3].str())};
  return true;
}

void launch_ranks(const LaunchOptions& o, int64_t ranks, const std::vector<std::string>& rank_args,
                  CommandContext& ctx, const std::string& what, bool quiet) {
  if (!runnable(o.mpirun)) {
    throw InputError("--mpirun", "'" + o.mpirun + "' is not a program here",
                     "Open MPI's mpirun (Debian's openmpi-bin), or its path");
  }
  const std::vector<std::string> command = mpirun_command(o, ranks, rank_args, this_executable());
  int out_fd = -1, err_fd = -1;
  const pid_t pid = start(command, out_fd, err_fd);
  LaunchWatchdog watchdog(pid);  // ends the job should this process end first
  ProgressBar bar(ctx.err, what, !quiet);
  int64_t done = 0, total = 0;
  LostRank lost;
  std::string out_pending, err_pending;
  std::array<pollfd, 2> fds{pollfd{out_fd, POLLIN, 0}, pollfd{err_fd, POLLIN, 0}};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    if (fds[0].fd >= 0 && fds[0].revents != 0 &&
        !drain(fds[0].fd, out_pending, [&](const std::string& line) { ctx.out << line << '\n' << std::flush; })) {
      close(fds[0].fd);
      fds[0].fd = -1;
    }
    if (fds[1].fd >= 0 && fds[1].revents != 0 && !drain(fds[1].fd, err_pending, [&](const std::string& line) {
          if (read_progress_line(line, done, total)) return bar.update(done, total);
          if (lost.rank < 0) read_lost_rank(line, lost);
          bar.finish();
          ctx.err << line << '\n' << std::flush;
        })) {
      close(fds[1].fd);
      fds[1].fd = -1;
    }
  }
  bar.finish();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  watchdog.finished();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) return;
  if (lost.rank >= 0) {
    const char* name = strsignal(lost.signal);
    throw std::runtime_error("rank " + std::to_string(lost.rank) + " on host " + lost.host + " was lost to signal " +
                             std::to_string(lost.signal) + " (" + (name != nullptr ? name : "?") + ") " +
                             (total > 0 ? "after iteration " + std::to_string(done) + " of " + std::to_string(total)
                                        : "before the first iteration") +
                             "; mpirun stopped the other ranks (status " + std::to_string(code) + ")");
  }
  throw std::runtime_error(command.front() + " exited with status " + std::to_string(code) +
                           " (the ranks' messages are above)");
}

}  // namespace trainsim
