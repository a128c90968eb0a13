// A plan as MLCommons Chakra execution traces (ETs), one file a worker, so
// ASTRA-sim runs trainsim's exact schedules; and such files read back into
// the plan (chakra_et.proto; docs/formats.md, Chakra).
//
// Each op is a node (its id the op's): compute ops COMP_NODE with their time
// (duration_micros, and num_ops where the op has FLOPs: none here); sends and
// receives COMM_SEND_NODE / COMM_RECV_NODE (comm_dst / comm_src, comm_size,
// comm_tag the send's id); AllReduce, broadcast, reduce-scatter, all-gather
// and barrier COMM_COLL_NODE with comm_type and comm_size; copies to and from
// the host MEM_STORE_NODE / MEM_LOAD_NODE (tensor_size); host accumulation
// and parameter-server steps COMP_NODE with is_cpu_op. data_deps are its
// dependencies on the same worker, ctrl_deps the op before it on its stream.
// Attributes named trainsim.* carry every other field of the op (and all
// its dependencies, other workers' ops too), the GlobalMetadata the plan's header,
// so reading the files back gives the plan whole.
#pragma once

#include <string>

#include "profiles/profile.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// Writes `dir`/`prefix`.W.et for each worker W (the folder is made); returns
// the number of files. InputError naming --export-chakra where they cannot
// be written.
int write_chakra_plan(const Plan& plan, const std::string& dir, const std::string& prefix = "trainsim");

// Reads `prefix`.0.et, `prefix`.1.et, ... (as many as the first file's plan
// names). InputError naming the file for one that is missing, truncated, not
// a Chakra ET, or without trainsim's attributes (a trace of another tool).
Plan read_chakra_plan(const std::string& prefix);

// One rank's Chakra ET written by another tool (PyTorch's execution trace
// through Chakra's converter) as a profile (chakra_profile.cpp): its
// compute nodes on the device (is_cpu_op false; the host's where none is)
// in the file's order, the forward those before the first backward node
// (a name with "Backward" or autograd's evaluate_function), the optimizer
// those after the last; the forward's layers start at each op with
// weights, the backward's nodes join the layer of the weight op they
// differentiate (the k-th backward with weights the k-th forward op with
// weights from the end; those without, the next one's); all-reduces'
// comm_size over the layers whose backward ran since the one before, as
// parameters. InputError naming the file for one that cannot be read, a
// trainsim export (its plan runs with simulate --import-chakra), or one
// without compute nodes; `batch` must be given (an ET records no batch).
Profile read_chakra_profile(const std::string& path, int64_t batch, const std::string& model);

// Keeps protobuf's own log lines off standard error (once per process), so
// a malformed trace is one InputError and nothing beside it.
void quiet_protobuf_logging();

}  // namespace trainsim
