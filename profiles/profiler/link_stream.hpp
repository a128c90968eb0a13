// A TCP stream between two processes, timed by the system time of the two
// threads that move it: where the processes are emulated hosts of one
// computer, the kernel's core time for the bytes crossing the link between
// them (Cluster::link_kernel_s_per_byte; transport_probe.cpp). Blocking
// sockets, so neither end spins; every wait is bounded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// The receiving end: a socket listening on every address of this host, on a
// port the kernel chose.
class LinkStreamListener {
 public:
  // Throws std::runtime_error where no socket can listen.
  LinkStreamListener();
  ~LinkStreamListener();
  LinkStreamListener(const LinkStreamListener&) = delete;
  LinkStreamListener& operator=(const LinkStreamListener&) = delete;

  int port() const { return port_; }
  // Waits up to `timeout_s` for one sender, then reads its stream until it
  // closes: this thread's system time over the reads, or -1 where no sender
  // came or the stream broke.
  double receive_sys_s(double timeout_s);

 private:
  int fd_ = -1;
  int port_ = 0;
};

// System (kernel) time so far, in seconds: of this thread, or of the whole
// process (getrusage).
enum class SystemTimeOf { kThread, kProcess };
double system_time_s(SystemTimeOf of);

// This host's IPv4 addresses but loopback, of interfaces that are up.
std::vector<std::string> host_addresses();

// Connects to the first of `addresses` that accepts on `port` (each try
// given `timeout_s`), sends `bytes` and closes: this thread's system time
// over the sends, or -1 where no address accepted or the stream broke.
double send_link_stream_sys_s(const std::vector<std::string>& addresses, int port, int64_t bytes, double timeout_s);

}  // namespace trainsim
