// OneDnnConv: oneDNN's forward, backward-data and backward-weights
// convolutions (see the header). Tensors stay in the executor's NCHW layout;
// each call reorders them to and from the blocked layouts oneDNN's kernels
// prefer, one pass over the input and output, against the kh·kw passes an
// im2col buffer costs. The primitives of each batch size are made once.
#include "exec/tensor/conv_onednn.hpp"

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

}  // namespace

// The primitives of one batch size.
struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc forward_pd;
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights weights;
};

struct OneDnnConv::Impl {
  Geometry g;
  int64_t out_channels;
  bool bias;
  std::mutex mu;
  std::map<int64_t, std::unique_ptr<ConvPrimitives>> by_batch;

  Dims src_dims(int64_t batch) const { return {batch, g.channels, g.height, g.width}; }
  Dims dst_dims(int64_t batch) const { return {batch, out_channels, g.out_height, g.out_width}; }
  // {O, C/G, kh, kw}, or {G, O/G, C/G, kh, kw} with groups: the same bytes.
  memory::desc weights_desc(Tag tag) const {
    const int64_t groups = g.w.groups;
    if (groups == 1) return {{out_channels, g.channels, g.w.kernel_h, g.w.kernel_w}, memory::data_type::f32, tag};
    return {{groups, out_channels / groups, g.channels / groups, g.w.kernel_h, g.w.kernel_w}, memory::data_type::f32,
            tag == Tag::any ? Tag::any : Tag::goihw};
  }
  memory::desc plain(const Dims& dims) const { return {dims, memory::data_type::f32, Tag::nchw}; }
  memory::desc bias_desc() const { return {{out_channels}, memory::data_type::f32, Tag::x}; }
  // The right and bottom padding that makes oneDNN's output size ours.
  Dims padding_r() const {
    return {(g.out_height - 1) * g.w.stride_h + g.w.kernel_h - g.height - g.w.pad_h,
            (g.out_width - 1) * g.w.stride_w + g.w.kernel_w - g.width - g.w.pad_w};
  }

  const ConvPrimitives& primitives(int64_t batch) {
    std::lock_guard lock(mu);
    std::unique_ptr<ConvPrimitives>& made = by_batch[batch];
    if (made == nullptr) made = make_primitives(batch);
    return *made;
  }

  std::unique_ptr<ConvPrimitives> make_primitives(int64_t batch) const {
    const memory::desc src(src_dims(batch), memory::data_type::f32, Tag::any);
    const memory::desc dst(dst_dims(batch), memory::data_type::f32, Tag::any);
    const memory::desc weights = weights_desc(Tag::any);
    const Dims strides{g.w.stride_h, g.w.stride_w}, pad_l{g.w.pad_h, g.w.pad_w}, pad_r = padding_r();
    const auto direct = dnnl::algorithm::convolution_direct;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // a scratchpad per call: threads never share one
    const auto forward_desc =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, src, weights, bias_desc(),
                                               dst, strides, pad_l, pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, src, weights, dst, strides,
                                               pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc forward_pd(forward_desc, attr, cpu_engine());
    dnnl::convolution_backward_data::primitive_desc data_pd(
        dnnl::convolution_backward_data::desc(direct, src, weights, dst, strides, pad_l, pad_r), attr, cpu_engine(),
        forward_pd);
    const auto weights_desc_ =
        bias ? dnnl::convolution_backward_weights::desc(direct, src, weights, bias_desc(), dst, strides, pad_l, pad_r)
             : dnnl::convolution_backward_weights::desc(direct, src, weights, dst, strides, pad_l, pad_r);
    dnnl::convolution_backward_weights::primitive_desc weights_pd(weights_desc_, attr, cpu_engine(), forward_pd);
    auto made = std::make_unique<ConvPrimitives>(ConvPrimitives{forward_pd, data_pd, weights_pd, {}, {}, {}});
    made->forward = dnnl::convolution_forward(forward_pd);
    made->data = dnnl::convolution_backward_data(data_pd);
    made->weights = dnnl::convolution_backward_weights(weights_pd);
    return made;
  }
};

OneDnnConv::OneDnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnConv::~OneDnnConv() = default;

std::unique_ptr<OneDnnConv> OneDnnConv::make(const Geometry& g, int64_t out_channels, bool bias, std::string* reason) {
  std::string why;
  if (!onednn_loaded(&why)) {
    if (reason != nullptr) *reason = why;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->g = g;
  impl->out_channels = out_channels;
  impl->bias = bias;
  onednn_use_calling_thread();
  try {
    impl->primitives(1);  // fails here when oneDNN has no kernel for the geometry
  } catch (const dnnl::error& e) {
    if (reason != nullptr) *reason = std::string("oneDNN has no convolution for this geometry: ") + e.what();
    return nullptr;
  }
  return std::unique_ptr<OneDnnConv>(new OneDnnConv(std::move(impl)));
}

std::string OneDnnConv::implementation(int64_t batch) const {
  onednn_use_calling_thread();
  return impl_->primitives(batch).forward_pd.impl_info_str();
}

Tensor OneDnnConv::forward(const LayerParams& params, const Tensor& x) const {
  const Impl& m = *impl_;
  const int64_t batch = x.rows();
  onednn_use_calling_thread();
  const ConvPrimitives& p = impl_->primitives(batch);
  dnnl::stream stream(cpu_engine());
  Tensor y({batch, m.out_channels, m.g.out_height, m.g.out_width});
  const memory user_x(m.plain(m.src_dims(batch)), cpu_engine(), const_cast<float*>(x.data.data()));
  const memory user_w(m.weights_desc(Tag::oihw), cpu_engine(), const_cast<float*>(params[0].data.data()));
  const memory user_y(m.plain(m.dst_dims(batch)), cpu_engine(), y.data.data());
  const memory src = in_layout(user_x, p.forward_pd.src_desc(), stream);
  const memory weights = in_layout(user_w, p.forward_pd.weights_desc(), stream);
  memory dst = p.forward_pd.dst_desc() == user_y.get_desc() ? user_y : memory(p.forward_pd.dst_desc(), cpu_engine());
  const memory scratchpad(p.forward_pd.scratchpad_desc(), cpu_engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad}};
  if (m.bias) args[DNNL_ARG_BIAS] = memory(m.bias_desc(), cpu_engine(), const_cast<float*>(params[1].data.data()));
  p.forward.execute(stream, args);
  to_user(dst, user_y, stream);
  stream.wait();
  return y;
}

Tensor OneDnnConv::backward(const LayerParams& params, const Tensor& x, const Tensor& dy, LayerGrads& grads) const {
  const Impl& m = *impl_;
  const int64_t batch = x.rows();
  TRAINSIM_CHECK(dy.size() == batch * m.out_channels * m.g.out_plane(), "conv2d: dy does not match the output");
  onednn_use_calling_thread();
  const ConvPrimitives& p = impl_->primitives(batch);
  dnnl::stream stream(cpu_engine());
  Tensor dx(x.shape);
  const memory user_x(m.plain(m.src_dims(batch)), cpu_engine(), const_cast<float*>(x.data.data()));
  const memory user_w(m.weights_desc(Tag::oihw), cpu_engine(), const_cast<float*>(params[0].data.data()));
  const memory user_dy(m.plain(m.dst_dims(batch)), cpu_engine(), const_cast<float*>(dy.data.data()));
  const memory user_dx(m.plain(m.src_dims(batch)), cpu_engine(), dx.data.data());

  // dL/dx = conv_transpose(dy, W).
  const memory data_dy = in_layout(user_dy, p.data_pd.diff_dst_desc(), stream);
  memory diff_src =
      p.data_pd.diff_src_desc() == user_dx.get_desc() ? user_dx : memory(p.data_pd.diff_src_desc(), cpu_engine());
  p.data.execute(stream, {{DNNL_ARG_DIFF_DST, data_dy},
                          {DNNL_ARG_WEIGHTS, in_layout(user_w, p.data_pd.weights_desc(), stream)},
                          {DNNL_ARG_DIFF_SRC, diff_src},
                          {DNNL_ARG_SCRATCHPAD, memory(p.data_pd.scratchpad_desc(), cpu_engine())}});
  to_user(diff_src, user_dx, stream);

  // dL/dW (and dL/db) of this batch, then added to the gradients held.
  Tensor dw(std::vector<int64_t>{m.out_channels, m.g.channels / m.g.w.groups, m.g.w.kernel_h, m.g.w.kernel_w});
  Tensor db({m.bias ? m.out_channels : 0});
  const memory user_dw(m.weights_desc(Tag::oihw), cpu_engine(), dw.data.data());
  memory diff_weights = p.weights_pd.diff_weights_desc() == user_dw.get_desc()
                            ? user_dw
                            : memory(p.weights_pd.diff_weights_desc(), cpu_engine());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, in_layout(user_x, p.weights_pd.src_desc(), stream)},
      {DNNL_ARG_DIFF_DST, p.weights_pd.diff_dst_desc() == data_dy.get_desc()
                              ? data_dy
                              : in_layout(user_dy, p.weights_pd.diff_dst_desc(), stream)},
      {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
      {DNNL_ARG_SCRATCHPAD, memory(p.weights_pd.scratchpad_desc(), cpu_engine())}};
  if (m.bias) args[DNNL_ARG_DIFF_BIAS] = memory(m.bias_desc(), cpu_engine(), db.data.data());
  p.weights.execute(stream, args);
  to_user(diff_weights, user_dw, stream);
  stream.wait();
  grads[0].dense.matrix() += dw.matrix();
  if (m.bias) grads[1].dense.matrix() += db.matrix();
  return dx;
}

#else  // built without oneDNN

struct OneDnnConv::Impl {};
OneDnnConv::OneDnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnConv::~OneDnnConv() = default;
std::unique_ptr<OneDnnConv> OneDnnConv::make(const Geometry&, int64_t, bool, std::string* reason) {
  if (reason != nullptr) *reason = "built without oneDNN (libdnnl-dev was not installed)";
  return nullptr;
}
std::string OneDnnConv::implementation(int64_t) const { return {}; }
Tensor OneDnnConv::forward(const LayerParams&, const Tensor&) const { return {}; }
Tensor OneDnnConv::backward(const LayerParams&, const Tensor&, const Tensor&, LayerGrads&) const { return {}; }

#endif

}  // namespace trainsim
