// The rate of Pipe-SGD's codec at a ring hop as the executor runs it
// (exec/optim/pipesgd.hpp: compress and pack, unpack and decompress): what
// the cost models' ring_codec_s reads from collective.trunc16 and quant8.
#pragma once

#include <cstdint>

#include "exec/optim/pipesgd.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim {

// Float32 bytes per second `workers` threads at once each encode (and,
// apart, decode) a chunk of `bytes` with `compression` (trunc16 or quant8):
// the medians of options.pack_repeats timed rounds after warm-up.
CodecRates measure_codec_rates(GradientCompression compression, int64_t workers, int64_t bytes,
                               const ClusterProbeOptions& options);

}  // namespace trainsim
