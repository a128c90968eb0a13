// Pipe-SGD's wire (seed 002 §3.2) as the codec of a ring AllReduce's hops
// (exec/transport/codec_all_reduce.hpp): a message is the packed compressed
// chunk (pipesgd.hpp), so the wire carries its bytes.
#pragma once

#include "exec/optim/pipesgd.hpp"
#include "exec/transport/codec_all_reduce.hpp"

namespace trainsim {

HopCodec pipesgd_hop_codec(GradientCompression kind);

}  // namespace trainsim
