// The timed TCP stream of link_stream.hpp.
#include "profiles/profiler/link_stream.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <stdexcept>

namespace trainsim {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

timeval as_timeval(double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>(std::lround((seconds - static_cast<double>(tv.tv_sec)) * 1e6));
  return tv;
}

// A socket whose every send, receive and connect gives up after timeout_s.
int timed_socket(double timeout_s) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const timeval tv = as_timeval(timeout_s);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

double system_time_s(SystemTimeOf of) {
  rusage usage{};
  getrusage(of == SystemTimeOf::kThread ? RUSAGE_THREAD : RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_stime.tv_sec) + 1e-6 * static_cast<double>(usage.ru_stime.tv_usec);
}

LinkStreamListener::LinkStreamListener() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (fd_ < 0 || bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 || listen(fd_, 1) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd_ >= 0) close(fd_);
    throw std::runtime_error("link stream: no socket can listen here");
  }
  port_ = ntohs(address.sin_port);
}

LinkStreamListener::~LinkStreamListener() { close(fd_); }

double LinkStreamListener::receive_sys_s(double timeout_s) {
  pollfd waiting{fd_, POLLIN, 0};
  if (poll(&waiting, 1, static_cast<int>(timeout_s * 1000)) != 1) return -1;
  const int stream = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (stream < 0) return -1;
  const timeval tv = as_timeval(timeout_s);
  setsockopt(stream, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<char> buffer(kChunkBytes);
  const double start_s = system_time_s(SystemTimeOf::kThread);
  for (;;) {
    const ssize_t got = recv(stream, buffer.data(), buffer.size(), 0);
    if (got > 0) continue;
    if (got < 0 && errno == EINTR) continue;
    close(stream);
    return got == 0 ? system_time_s(SystemTimeOf::kThread) - start_s : -1;
  }
}

std::vector<std::string> host_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) != 0 ||
        (a->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) out.emplace_back(text);
  }
  freeifaddrs(list);
  return out;
}

double send_link_stream_sys_s(const std::vector<std::string>& addresses, int port, int64_t bytes, double timeout_s) {
  for (const std::string& host : addresses) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) continue;
    const int fd = timed_socket(timeout_s);
    if (fd < 0) return -1;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      close(fd);
      continue;
    }
    const std::vector<char> chunk(kChunkBytes, 'x');
    const double start_s = system_time_s(SystemTimeOf::kThread);
    for (int64_t left = bytes; left > 0;) {
      const auto size = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(chunk.size())));
      const ssize_t sent = send(fd, chunk.data(), size, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) {
        close(fd);
        return -1;
      }
      left -= sent;
    }
    const double sys_s = system_time_s(SystemTimeOf::kThread) - start_s;
    close(fd);
    return sys_s;
  }
  return -1;
}

}  // namespace trainsim
