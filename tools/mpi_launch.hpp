// `--launcher mpi`: a command that starts its own ranks with mpirun, one
// per worker, on this machine, on the hosts named, or on an emulated
// cluster (`trainsim cluster emulate`), and reports for them: their output
// passes through, rank 0's progress drives one progress bar here, and a rank
// lost to a signal ends the run with one line naming the rank, its host and
// the last iteration rank 0 reported.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/commands.hpp"

namespace trainsim {

// Open MPI's TCP eager limit the launcher and emulated clusters set (1 GiB:
// every message the executor sends goes eagerly; see mpirun_command).
inline constexpr const char* kTcpEagerLimit = "1073741824";

struct LaunchOptions {
  std::string launcher = "local";  // local: this process runs every worker; mpi: mpirun starts one rank each
  std::string hosts;               // mpirun's --host list: a,b or a:2,b:2
  std::string hostfile;            // mpirun's --hostfile
  std::string emulated;            // an emulated cluster's name: its hostfile and settings
  std::string mpirun = "mpirun";
  bool progress_lines = false;     // (hidden) this rank reports progress to the launcher as lines
};

// --launcher, --hosts, --hostfile, --emulated, --mpirun and the hidden
// --progress-lines the launcher gives its ranks.
void add_launch_options(CLI::App& cmd, LaunchOptions& o);

// Whether mpirun (Open MPI's environment, or a PMI launcher's) started this process.
bool under_mpirun();

// InputError for options that do not go together: hosts without
// --launcher mpi, more than one source of hosts, --launcher mpi under mpirun.
void check_launch_options(const LaunchOptions& o);

// The mpirun command line that starts `ranks` ranks of `executable` with
// `rank_args`: the hosts' options, then the defaults the environment does
// not set (root allowed when root runs it; Open MPI's daemons without the
// shared-memory topology; more ranks than cores where no hosts are named;
// the ranks bound to no core, the executor pinning their threads).
std::vector<std::string> mpirun_command(const LaunchOptions& o, int64_t ranks, const std::vector<std::string>& rank_args,
                                        const std::string& executable);

// A rank that may run on `usable` of its computer's `online` cores, where
// the executor would give its worker's threads more of them
// (cores_per_worker of `workers` on `online` cores, exec/interpreter.hpp):
// the note that says so, and how to leave the cores to trainsim (mpirun
// binds each rank of a job of two or fewer to one core); empty otherwise.
std::string bound_rank_note(int64_t workers, int64_t usable, int64_t online);
// The same for this process: its usable cores among the online ones.
std::string bound_rank_note(int64_t workers);

// This process's executable (/proc/self/exe).
std::string this_executable();

// Runs mpirun_command(o, ranks, rank_args, this_executable()): the ranks'
// standard output to ctx.out, their standard error to ctx.err but for rank
// 0's progress lines, which drive a progress bar called `what` (none when
// `quiet`). Returns when mpirun exits 0; otherwise throws std::runtime_error
// with one line: the rank lost, its host, its signal and the last iteration
// reported, or mpirun's exit status (the ranks' own messages are above it).
void launch_ranks(const LaunchOptions& o, int64_t ranks, const std::vector<std::string>& rank_args,
                  CommandContext& ctx, const std::string& what, bool quiet);

// The line a rank started with --progress-lines writes to standard error
// after `done` of `total` steps, and its reading (false for another line).
std::string progress_line(int64_t done, int64_t total);
bool read_progress_line(const std::string& line, int64_t& done, int64_t& total);

// mpirun's report of a rank killed by a signal ("... process rank R with PID
// P on node H exited on signal S ..."), read; false for another line.
struct LostRank {
  int64_t rank = -1;
  std::string host;
  int signal = 0;
};
bool read_lost_rank(const std::string& line, LostRank& lost);

}  // namespace trainsim
