// Convolution through oneDNN (Intel's deep-learning primitives, the CPU
// library PyTorch's own CPU convolutions call): direct convolution kernels
// JIT-compiled for the processor, in place of im2col and a matrix product,
// which write and read back kh·kw copies of every input. Built where
// libdnnl-dev is installed; the library is opened on first use, so a build
// carried to a machine without it still runs, with im2col.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "exec/tensor/kernels_impl.hpp"

namespace trainsim {

class OneDnnConv {
 public:
  // The convolution of `g` with `out_channels` outputs, or nullptr (and why
  // in *reason when given): oneDNN not built in, not loadable, or with no
  // kernel for this geometry.
  static std::unique_ptr<OneDnnConv> make(const Geometry& g, int64_t out_channels, bool bias,
                                          std::string* reason = nullptr);
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  // y = conv(x, W) (+ b) for x {N, C, H, W} (N ≥ 1); thread-safe.
  Tensor forward(const LayerParams& params, const Tensor& x) const;
  // dL/dx; ADDS dL/dW (and dL/db) into grads; thread-safe.
  Tensor backward(const LayerParams& params, const Tensor& x, const Tensor& dy, LayerGrads& grads) const;
  // The kernels oneDNN chose for a batch of `batch` (e.g. "jit:avx2").
  std::string implementation(int64_t batch) const;

 private:
  struct Impl;
  explicit OneDnnConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim
