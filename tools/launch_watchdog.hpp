// A process beside `--launcher mpi` that ends mpirun's job should the
// launcher end before it: killed (SIGKILL), the launcher can stop nothing
// itself, and mpirun, told by its parent-death signal, may wait for ever on
// daemons it cannot reach (an emulated cluster torn down at once), its ranks
// running on. The watchdog sees the launcher go (the pipe it holds closes
// unwritten), gives mpirun 3 s to end the job itself, then kills mpirun and
// every process under it, daemons and ranks in their own process groups too.
#pragma once

#include <sys/types.h>

namespace trainsim {

class LaunchWatchdog {
 public:
  // Starts the watchdog of `mpirun` (a child of this process).
  explicit LaunchWatchdog(pid_t mpirun);
  // Tells the watchdog to go: quietly once mpirun has been waited for
  // (finished()), else ending mpirun's job as if the launcher had died.
  ~LaunchWatchdog();
  LaunchWatchdog(const LaunchWatchdog&) = delete;
  LaunchWatchdog& operator=(const LaunchWatchdog&) = delete;

  // mpirun has ended and been waited for: nothing is left to stop.
  void finished() { finished_ = true; }

 private:
  int fd_ = -1;  // the write end; the watchdog holds the read end
  pid_t watchdog_ = -1;
  bool finished_ = false;
};

}  // namespace trainsim
