// MpiSession and MpiTransport: non-blocking sends whose buffers live until
// MPI is done with them, matched-probe receives that poll so an abort
// wakes them.
#include "exec/mpi/mpi_transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "exec/tensor/range_network.hpp"
#include "exec/transport/collectives.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

// An MPI call's error as a failure naming the call (the transport's
// communicators return errors instead of aborting the job): most often a
// peer process gone, not a fault of this one's.
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<size_t>(length)));
}

int size_of(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

}  // namespace

int64_t tcp_eager_bytes_of(const char* btl, const char* pml, const char* eager_limit) {
  if (btl == nullptr || (pml != nullptr && std::string(pml) != "ob1")) return 0;
  std::istringstream list(btl);
  bool tcp = false;
  for (std::string name; std::getline(list, name, ',');) {
    if (name != "tcp" && name != "self") return 0;
    tcp = tcp || name == "tcp";
  }
  if (!tcp) return 0;
  if (eager_limit == nullptr) return 65536;  // Open MPI's default TCP eager limit
  char* end = nullptr;
  const long long limit = std::strtoll(eager_limit, &end, 10);
  return end != eager_limit && *end == '\0' && limit > 0 ? limit : 0;
}

int64_t tcp_send_buffer_bytes_of(int64_t eager_bytes, const char* sndbuf) {
  if (eager_bytes <= 0 || sndbuf == nullptr) return 0;
  char* end = nullptr;
  const long long bytes = std::strtoll(sndbuf, &end, 10);
  return end != sndbuf && *end == '\0' && bytes > 0 ? bytes : 0;
}

std::vector<int> mpi_host_of_ranks(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int lowest = rank;
  check_mpi(MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
  MPI_Comm_free(&node);
  std::vector<int> lowest_of(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&lowest, 1, MPI_INT, lowest_of.data(), 1, MPI_INT, comm), "MPI_Allgather");
  std::vector<int> host_of(static_cast<size_t>(size), -1), host_of_lowest(static_cast<size_t>(size), -1);
  int hosts = 0;
  for (int r = 0; r < size; ++r) {
    int& host = host_of_lowest[static_cast<size_t>(lowest_of[static_cast<size_t>(r)])];
    if (host < 0) host = hosts++;
    host_of[static_cast<size_t>(r)] = host;
  }
  return host_of;
}

namespace {

// How long an aborted transport's end waits for its sends still in flight.
constexpr auto kAbortedSendsWait = std::chrono::seconds(2);

// Waits for `request`, asleep between tests: 50 us at first, doubling up to
// 2 ms, so a rank that waits out a run of the others (a plan of fewer
// workers than ranks, the profile rank 0 takes alone) wakes 500 times a
// second on their cores, not thousands.
void wait_asleep(MPI_Request& request, const char* call) {
  auto pause = std::chrono::microseconds(50);
  for (int done = 0;;) {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), call);
    if (done != 0) return;
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::microseconds(2000));
  }
}

}  // namespace

std::string mpi_broadcast_text(const std::string& text, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  auto size = static_cast<long long>(text.size());
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(&size, 1, MPI_LONG_LONG, 0, comm, &request), "MPI_Ibcast");
  wait_asleep(request, "MPI_Ibcast");
  std::string out = rank == 0 ? text : std::string(static_cast<size_t>(size), '\0');
  TRAINSIM_CHECK(size <= std::numeric_limits<int>::max(), "mpi_broadcast_text: over 2 GiB");
  check_mpi(MPI_Ibcast(out.data(), static_cast<int>(size), MPI_CHAR, 0, comm, &request), "MPI_Ibcast");
  wait_asleep(request, "MPI_Ibcast");
  return out;
}

void mpi_abort_job(int status) {
  MPI_Abort(MPI_COMM_WORLD, status);
  std::abort();  // MPI_Abort does not return
}

std::vector<double> mpi_all_gather(double value, MPI_Comm comm) {
  std::vector<double> out(static_cast<size_t>(size_of(comm)));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, comm, &request), "MPI_Iallgather");
  wait_asleep(request, "MPI_Iallgather");
  return out;
}

MpiSession::MpiSession(int* argc, char*** argv) : unwinding_(std::uncaught_exceptions()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    owns_ = true;
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      owns_ = false;
      throw InputError("MPI", "gives threads level " + std::to_string(provided),
                       "an MPI library built with MPI_THREAD_MULTIPLE (Open MPI 4: ompi_info's \"MPI_THREAD_MULTIPLE: yes\")");
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized && std::uncaught_exceptions() <= unwinding_) MPI_Finalize();
}

MpiTransport::MpiTransport(MPI_Comm comm) : Transport(size_of(comm)) {
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  TRAINSIM_CHECK(level == MPI_THREAD_MULTIPLE, "MpiTransport: MPI is not initialized with MPI_THREAD_MULTIPLE");
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_dup(comm_, &library_comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(comm_, &kept_comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  for (int r = 0; r < workers(); ++r) arrivals_.push_back(std::make_unique<KeptArrivals>());
  int* upper = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upper, &found), "MPI_Comm_get_attr");
  max_tag_ = found != 0 && upper != nullptr ? *upper : 32767;  // the standard's least MPI_TAG_UB
  eager_bytes_ = tcp_eager_bytes_of(std::getenv("OMPI_MCA_btl"), std::getenv("OMPI_MCA_pml"),
                                    std::getenv("OMPI_MCA_btl_tcp_eager_limit"));
  send_buffer_bytes_ = tcp_send_buffer_bytes_of(eager_bytes_, std::getenv("OMPI_MCA_btl_tcp_sndbuf"));
}

std::unique_ptr<MpiTransport> MpiTransport::for_endpoints(int endpoints, MPI_Comm comm) {
  const int size = size_of(comm);
  if (endpoints > size) {
    throw InputError("mpirun", "started " + std::to_string(size) + " ranks for a plan of " + std::to_string(endpoints) +
                                   " workers and servers",
                     "a rank for each of the plan's workers and servers");
  }
  if (endpoints == size) return std::make_unique<MpiTransport>(comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm, rank < endpoints ? 0 : MPI_UNDEFINED, rank, &part), "MPI_Comm_split");
  if (part == MPI_COMM_NULL) return nullptr;
  auto transport = std::make_unique<MpiTransport>(part);  // duplicates it
  MPI_Comm_free(&part);
  return transport;
}

MpiTransport::~MpiTransport() {
  {
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    if (!aborted()) {
      // Where a peer died, the launcher ends this process too.
      for (auto& [request, buffer] : pending_) MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      // A failed run's peers may never receive what it still sends: a
      // while for those in flight, then each let go with its buffer kept
      // (MPI may still read it; the process is ending on the failure).
      // A send to a peer that died may fail its test: it is let go at once
      // (a destructor throws nothing).
      std::list<std::pair<MPI_Request, std::vector<float>>> failed;
      const auto until = std::chrono::steady_clock::now() + kAbortedSendsWait;
      while (true) {
        for (auto it = pending_.begin(); it != pending_.end();) {
          int done = 0;
          const auto next = std::next(it);
          if (MPI_Test(&it->first, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            failed.splice(failed.end(), pending_, it);
          } else if (done != 0) {
            pending_.erase(it);
          }
          it = next;
        }
        if (pending_.empty() || std::chrono::steady_clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      pending_.splice(pending_.end(), failed);
      static std::mutex abandoned_mutex;
      static auto* const abandoned = new std::list<std::pair<MPI_Request, std::vector<float>>>;  // never freed
      for (auto& [request, buffer] : pending_) {
        if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
      }
      const std::lock_guard<std::mutex> hold(abandoned_mutex);
      abandoned->splice(abandoned->end(), pending_);
    }
    pending_.clear();
  }
  MPI_Comm_free(&kept_comm_);
  MPI_Comm_free(&library_comm_);
  MPI_Comm_free(&comm_);
}

void MpiTransport::run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) {
  if (algorithm != CollectiveAlgorithm::kLibrary) return Transport::run_all_reduce(peers, data, algorithm);
  TRAINSIM_CHECK(peers.size() == workers(), "MpiTransport: algorithm=mpi over some of the ranks");
  TRAINSIM_CHECK(data.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
                 "MpiTransport: an AllReduce of more than 2^31 values");
  const std::lock_guard<std::mutex> lock(library_mutex_);
  if (library_member_) {
    const bool done = library_member_->all_reduce(
        data, [this](const std::string& bytes) { return mpi_broadcast_text(bytes, library_comm_); },
        [this] { return aborted(); });
    if (!done) throw_aborted();
    return;
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, library_comm_),
            "MPI_Allreduce");
}

bool MpiTransport::sums_kept(const std::vector<int>& group) const {
  return library_member_ != nullptr && library_member_->sums_kept() && static_cast<int>(group.size()) == workers();
}

void MpiTransport::run_all_reduce_kept(CollectivePeers& peers, std::span<KeptValues* const> arrays, int64_t floats,
                                       float scale) {
  TRAINSIM_CHECK(peers.size() == workers(), "MpiTransport: algorithm=mpi over some of the ranks");
  const std::lock_guard<std::mutex> lock(library_mutex_);
  const bool done = library_member_->all_reduce_kept(
      arrays, floats, scale, [this](const std::string& bytes) { return mpi_broadcast_text(bytes, library_comm_); },
      [this] { return aborted(); });
  if (!done) throw_aborted();
}

bool MpiTransport::passes_kept(int, int) const { return library_member_ != nullptr && library_member_->passes_kept(); }

void MpiTransport::open_kept_paths(const std::vector<std::pair<int, int>>& directions) {
  if (directions.empty() || !passes_kept(rank_, rank_)) return;
  const std::lock_guard<std::mutex> lock(library_mutex_);
  const bool done = library_member_->open_paths(
      directions, [this](const std::string& bytes) { return mpi_broadcast_text(bytes, library_comm_); },
      [this] { return aborted(); });
  if (!done) throw_aborted();
}

namespace {

// A passed array's header: its tag and its size, as the floats of a message.
constexpr int kKeptHeaderFloats = 4;
std::vector<float> kept_header(int64_t tag, int64_t floats) {
  const int64_t fields[2] = {tag, floats};
  std::vector<float> header(kKeptHeaderFloats);
  std::memcpy(header.data(), fields, sizeof(fields));
  return header;
}

}  // namespace

void MpiTransport::deliver_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats) {
  check_own(from, "sending");
  if (aborted()) throw_aborted();
  const std::lock_guard<std::mutex> order(kept_send_mutex_);
  {
    // The header first: a member's send may wait on its host for the
    // receiver's part (NCCL connects a path's channels when a message first
    // uses them), which the receiver queues once it reads the header. A
    // send that then fails leaves that receive unmatched: the rank's error
    // ends the job (the launcher stops every rank).
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    reap_sends();
    auto& [request, buffer] = pending_.emplace_back(MPI_REQUEST_NULL, kept_header(tag, floats));
    check_mpi(MPI_Isend(buffer.data(), kKeptHeaderFloats, MPI_FLOAT, to, 0, kept_comm_, &request), "MPI_Isend");
  }
  if (!library_member_->send_kept(to, *values.values, floats, [this] { return aborted(); })) throw_aborted();
}

PassedKept MpiTransport::wait_for_kept(int to, int from, int64_t tag, const MakeKept& make) {
  check_own(to, "receiving");
  return arrivals_.at(static_cast<size_t>(from))->take(tag, [&]() -> std::pair<int64_t, PassedKept> {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    for (int found = 0; found == 0;) {
      if (aborted()) throw_aborted();
      check_mpi(MPI_Improbe(from, 0, kept_comm_, &found, &message, &status), "MPI_Improbe");
      if (found == 0) std::this_thread::yield();
    }
    float header[kKeptHeaderFloats];
    check_mpi(MPI_Mrecv(header, kKeptHeaderFloats, MPI_FLOAT, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
    int64_t fields[2];
    std::memcpy(fields, header, sizeof(fields));
    std::shared_ptr<const ExportedBoundary> into = make(fields[1]);
    TRAINSIM_CHECK(into != nullptr && into->values != nullptr,
                   "MpiTransport: a kept array passed to a device that keeps none");
    if (!library_member_->recv_kept(from, *into->values, fields[1], [this] { return aborted(); })) throw_aborted();
    return {fields[0], {std::move(into), fields[1]}};
  });
}

void MpiTransport::check_own(int worker, const char* role) const {
  TRAINSIM_CHECK(worker == rank_, std::string("MpiTransport: rank ") + std::to_string(rank_) + " called as the " +
                                      role + " worker " + std::to_string(worker) +
                                      " (a process sends and receives as its own rank only)");
}

int MpiTransport::mpi_tag(int64_t tag) const {
  TRAINSIM_CHECK(tag >= 0 && tag <= max_tag_, "MpiTransport: tag " + std::to_string(tag) + " outside 0.." +
                                                  std::to_string(max_tag_) + " (MPI_TAG_UB)");
  return static_cast<int>(tag);
}

void MpiTransport::reap_sends() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    check_mpi(MPI_Test(&it->first, &done, MPI_STATUS_IGNORE), "MPI_Test");
    it = done != 0 ? pending_.erase(it) : std::next(it);
  }
}

void MpiTransport::deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) {
  check_own(from, "sending");
  if (aborted()) throw_aborted();
  TRAINSIM_CHECK(payload.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
                 "MpiTransport: a message of " + std::to_string(payload.size()) + " floats is over MPI's int count");
  const int mpi_tag_value = mpi_tag(tag);
  // The header Open MPI adds counts against its eager limit.
  const auto bytes = static_cast<int64_t>(payload.size() * sizeof(float));
  if (returns == SendReturns::kLeft && bytes + kEagerHeaderBytes <= eager_bytes_) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(payload.data(), static_cast<int>(payload.size()), MPI_FLOAT, to, mpi_tag_value, comm_, &request),
              "MPI_Isend");
    for (int done = 0; done == 0;) {
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done != 0) break;
      if (aborted()) {
        // The message stays in flight with its buffer, as a queued one does.
        const std::lock_guard<std::mutex> lock(pending_mutex_);
        pending_.emplace_back(request, std::move(payload));
        throw_aborted();
      }
      std::this_thread::yield();
    }
    return;
  }
  const std::lock_guard<std::mutex> lock(pending_mutex_);
  reap_sends();
  auto& [request, buffer] = pending_.emplace_back(MPI_REQUEST_NULL, std::move(payload));
  check_mpi(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, to, mpi_tag_value, comm_, &request),
            "MPI_Isend");
}

std::vector<float> MpiTransport::wait_for(int to, int from, int64_t tag) {
  check_own(to, "receiving");
  const int mpi_tag_value = mpi_tag(tag);
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  for (int found = 0; found == 0;) {
    if (aborted()) throw_aborted();
    check_mpi(MPI_Improbe(from, mpi_tag_value, comm_, &found, &message, &status), "MPI_Improbe");
    if (found == 0) std::this_thread::yield();
  }
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_FLOAT, &count), "MPI_Get_count");
  std::vector<float> payload(static_cast<size_t>(count));
  check_mpi(MPI_Mrecv(payload.data(), count, MPI_FLOAT, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
  return payload;
}

}  // namespace trainsim
