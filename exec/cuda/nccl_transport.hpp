// Workers of one process, each on a GPU of its own (`--devices
// cuda:G0,G1,...`): messages between them as the in-process transport's,
// and the plans' library AllReduce (CollectiveAlgorithm::kLibrary) by NCCL
// over the members' GPUs: each member's values copied to a buffer on its
// GPU, summed there by ncclAllReduce on a stream of its own, and copied back.
// A group's communicators are made (ncclCommInitAll) by the first member to
// call into it, and may be kept for the run's next transport. A boundary
// between GPUs that are not peers goes by ncclSend and ncclRecv on a
// communicator of the two per direction (a KeptPasser), made and connected
// when a run starts, each array's header in the direction's mailbox ahead
// of it. Processes of
// one GPU each (the MPI launch) sum by NCCL too, through a member of their
// own (make_nccl_rank_member). NCCL is opened on first use
// (nccl_on_demand.cpp). No CUDA type appears here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/transport/library_member.hpp"
#include "exec/transport/transport.hpp"

namespace trainsim {

// A transport of gpu_of_worker.size() workers, worker w on GPU
// gpu_of_worker[w]. InputError naming --devices where two workers share a
// GPU (NCCL 2.5 and later refuse two ranks of one communicator on one GPU:
// NVIDIA/nccl#418), where a GPU is not one the driver has, or in a build
// without CUDA; recv_timeout_s as InProcessTransport's. Its groups'
// communicators are `kept`'s where given (made by the first transport that
// needs them, used by the next ones: a run's stretches between checkpoints
// each make a transport), else its own.
struct NcclCommunicators;
std::shared_ptr<NcclCommunicators> make_nccl_communicators();
std::unique_ptr<Transport> make_nccl_transport(const std::vector<int>& gpu_of_worker, double recv_timeout_s = 0,
                                               std::shared_ptr<NcclCommunicators> kept = nullptr);

// This process's member of the library AllReduce over `ranks` processes, one
// per GPU (the MPI launch: MpiTransport::sum_library_by), rank `rank` on GPU
// `gpu`: NCCL's. Its communicator is made at the first AllReduce
// (ncclCommInitRank over rank 0's ncclUniqueId, which the transport shares).
// InputError naming --devices where `gpu` is not one the driver has, or in a
// build without CUDA. Two ranks on one GPU are the caller's to refuse (NCCL
// fails their first AllReduce).
std::unique_ptr<LibraryMember> make_nccl_rank_member(int gpu, int rank, int ranks);

// InputError naming --devices unless `gpu` is one the driver answers for.
void check_nccl_gpu(int gpu);

// Why NCCL could not be opened, or empty.
std::string nccl_library_error();
// The version of the NCCL opened ("2.27.3"), or empty where it cannot be
// opened (nccl_library_error says why).
std::string nccl_version_text();

}  // namespace trainsim
