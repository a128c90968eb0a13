// The timed TCP stream behind the MPI probe's link_kernel_s_per_byte
// (profiles/profiler/link_stream.hpp), over this host's loopback.
#include "profiles/profiler/link_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace trainsim {
namespace {

TEST(LinkStream, BothEndsTimeTheirSystemWorkOverAWholeStream) {
  // The kernel splits a thread's time into user and system by the clock
  // ticks that land in each, so one stream of a few milliseconds may read
  // 0 at an end; three streams of 64 MiB take it some system time.
  double total_s = 0;
  for (int stream = 0; stream < 3; ++stream) {
    LinkStreamListener listener;
    ASSERT_GT(listener.port(), 0);
    double received_s = -2;
    std::thread receiver([&] { received_s = listener.receive_sys_s(10); });
    // The first address that accepts: a wrong one first, then loopback.
    const double sent_s = send_link_stream_sys_s({"not an address", "127.0.0.1"}, listener.port(), 64 << 20, 10);
    receiver.join();
    EXPECT_GE(sent_s, 0) << "stream " << stream;  // -1: it did not go through
    EXPECT_GE(received_s, 0) << "stream " << stream;
    EXPECT_LT(sent_s + received_s, 30) << "stream " << stream;
    total_s += sent_s + received_s;
  }
  EXPECT_GT(total_s, 0);
}

TEST(LinkStream, NoPeerEndsInMinusOneWithinTheTimeout) {
  LinkStreamListener listener;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(listener.receive_sys_s(0.2), -1);  // nobody connects
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(send_link_stream_sys_s({}, listener.port(), 1 << 20, 1), -1);  // no address
  EXPECT_EQ(send_link_stream_sys_s({"127.0.0.1"}, 1, 1 << 20, 1), -1);     // refused: no service on port 1
}

TEST(LinkStream, HostAddressesLeaveLoopbackOut) {
  for (const std::string& address : host_addresses()) EXPECT_NE(address.rfind("127.", 0), 0u) << address;
}

}  // namespace
}  // namespace trainsim
