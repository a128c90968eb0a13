// NCCL loaded when first called, as cuBLAS is (cublas_on_demand.cpp): linking
// libnccl would map it into every run of the tool. These are the NCCL entry
// points the project calls (nccl.h names them), each forwarding to the
// library opened with dlopen on first use; where it cannot be opened they
// return ncclSystemError and nccl_library_error() says why.
#include <nccl.h>

#include <string>

#include "exec/cuda/nccl_transport.hpp"
#include "exec/library_on_demand.hpp"

namespace {

const trainsim::LibraryOnDemand& nccl_library() {
  static const trainsim::LibraryOnDemand loaded("NCCL", "libnccl.so." + std::to_string(NCCL_MAJOR));
  return loaded;
}

template <typename F>
F* resolve_nccl(const char* name) {
  return nccl_library().resolve<F>(name);
}

}  // namespace

namespace trainsim {

std::string nccl_library_error() {
  if (!nccl_library().error.empty()) return nccl_library().error;
  return resolve_nccl<decltype(ncclGetVersion)>("ncclGetVersion") == nullptr ? "NCCL lacks ncclGetVersion" : "";
}

std::string nccl_version_text() {
  int code = 0;
  if (!nccl_library_error().empty() || ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL_VERSION(X, Y, Z): X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z before.
  const int major = code >= 20900 ? code / 10000 : code / 1000;
  const int rest = code >= 20900 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

}  // namespace trainsim

#define TRAINSIM_NCCL_FORWARD(function, params, args)                        \
  ncclResult_t function params {                                             \
    static auto* const target = resolve_nccl<decltype(function)>(#function); \
    return target != nullptr ? target args : ncclSystemError;                \
  }

extern "C" {

TRAINSIM_NCCL_FORWARD(ncclGetVersion, (int* version), (version))
TRAINSIM_NCCL_FORWARD(ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist), (comm, ndev, devlist))
TRAINSIM_NCCL_FORWARD(ncclGetUniqueId, (ncclUniqueId * unique_id), (unique_id))
TRAINSIM_NCCL_FORWARD(ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId comm_id, int rank),
                      (comm, nranks, comm_id, rank))
TRAINSIM_NCCL_FORWARD(ncclCommDestroy, (ncclComm_t comm), (comm))
TRAINSIM_NCCL_FORWARD(ncclCommAbort, (ncclComm_t comm), (comm))
TRAINSIM_NCCL_FORWARD(ncclAllReduce,
                      (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                       ncclComm_t comm, cudaStream_t stream),
                      (sendbuff, recvbuff, count, datatype, op, comm, stream))
TRAINSIM_NCCL_FORWARD(ncclSend,
                      (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream),
                      (sendbuff, count, datatype, peer, comm, stream))
TRAINSIM_NCCL_FORWARD(ncclRecv,
                      (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream),
                      (recvbuff, count, datatype, peer, comm, stream))
TRAINSIM_NCCL_FORWARD(ncclGroupStart, (), ())
TRAINSIM_NCCL_FORWARD(ncclGroupEnd, (), ())

const char* ncclGetErrorString(ncclResult_t result) {
  static auto* const target = resolve_nccl<decltype(ncclGetErrorString)>("ncclGetErrorString");
  return target != nullptr ? target(result) : "NCCL could not be loaded";
}

}  // extern "C"
