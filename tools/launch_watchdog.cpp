// mpirun's watchdog (launch_watchdog.hpp). The watchdog is forked from a
// process that may run threads, so it calls only async-signal-safe
// functions: raw reads of /proc, kill, nanosleep, _exit.
#include "tools/launch_watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <ctime>

namespace trainsim {
namespace {

constexpr int kMaxProcesses = 65536;
constexpr int kGraceRounds = 30;  // of 100 ms: mpirun's time to end the job itself

struct Tree {
  pid_t pid[kMaxProcesses];
  pid_t parent[kMaxProcesses];
  int count = 0;
};

// A process's parent from /proc/PID/stat ("pid (comm) state ppid ..."; comm
// may hold spaces and parentheses: the last ')' ends it); -1 if unreadable.
pid_t parent_of(const char* pid_text) {
  char path[64] = "/proc/";
  size_t n = 6;
  for (const char* c = pid_text; *c != '\0' && n < sizeof path - 6; ++c) path[n++] = *c;
  for (const char* c = "/stat"; *c != '\0'; ++c) path[n++] = *c;
  path[n] = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buffer[1024];
  const ssize_t got = read(fd, buffer, sizeof buffer - 1);
  close(fd);
  if (got <= 0) return -1;
  buffer[got] = '\0';
  const char* close_paren = nullptr;
  for (const char* c = buffer; *c != '\0'; ++c) {
    if (*c == ')') close_paren = c;
  }
  if (close_paren == nullptr || close_paren[1] == '\0' || close_paren[2] == '\0' || close_paren[3] == '\0') return -1;
  pid_t ppid = 0;
  for (const char* c = close_paren + 4; *c >= '0' && *c <= '9'; ++c) ppid = ppid * 10 + (*c - '0');
  return ppid;
}

// Every process on the machine with its parent.
void read_tree(Tree& t) {
  t.count = 0;
  const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buffer[8192];
  for (;;) {
    const long got = syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (got <= 0) break;
    for (long at = 0; at < got;) {
      const auto reclen = *reinterpret_cast<const unsigned short*>(buffer + at + 16);
      const char* name = buffer + at + 19;  // struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name
      at += reclen;
      if (name[0] < '0' || name[0] > '9' || t.count == kMaxProcesses) continue;
      pid_t pid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      const pid_t ppid = parent_of(name);
      if (ppid < 0) continue;
      t.pid[t.count] = pid;
      t.parent[t.count] = ppid;
      ++t.count;
    }
  }
  close(dir);
}

bool holds(const pid_t* set, int n, pid_t pid) {
  for (int i = 0; i < n; ++i) {
    if (set[i] == pid) return true;
  }
  return false;
}

// Adds to `found` every process under those already there.
void add_descendants(Tree& t, pid_t* found, int& n) {
  read_tree(t);
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < t.count && n < kMaxProcesses; ++i) {
      if (holds(found, n, t.parent[i]) && !holds(found, n, t.pid[i])) {
        found[n++] = t.pid[i];
        grew = true;
      }
    }
  }
}

[[noreturn]] void watch(int fd, pid_t mpirun) {
  char byte = 0;
  ssize_t got = 0;
  do {
    got = read(fd, &byte, 1);
  } while (got < 0 && errno == EINTR);
  if (got == 1) _exit(0);  // the launcher waited for mpirun: nothing is left
  static Tree tree;
  static pid_t found[kMaxProcesses];
  int n = 0;
  found[n++] = mpirun;
  const timespec tick{0, 100'000'000};
  int round = 0;
  do {  // while mpirun lives, the processes it started are its descendants
    add_descendants(tree, found, n);
    nanosleep(&tick, nullptr);
  } while (++round < kGraceRounds && kill(mpirun, 0) == 0);
  for (int i = 0; i < n; ++i) kill(found[i], SIGKILL);
  _exit(0);
}

}  // namespace

LaunchWatchdog::LaunchWatchdog(pid_t mpirun) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;  // no watchdog: mpirun's parent-death signal alone
  const pid_t pid = fork();
  if (pid == 0) {
    // Nothing of the launcher's held open (a harness reading its output
    // would wait for the watchdog too), and not in its process group (a
    // Ctrl-C there leaves the watchdog to do its work).
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    const long most = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (most > 0 && most < 65536 ? most : 65536); ++fd) {
      if (fd != fds[0]) close(fd);
    }
    setsid();
    watch(fds[0], mpirun);
  }
  close(fds[0]);
  if (pid < 0) {
    close(fds[1]);
    return;
  }
  fd_ = fds[1];
  watchdog_ = pid;
}

LaunchWatchdog::~LaunchWatchdog() {
  if (fd_ < 0) return;
  if (finished_) {
    const char done = 1;
    (void)!write(fd_, &done, 1);
  }
  close(fd_);
  int status = 0;
  if (finished_) {  // it exits at once: reap it
    while (waitpid(watchdog_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace trainsim
