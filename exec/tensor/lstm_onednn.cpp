// OneDnnLstm: oneDNN's LSTM forward (training) and backward over the
// executor's {B, T, ·} tensors (oneDNN's `ntc`), its weights read in place
// from W = [W_x, W_h] by strides and reordered to the packed layouts the
// primitives want; the primitives of each batch size made once.
#include "exec/tensor/lstm_onednn.hpp"

#include <algorithm>
#include <utility>

#if defined(TRAINSIM_WITH_ONEDNN)
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>

#include "exec/tensor/onednn_on_demand.hpp"
#include "exec/tensor/onednn_util.hpp"
#include "model/error.hpp"
#endif

namespace trainsim {

#if defined(TRAINSIM_WITH_ONEDNN)

namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
using onednn::cpu_engine;
using onednn::in_layout;
using onednn::to_user;

struct Primitives {
  dnnl::lstm_forward::primitive_desc forward_pd;
  dnnl::lstm_backward::primitive_desc backward_pd;
  dnnl::lstm_forward forward;
  dnnl::lstm_backward backward;
};

}  // namespace

struct OneDnnLstm::Impl {
  int64_t tokens, in, hidden;
  std::mutex mu;
  std::map<int64_t, std::unique_ptr<Primitives>> by_batch;

  int64_t width() const { return in + hidden; }
  memory::desc sequence(int64_t batch, int64_t features) const {
    return {{tokens, batch, features}, memory::data_type::f32, Tag::ntc};
  }
  // W_x or W_h as oneDNN's {layers, directions, inputs, gates, outputs},
  // read in place from W {4h, in + h}: element (i, g, o) at (g·h + o)·(in + h) + i.
  memory::desc weights(int64_t inputs) const {
    return {{1, 1, inputs, 4, hidden}, memory::data_type::f32,
            Dims{4 * hidden * width(), 4 * hidden * width(), 1, hidden * width(), width()}};
  }
  memory::desc packed(int64_t inputs) const {
    return {{1, 1, inputs, 4, hidden}, memory::data_type::f32, Tag::any};
  }
  memory::desc bias() const { return {{1, 1, 4, hidden}, memory::data_type::f32, Tag::ldgo}; }

  const Primitives& primitives(int64_t batch) {
    std::lock_guard lock(mu);
    std::unique_ptr<Primitives>& made = by_batch[batch];
    if (made == nullptr) made = make_primitives(batch);
    return *made;
  }

  std::unique_ptr<Primitives> make_primitives(int64_t batch) const {
    const memory::desc none;  // no initial or final states: h_0 = c_0 = 0
    const auto direction = dnnl::rnn_direction::unidirectional_left2right;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc src = sequence(batch, in), dst = sequence(batch, hidden);
    dnnl::lstm_forward::primitive_desc forward_pd(
        dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, direction, src, none, none, packed(in),
                                 packed(hidden), bias(), dst, none, none),
        attr, cpu_engine());
    dnnl::lstm_backward::primitive_desc backward_pd(
        dnnl::lstm_backward::desc(dnnl::prop_kind::backward, direction, src, none, none, packed(in), packed(hidden),
                                  bias(), dst, none, none, src, none, none, packed(in), packed(hidden), bias(), dst,
                                  none, none),
        attr, cpu_engine(), forward_pd);
    auto made = std::make_unique<Primitives>(Primitives{forward_pd, backward_pd, {}, {}});
    made->forward = dnnl::lstm_forward(forward_pd);
    made->backward = dnnl::lstm_backward(backward_pd);
    return made;
  }
};

OneDnnLstm::OneDnnLstm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnLstm::~OneDnnLstm() = default;

std::unique_ptr<OneDnnLstm> OneDnnLstm::make(int64_t tokens, int64_t in, int64_t hidden, std::string* reason) {
  std::string why;
  if (!onednn_loaded(&why)) {
    if (reason != nullptr) *reason = why;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->tokens = tokens;
  impl->in = in;
  impl->hidden = hidden;
  onednn_use_calling_thread();
  try {
    impl->primitives(1);
  } catch (const dnnl::error& e) {
    if (reason != nullptr) *reason = std::string("oneDNN has no LSTM for these sizes: ") + e.what();
    return nullptr;
  }
  return std::unique_ptr<OneDnnLstm>(new OneDnnLstm(std::move(impl)));
}

Tensor OneDnnLstm::forward(const LayerParams& params, const Tensor& x, Tensor& workspace) const {
  const Impl& m = *impl_;
  const int64_t batch = x.rows();
  onednn_use_calling_thread();
  const Primitives& p = impl_->primitives(batch);
  dnnl::stream stream(cpu_engine());
  Tensor y({batch, m.tokens, m.hidden});
  float* w = const_cast<float*>(params[0].data.data());
  const memory user_x(m.sequence(batch, m.in), cpu_engine(), const_cast<float*>(x.data.data()));
  const memory user_y(m.sequence(batch, m.hidden), cpu_engine(), y.data.data());
  const memory dst = p.forward_pd.dst_layer_desc() == user_y.get_desc()
                         ? user_y
                         : memory(p.forward_pd.dst_layer_desc(), cpu_engine());
  workspace = Tensor({static_cast<int64_t>((p.forward_pd.workspace_desc().get_size() + sizeof(float) - 1) / sizeof(float))});
  p.forward.execute(
      stream,
      {{DNNL_ARG_SRC_LAYER, in_layout(user_x, p.forward_pd.src_layer_desc(), stream)},
       {DNNL_ARG_WEIGHTS_LAYER, in_layout(memory(m.weights(m.in), cpu_engine(), w), p.forward_pd.weights_layer_desc(), stream)},
       {DNNL_ARG_WEIGHTS_ITER,
        in_layout(memory(m.weights(m.hidden), cpu_engine(), w + m.in), p.forward_pd.weights_iter_desc(), stream)},
       {DNNL_ARG_BIAS, memory(m.bias(), cpu_engine(), const_cast<float*>(params[1].data.data()))},
       {DNNL_ARG_DST_LAYER, dst},
       {DNNL_ARG_WORKSPACE, memory(p.forward_pd.workspace_desc(), cpu_engine(), workspace.data.data())},
       {DNNL_ARG_SCRATCHPAD, memory(p.forward_pd.scratchpad_desc(), cpu_engine())}});
  to_user(dst, user_y, stream);
  stream.wait();
  return y;
}

Tensor OneDnnLstm::backward(const LayerParams& params, const Tensor& x, const Tensor& y, const Tensor& workspace,
                            const Tensor& dy, LayerGrads& grads) const {
  const Impl& m = *impl_;
  const int64_t batch = x.rows();
  TRAINSIM_CHECK(dy.shape == y.shape, "lstm: dy does not match the forward's output");
  onednn_use_calling_thread();
  const Primitives& p = impl_->primitives(batch);
  const dnnl::lstm_backward::primitive_desc& pd = p.backward_pd;
  dnnl::stream stream(cpu_engine());
  float* w = const_cast<float*>(params[0].data.data());
  Tensor dx({batch, m.tokens, m.in});
  const memory user_dx(m.sequence(batch, m.in), cpu_engine(), dx.data.data());
  const memory diff_src = pd.diff_src_layer_desc() == user_dx.get_desc()
                              ? user_dx
                              : memory(pd.diff_src_layer_desc(), cpu_engine());
  // This batch's dW and db, zeroed (oneDNN adds into them), then added to the gradients held.
  auto zeroed = [](const memory::desc& desc) {
    memory z(desc, cpu_engine());
    std::fill_n(static_cast<char*>(z.get_data_handle()), desc.get_size(), char{0});
    return z;
  };
  const memory dw_layer = zeroed(pd.diff_weights_layer_desc()), dw_iter = zeroed(pd.diff_weights_iter_desc());
  Tensor dw(std::vector<int64_t>{4 * m.hidden, m.width()}), db({4 * m.hidden});
  const memory user_db(m.bias(), cpu_engine(), db.data.data());
  p.backward.execute(
      stream,
      {{DNNL_ARG_SRC_LAYER,
        in_layout(memory(m.sequence(batch, m.in), cpu_engine(), const_cast<float*>(x.data.data())),
                  pd.src_layer_desc(), stream)},
       {DNNL_ARG_WEIGHTS_LAYER, in_layout(memory(m.weights(m.in), cpu_engine(), w), pd.weights_layer_desc(), stream)},
       {DNNL_ARG_WEIGHTS_ITER,
        in_layout(memory(m.weights(m.hidden), cpu_engine(), w + m.in), pd.weights_iter_desc(), stream)},
       {DNNL_ARG_BIAS, memory(m.bias(), cpu_engine(), const_cast<float*>(params[1].data.data()))},
       {DNNL_ARG_DST_LAYER,
        in_layout(memory(m.sequence(batch, m.hidden), cpu_engine(), const_cast<float*>(y.data.data())),
                  pd.dst_layer_desc(), stream)},
       {DNNL_ARG_DIFF_DST_LAYER,
        in_layout(memory(m.sequence(batch, m.hidden), cpu_engine(), const_cast<float*>(dy.data.data())),
                  pd.diff_dst_layer_desc(), stream)},
       {DNNL_ARG_WORKSPACE, memory(pd.workspace_desc(), cpu_engine(), const_cast<float*>(workspace.data.data()))},
       {DNNL_ARG_DIFF_SRC_LAYER, diff_src},
       {DNNL_ARG_DIFF_WEIGHTS_LAYER, dw_layer},
       {DNNL_ARG_DIFF_WEIGHTS_ITER, dw_iter},
       {DNNL_ARG_DIFF_BIAS, user_db},
       {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), cpu_engine())}});
  to_user(diff_src, user_dx, stream);
  to_user(dw_layer, memory(m.weights(m.in), cpu_engine(), dw.data.data()), stream);
  to_user(dw_iter, memory(m.weights(m.hidden), cpu_engine(), dw.data.data() + m.in), stream);
  stream.wait();
  grads[0].dense.matrix() += dw.matrix();
  grads[1].dense.matrix() += db.matrix();
  return dx;
}

#else  // built without oneDNN

struct OneDnnLstm::Impl {};
OneDnnLstm::OneDnnLstm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnLstm::~OneDnnLstm() = default;
std::unique_ptr<OneDnnLstm> OneDnnLstm::make(int64_t, int64_t, int64_t, std::string* reason) {
  if (reason != nullptr) *reason = "built without oneDNN (libdnnl-dev was not installed)";
  return nullptr;
}
Tensor OneDnnLstm::forward(const LayerParams&, const Tensor&, Tensor&) const { return {}; }
Tensor OneDnnLstm::backward(const LayerParams&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            LayerGrads&) const {
  return {};
}

#endif

}  // namespace trainsim
