// `--launcher mpi` without starting mpirun: the command line it builds, the
// lines it reads back from the ranks and from mpirun, and the option
// errors. tests/mpi/launcher.py runs it for real (ctest mpi_launcher).
#include "tools/mpi_launch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "model/error.hpp"
#include "tests/tools/cli_fixtures.hpp"
#include "tools/emulate.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

bool has(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

TEST(MpiLaunch, TheCommandStartsOneRankPerWorkerOnTheHostsNamed) {
  LaunchOptions o;
  o.launcher = "mpi";
  o.hosts = "a:2,b:2";
  const auto command = mpirun_command(o, 4, {"run", "--model", "fmnist-mlp"}, "/opt/trainsim");
  ASSERT_GE(command.size(), 9u);
  EXPECT_EQ(command.front(), "mpirun");
  const auto host = std::find(command.begin(), command.end(), "--host");
  ASSERT_NE(host, command.end());
  EXPECT_EQ(*(host + 1), "a:2,b:2");
  const auto np = std::find(command.begin(), command.end(), "-np");
  ASSERT_NE(np, command.end());
  EXPECT_EQ(*(np + 1), "4");
  EXPECT_EQ(*(np + 2), "/opt/trainsim");
  EXPECT_EQ(command.back(), "fmnist-mlp");
  EXPECT_FALSE(has(command, "--oversubscribe")) << "hosts named: their slots count";
  EXPECT_EQ(has(command, "--allow-run-as-root"), geteuid() == 0 && std::getenv("OMPI_ALLOW_RUN_AS_ROOT") == nullptr);
}

TEST(MpiLaunch, WithoutHostsTheRanksShareThisMachine) {
  LaunchOptions o;
  o.launcher = "mpi";
  o.mpirun = "/usr/bin/mpiexec";
  const auto command = mpirun_command(o, 3, {"run"}, "/opt/trainsim");
  EXPECT_EQ(command.front(), "/usr/bin/mpiexec");
  EXPECT_FALSE(has(command, "--host"));
  EXPECT_FALSE(has(command, "--hostfile"));
  EXPECT_EQ(has(command, "--oversubscribe"), std::getenv("OMPI_MCA_rmaps_base_oversubscribe") == nullptr);
  // Each Open MPI parameter is given once: mpirun refuses one listed twice.
  EXPECT_LE(std::count(command.begin(), command.end(), "rtc_hwloc_vmhole"), 1);
  // Messages go eagerly over TCP (a rendezvous halved a ring's exchange),
  // unless the environment chose otherwise.
  const auto eager = std::find(command.begin(), command.end(), "btl_tcp_eager_limit");
  if (std::getenv("OMPI_MCA_btl_tcp_eager_limit") == nullptr) {
    ASSERT_NE(eager, command.end());
    EXPECT_EQ(*(eager + 1), kTcpEagerLimit);
  } else {
    EXPECT_EQ(eager, command.end());
  }
}

// Open MPI binds each of two ranks or fewer to one core; the ranks are
// left unbound, the executor pinning each worker's threads, unless the
// environment chose a binding.
TEST(MpiLaunch, TheRanksAreBoundToNoCoreUnlessTheEnvironmentBindsThem) {
  LaunchOptions o;
  o.launcher = "mpi";
  for (const std::string& hosts : {std::string(), std::string("a,b")}) {
    o.hosts = hosts;
    const auto command = mpirun_command(o, 2, {"run"}, "/opt/trainsim");
    const auto bind = std::find(command.begin(), command.end(), "--bind-to");
    if (std::getenv("OMPI_MCA_hwloc_base_binding_policy") == nullptr) {
      ASSERT_NE(bind, command.end()) << "hosts: '" << hosts << "'";
      EXPECT_EQ(*(bind + 1), "none");
      EXPECT_EQ(std::count(command.begin(), command.end(), "--bind-to"), 1);
      EXPECT_LT(bind - command.begin(), std::find(command.begin(), command.end(), "-np") - command.begin())
          << "an option of mpirun's, not of the ranks'";
    } else {
      EXPECT_EQ(bind, command.end());
    }
  }
  // An emulated cluster's own options bind none, once.
  EmulatedCluster c;
  c.name = "bt";
  c.folder = "/run/trainsim-emulate/bt";
  c.subnet = "10.77.1.0/24";
  c.link = "1gbit";
  const std::string options = c.mpirun_options();
  EXPECT_NE(options.find(" --bind-to none "), std::string::npos) << options;
}

// A rank mpirun bound to fewer cores than the executor would give its
// worker's threads on this computer is told so; one whose binding takes
// nothing from them is not.
TEST(MpiLaunch, ARankBoundToFewerCoresThanItsThreadsWouldTakeIsTold) {
  // Two ranks on 16 cores: each worker's compute thread and its other
  // threads on two cores of their own, where mpirun left each rank one.
  const std::string note = bound_rank_note(2, 1, 16);
  EXPECT_NE(note.find("may run on 1 of the 16 cores this computer has online"), std::string::npos) << note;
  EXPECT_NE(note.find("would take 2"), std::string::npos) << note;
  EXPECT_NE(note.find("--bind-to none"), std::string::npos) << note;
  // One rank on two cores: its threads would take both.
  EXPECT_FALSE(bound_rank_note(1, 1, 2).empty());
  // Two ranks on two cores, one each: their threads share it anyway.
  EXPECT_TRUE(bound_rank_note(2, 1, 2).empty());
  // Every core usable, or as many as the threads take.
  EXPECT_TRUE(bound_rank_note(2, 16, 16).empty());
  EXPECT_TRUE(bound_rank_note(2, 2, 16).empty());
  EXPECT_TRUE(bound_rank_note(1, 1, 1).empty());
}

// Across MPI a cluster's links are measured between ranks: one rank has
// none, and is refused before mpirun starts.
TEST(MpiLaunch, AClusterOfOneRankIsRefusedBeforeTheRankStarts) {
  auto r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:1", "--launcher", "mpi", "--mpirun",
                    "/nonexistent/mpirun"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--devices: is cpu:1 across MPI processes: one rank"), std::string::npos) << r.err;
  r = run_cli({"profile", "--model", "fmnist-mlp", "--device", "cpu:1", "--out", "/tmp/unwritten-profile.json",
               "--cluster-out", "/tmp/unwritten-cluster.json", "--launcher", "mpi", "--mpirun", "/nonexistent/mpirun"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--cluster-out: is asked of one rank"), std::string::npos) << r.err;
}

// mpirun's --host list gives a host one slot, or N as name:N; more ranks
// than slots are refused in one line before mpirun starts.
TEST(MpiLaunch, MoreRanksThanTheHostsSlotsAreRefused) {
  LaunchOptions o;
  o.launcher = "mpi";
  o.hosts = "a,b:2";
  EXPECT_NO_THROW(mpirun_command(o, 3, {"run"}, "/opt/trainsim"));
  try {
    mpirun_command(o, 4, {"run"}, "/opt/trainsim");
    ADD_FAILURE() << "4 ranks on 3 slots";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gives 3 slots for 4 ranks"), std::string::npos) << e.what();
  }
  for (const std::string bad : {"a,,b", "a:0", "a:x", "a b", ":2"}) {
    o.hosts = bad;
    EXPECT_THROW(mpirun_command(o, 1, {"run"}, "/opt/trainsim"), InputError) << bad;
  }
}

TEST(MpiLaunch, ProgressLinesAndLostRanksAreRead) {
  int64_t done = 0, total = 0;
  EXPECT_TRUE(read_progress_line(progress_line(17, 100), done, total));
  EXPECT_EQ(done, 17);
  EXPECT_EQ(total, 100);
  EXPECT_FALSE(read_progress_line("training 17/100", done, total));
  LostRank lost;
  // Open MPI 4.1's words when a rank dies of a signal.
  EXPECT_TRUE(read_lost_rank(
      "mpirun noticed that process rank 1 with PID 4242 on node tsim-h2 exited on signal 9 (Killed).", lost));
  EXPECT_EQ(lost.rank, 1);
  EXPECT_EQ(lost.host, "tsim-h2");
  EXPECT_EQ(lost.signal, 9);
  EXPECT_FALSE(read_lost_rank("Primary job  terminated normally, but 1 process returned", lost));
}

TEST(MpiLaunch, HostsNeedTheMpiLauncherAndOneSource) {
  const std::vector<std::string> run{"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2",
                                     "--iterations", "1", "--quiet"};
  auto with = [&run](std::vector<std::string> extra) {
    std::vector<std::string> args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  auto r = with({"--hosts", "a,b"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--hosts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--launcher mpi"), std::string::npos) << r.err;
  r = with({"--launcher", "mpi", "--hosts", "a,b", "--hostfile", "/etc/hostname"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("one of --hosts, --hostfile, --emulated"), std::string::npos) << r.err;
  r = with({"--launcher", "mpi", "--hostfile", "/nonexistent/hostfile"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--hostfile"), std::string::npos) << r.err;
  r = with({"--launcher", "mpi", "--emulated", "nosuch"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--emulated"), std::string::npos) << r.err;
  r = with({"--launcher", "mpi", "--mpirun", "/nonexistent/mpirun"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--mpirun"), std::string::npos) << r.err;
  r = with({"--launcher", "ssh"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--launcher"), std::string::npos) << r.err;
}

// A strategy or setting the ranks would refuse is refused once, before
// mpirun starts ranks that would each refuse it.
TEST(MpiLaunch, StrategiesAndSettingsAreCheckedBeforeTheRanksStart) {
  const std::vector<std::string> launch{"--model", "fmnist-mlp", "--devices",           "cpu:2",  "--launcher",
                                        "mpi",     "--mpirun",   "/nonexistent/mpirun", "--quiet"};
  for (const auto& [command, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"run", "--strategy", "dp-ring", "--set", "algorithm=bogus"}, "--set algorithm"},
           {{"run", "--strategy", "gpipe", "--set", "microbatches=0"}, "--set microbatches"},
           {{"run", "--strategy", "nosuch"}, "--strategy"},
           {{"validate", "--strategies", "dp-ring,nosuch"}, "--strategies"},
           {{"validate", "--rounds", "3", "--max-rounds", "2"}, "--max-rounds"}}) {
    std::vector<std::string> args = command;
    args.insert(args.end(), launch.begin(), launch.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find(flag + ":"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("--mpirun"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Ranks all on this computer would each refuse a GPU it does not have:
// refused once, before mpirun starts; with hosts named, the GPUs are
// theirs to check.
TEST(MpiLaunch, GpusOfThisComputerAreCheckedBeforeTheRanksStart) {
  const std::vector<std::string> run{"run",        "--model", "fmnist-mlp", "--strategy",          "dp-ring",
                                     "--launcher", "mpi",     "--mpirun",   "/nonexistent/mpirun", "--quiet"};
  for (const std::string devices : {"cuda:999x2", "cuda:998,999"}) {
    std::vector<std::string> args = run;
    args.insert(args.end(), {"--devices", devices});
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << devices;
    EXPECT_NE(r.err.find("--devices:"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    args.insert(args.end(), {"--hosts", "a,b"});
    const auto elsewhere = run_cli(args);
    EXPECT_EQ(elsewhere.err.find("--devices:"), std::string::npos) << elsewhere.err;
    EXPECT_NE(elsewhere.err.find("--mpirun"), std::string::npos) << elsewhere.err;
  }
}

// An emulated cluster's ranks keep 5 ms of their link in a socket buffer,
// 128 KiB at least; mpirun's options say so.
TEST(EmulatedCluster, SocketBuffersHoldFiveMillisecondsOfTheLink) {
  EXPECT_EQ(emulated_socket_buffer_bytes("200mbit"), 131072);  // 125,000 B is below the floor
  EXPECT_EQ(emulated_socket_buffer_bytes("1gbit"), 625000);
  EXPECT_EQ(emulated_socket_buffer_bytes("10gbit"), 6250000);
  EmulatedCluster c;
  c.link = "1gbit";
  c.subnet = "10.77.1.0/24";
  EXPECT_NE(c.mpirun_options().find("--mca btl_tcp_sndbuf 625000"), std::string::npos) << c.mpirun_options();
}

// An MTU the link's token bucket cannot pass (tbf drops such packets), or
// below IPv6's least, is refused before anything is made.
TEST(EmulatedCluster, AnMtuTheLinksBucketCannotPassIsRefused) {
  auto up = [](const std::string& link, const std::string& mtu) {
    return run_cli({"cluster", "emulate", "up", "--hosts", "2", "--link", link, "--mtu", mtu, "--name", "mtut"});
  };
  auto r = up("100mbit", "17000");  // the bucket: 16 KB, more than 1 ms of the link
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--mtu: is 17000 (1280 to 16384 bytes"), std::string::npos) << r.err;
  r = up("1gbit", "70000");  // a veth's limit
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("1280 to 65535 bytes; the link's tbf bucket holds 125000"), std::string::npos) << r.err;
  r = up("1gbit", "1000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--mtu: is 1000"), std::string::npos) << r.err;
}

// The links' bucket: what 1 ms of the link sends, 16 KB at least, unless
// --burst says otherwise; one smaller than a packet (the MTU) or over 1 GiB
// is refused before anything is made.
TEST(EmulatedCluster, TheBucketHoldsAMillisecondOfTheLinkOrWhatBurstSays) {
  EXPECT_EQ(emulated_burst_bytes("1gbit"), 125000);
  EXPECT_EQ(emulated_burst_bytes("200mbit"), 25000);
  EXPECT_EQ(emulated_burst_bytes("100mbit"), 16384);  // 12,500 B is below the floor
  auto up = [](const std::string& burst, const std::string& mtu) {
    return run_cli({"cluster", "emulate", "up", "--hosts", "2", "--link", "1gbit", "--mtu", mtu, "--burst", burst,
                    "--name", "bkt"});
  };
  auto r = up("8000", "9000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--burst: is 8000 (the bytes of the links' tbf bucket, from the MTU (9000) to 1 GiB"),
            std::string::npos)
      << r.err;
  r = up("2000000000", "9000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--burst: is 2000000000"), std::string::npos) << r.err;
  r = up("16384", "17000");  // a bucket asked for below the MTU: --burst is named
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--burst: is 16384"), std::string::npos) << r.err;
  r = run_cli({"cluster", "emulate", "up", "--link", "fast", "--burst", "65536", "--name", "bkt"});
  EXPECT_EQ(r.status, 2);  // the rate is checked with a bucket asked for too
  EXPECT_NE(r.err.find("--link"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trainsim
