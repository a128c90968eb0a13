// NcclTransport (nccl_transport.hpp): the in-process transport's messages,
// and the library AllReduce by NCCL on the members' GPUs.
#include "exec/cuda/nccl_transport.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/nccl_member.hpp"
#include "exec/process_cores.hpp"
#include "exec/transport/collectives.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"

namespace trainsim {

struct NcclCommunicators {
  std::mutex mu;
  // A group's GPUs, in group order -> one member each.
  std::map<std::vector<int>, std::vector<std::shared_ptr<NcclMember>>> groups;
  std::mutex paths_mu;
  // (sending GPU, receiving GPU) -> the members of a communicator of the
  // two, the sender's (rank 0) then the receiver's.
  std::map<std::pair<int, int>, std::pair<std::shared_ptr<NcclMember>, std::shared_ptr<NcclMember>>> paths;
};

namespace {

// How long a path's first message may take before the run fails.
constexpr double kConnectLimitS = 60;

// Boundaries between workers whose GPUs are not peers, by ncclSend and
// ncclRecv on a communicator of the two GPUs per direction (so each carries
// its sender's messages in order, whatever the other direction does), made
// and connected when a run opens the direction and kept for the next run
// (one given up is made again).
class NcclPasser final : public KeptPasser {
 public:
  NcclPasser(std::vector<int> gpus, std::shared_ptr<NcclCommunicators> kept)
      : gpus_(std::move(gpus)), kept_(std::move(kept)) {}

  void open(std::span<const std::pair<int, int>> directions, const std::function<bool()>& aborted) override {
    const std::lock_guard lock(kept_->paths_mu);
    for (const auto& direction : directions) {
      const std::pair<int, int> pair{gpu(direction.first), gpu(direction.second)};
      auto it = kept_->paths.find(pair);
      if (it == kept_->paths.end() || !it->second.first->alive() || !it->second.second->alive()) {
        if (it != kept_->paths.end()) kept_->paths.erase(it);
        it = kept_->paths.emplace(pair, made(pair, aborted)).first;
      }
      // Read without a lock while the run goes on: written before it starts.
      opened_[direction] = it->second;
    }
  }
  bool send(int from, int to, KeptValues& values, int64_t floats, const std::function<bool()>& aborted) override {
    return path(from, to).first->send_kept(1, values, floats, aborted);
  }
  bool recv(int to, int from, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) override {
    return path(from, to).second->recv_kept(0, into, floats, aborted);
  }
  void abandon() override {
    for (auto& [direction, members] : opened_) {
      members.first->abandon();
      members.second->abandon();
    }
  }

 private:
  int gpu(int worker) const { return gpus_.at(static_cast<size_t>(worker)); }

  // A communicator of the two GPUs, connected by one message: NCCL connects
  // a path at its first message, the host waiting for the peer's part, so
  // it is done here, with no run waiting on either GPU.
  static std::pair<std::shared_ptr<NcclMember>, std::shared_ptr<NcclMember>> made(
      const std::pair<int, int>& pair, const std::function<bool()>& aborted) {
    ncclComm_t comms[2] = {nullptr, nullptr};
    const int devices[2] = {pair.first, pair.second};
    {
      const OnProcessCores unpinned;  // NCCL's threads on the process's cores, not this thread's one
      check_nccl(ncclCommInitAll(comms, 2, devices), "ncclCommInitAll");
    }
    std::shared_ptr<NcclMember> sender;
    try {
      sender = std::make_shared<NcclMember>(pair.first, comms[0]);
    } catch (...) {
      ncclCommDestroy(comms[1]);
      throw;
    }
    auto receiver = std::make_shared<NcclMember>(pair.second, comms[1]);
    if (!NcclMember::connect_pair(*sender, *receiver, aborted, kConnectLimitS)) {
      throw TransportAborted("the run was aborted while NCCL connected GPU " + std::to_string(pair.first) + " to GPU " +
                             std::to_string(pair.second));
    }
    return {std::move(sender), std::move(receiver)};
  }

  std::pair<std::shared_ptr<NcclMember>, std::shared_ptr<NcclMember>>& path(int from, int to) {
    auto it = opened_.find({from, to});
    TRAINSIM_CHECK(it != opened_.end(), "an array passed from worker " + std::to_string(from) + " to worker " +
                                            std::to_string(to) + " before that path was opened");
    return it->second;
  }

  std::vector<int> gpus_;
  std::shared_ptr<NcclCommunicators> kept_;
  // By (sender, receiver) worker; held here too, so that a path another
  // transport's run makes again leaves this one's members whole.
  std::map<std::pair<int, int>, std::pair<std::shared_ptr<NcclMember>, std::shared_ptr<NcclMember>>> opened_;
};

class NcclTransport final : public InProcessTransport {
 public:
  NcclTransport(std::vector<int> gpus, double recv_timeout_s, std::shared_ptr<NcclCommunicators> kept)
      : InProcessTransport(static_cast<int>(gpus.size()), recv_timeout_s),
        gpus_(std::move(gpus)),
        kept_(kept != nullptr ? std::move(kept) : make_nccl_communicators()) {
    pass_kept_by(std::make_shared<NcclPasser>(gpus_, kept_));
  }

  bool has_library_all_reduce() const override { return true; }
  // Where a member's device keeps no sums it sums on the host: both ways
  // one ncclAllReduce of the same values, so members may differ.
  bool sums_kept(const std::vector<int>&) const override { return true; }

 protected:
  void run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) override {
    if (algorithm != CollectiveAlgorithm::kLibrary) return Transport::run_all_reduce(peers, data, algorithm);
    if (!member(peers)->all_reduce(data, [this] { return aborted(); })) throw_aborted();
  }
  void run_all_reduce_kept(CollectivePeers& peers, std::span<KeptValues* const> arrays, int64_t floats,
                           float scale) override {
    if (!member(peers)->all_reduce_kept(arrays, floats, scale, [this] { return aborted(); })) throw_aborted();
  }

 private:
  // The caller's member of its group (held for the call: a later run may
  // make the group again), the group's communicators made and connected
  // by the first member to get here (again where an earlier run gave them
  // up).
  std::shared_ptr<NcclMember> member(const CollectivePeers& peers) {
    std::vector<int> devices;
    for (const int worker : peers.group()) devices.push_back(gpus_[static_cast<size_t>(worker)]);
    std::lock_guard lock(kept_->mu);
    auto it = kept_->groups.find(devices);
    if (it != kept_->groups.end() &&
        !std::all_of(it->second.begin(), it->second.end(), [](const auto& m) { return m->alive(); })) {
      if (aborted()) throw_aborted();  // given up in this run: not made again
      kept_->groups.erase(it);
      it = kept_->groups.end();
    }
    if (it == kept_->groups.end()) {
      std::vector<ncclComm_t> comms(devices.size());
      {
        const OnProcessCores unpinned;  // NCCL's threads on the process's cores, not this thread's one
        check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()), "ncclCommInitAll");
      }
      std::vector<std::shared_ptr<NcclMember>> members;
      for (size_t r = 0; r < comms.size(); ++r) {
        try {
          members.push_back(std::make_shared<NcclMember>(devices[r], comms[r]));
        } catch (...) {
          for (size_t later = r + 1; later < comms.size(); ++later) ncclCommDestroy(comms[later]);
          throw;
        }
      }
      std::vector<NcclMember*> ranks;
      for (const auto& m : members) ranks.push_back(m.get());
      if (!NcclMember::connect_group(
              ranks, [this] { return aborted(); }, kConnectLimitS))
        throw_aborted();
      it = kept_->groups.emplace(devices, std::move(members)).first;
    }
    return it->second[static_cast<size_t>(peers.rank())];
  }

  std::vector<int> gpus_;
  std::shared_ptr<NcclCommunicators> kept_;
};

}  // namespace

void check_nccl_gpu(int gpu) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (gpu < 0 || gpu >= count) {
    throw InputError("--devices",
                     "names GPU " + std::to_string(gpu) + ", but this machine has " + std::to_string(count) +
                         " the driver answers for",
                     "GPUs 0 to " + std::to_string(std::max(0, count - 1)));
  }
}

std::shared_ptr<NcclCommunicators> make_nccl_communicators() { return std::make_shared<NcclCommunicators>(); }

std::unique_ptr<Transport> make_nccl_transport(const std::vector<int>& gpu_of_worker, double recv_timeout_s,
                                               std::shared_ptr<NcclCommunicators> kept) {
  std::set<int> seen;
  for (const int gpu : gpu_of_worker) {
    check_nccl_gpu(gpu);
    if (!seen.insert(gpu).second) {
      throw InputError("--devices", "puts two workers on GPU " + std::to_string(gpu),
                       "a GPU of its own for every worker: NCCL refuses two ranks on one GPU (NVIDIA/nccl#418)");
    }
  }
  return std::make_unique<NcclTransport>(gpu_of_worker, recv_timeout_s, std::move(kept));
}

}  // namespace trainsim
