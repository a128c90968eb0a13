// The LSTM through oneDNN's LSTM primitive (as PyTorch's CPU LSTM): the
// recurrence with its weights packed once per call for every time step,
// where products through a BLAS pack W_h again at each step. Same equations,
// gate order (i, f, g, o) and single bias as exec's own LSTM (make_lstm),
// which is the reference and runs where oneDNN is missing; opened on first
// use like the convolutions (conv_onednn.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "exec/tensor/kernels_impl.hpp"

namespace trainsim {

class OneDnnLstm {
 public:
  // The LSTM over {B, tokens, in} with `hidden` units, or nullptr (and why in
  // *reason when given).
  static std::unique_ptr<OneDnnLstm> make(int64_t tokens, int64_t in, int64_t hidden, std::string* reason = nullptr);
  ~OneDnnLstm();
  OneDnnLstm(const OneDnnLstm&) = delete;
  OneDnnLstm& operator=(const OneDnnLstm&) = delete;

  // Every h_t, {B, T, hidden}, for x {B, T, in} (B ≥ 1) with W {4h, in + h}
  // and b {4h}; what the backward needs besides x and y into *workspace.
  // Thread-safe.
  Tensor forward(const LayerParams& params, const Tensor& x, Tensor& workspace) const;
  // dL/dx; ADDS dL/dW and dL/db into grads. Thread-safe.
  Tensor backward(const LayerParams& params, const Tensor& x, const Tensor& y, const Tensor& workspace,
                  const Tensor& dy, LayerGrads& grads) const;

 private:
  struct Impl;
  explicit OneDnnLstm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim
