// oneDNN loaded when first called, not linked: Debian ships it only as a
// shared library (40 MB, with OpenCL and OpenMP beside it), and a build
// carried to a machine without it (the GPU machines) must still start. These
// are the C entry points dnnl.hpp calls for what the project uses, each
// forwarding to libdnnl.so.2 opened with dlopen on first use. Where it cannot
// be opened they return dnnl_runtime_error; OneDnnConv::make asks
// onednn_loaded first and falls back to im2col.
#include "exec/tensor/onednn_on_demand.hpp"

#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>

#include <string>

#include "exec/library_on_demand.hpp"

namespace trainsim {
namespace {

const LibraryOnDemand& library() {
  static const LibraryOnDemand loaded = [] {
    // Its OpenMP runtime reads these when it loads, here: one thread per
    // calling thread by default (onednn_use_calling_thread sets it for each
    // caller as well), and no idle threads spinning. Set once, before any
    // worker calls into oneDNN.
    setenv("OMP_NUM_THREADS", "1", 0);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    return LibraryOnDemand("oneDNN", "libdnnl.so." + std::to_string(DNNL_VERSION_MAJOR));
  }();
  return loaded;
}

}  // namespace

// The library's own function `name` (or one of its dependencies', such as
// OpenMP's), of the type of F, or nullptr when missing.
template <typename F>
F* onednn_resolve(const char* name) {
  return library().resolve<F>(name);
}

bool onednn_loaded(std::string* why) {
  if (library().handle == nullptr && why != nullptr) *why = library().error;
  return library().handle != nullptr;
}

void onednn_use_calling_thread() {
  thread_local bool done = false;
  if (done) return;
  using SetThreads = void(int);
  static auto* const set_threads = onednn_resolve<SetThreads>("omp_set_num_threads");
  if (set_threads != nullptr) set_threads(1);
  done = true;
}

}  // namespace trainsim

#define TRAINSIM_DNNL_FORWARD(function, params, args)                                           \
  dnnl_status_t DNNL_API function params {                                                      \
    static auto* const target = trainsim::onednn_resolve<decltype(function)>(#function);        \
    return target != nullptr ? target args : dnnl_runtime_error;                                \
  }

extern "C" {

TRAINSIM_DNNL_FORWARD(dnnl_engine_create, (dnnl_engine_t * engine, dnnl_engine_kind_t kind, size_t index),
                      (engine, kind, index))
TRAINSIM_DNNL_FORWARD(dnnl_engine_destroy, (dnnl_engine_t engine), (engine))
TRAINSIM_DNNL_FORWARD(dnnl_stream_create, (dnnl_stream_t * stream, dnnl_engine_t engine, unsigned flags),
                      (stream, engine, flags))
TRAINSIM_DNNL_FORWARD(dnnl_stream_destroy, (dnnl_stream_t stream), (stream))
TRAINSIM_DNNL_FORWARD(dnnl_stream_wait, (dnnl_stream_t stream), (stream))
TRAINSIM_DNNL_FORWARD(dnnl_memory_desc_init_by_tag,
                      (dnnl_memory_desc_t * memory_desc, int ndims, const dnnl_dims_t dims,
                       dnnl_data_type_t data_type, dnnl_format_tag_t tag),
                      (memory_desc, ndims, dims, data_type, tag))
TRAINSIM_DNNL_FORWARD(dnnl_memory_create,
                      (dnnl_memory_t * memory, const dnnl_memory_desc_t* memory_desc, dnnl_engine_t engine,
                       void* handle),
                      (memory, memory_desc, engine, handle))
TRAINSIM_DNNL_FORWARD(dnnl_memory_destroy, (dnnl_memory_t memory), (memory))
TRAINSIM_DNNL_FORWARD(dnnl_memory_get_engine, (const_dnnl_memory_t memory, dnnl_engine_t* engine), (memory, engine))
TRAINSIM_DNNL_FORWARD(dnnl_memory_get_memory_desc,
                      (const_dnnl_memory_t memory, const dnnl_memory_desc_t** memory_desc), (memory, memory_desc))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_attr_create, (dnnl_primitive_attr_t * attr), (attr))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_attr_destroy, (dnnl_primitive_attr_t attr), (attr))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_attr_set_scratchpad_mode,
                      (dnnl_primitive_attr_t attr, dnnl_scratchpad_mode_t mode), (attr, mode))
TRAINSIM_DNNL_FORWARD(dnnl_convolution_forward_desc_init,
                      (dnnl_convolution_desc_t * conv_desc, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
                       const dnnl_memory_desc_t* src_desc, const dnnl_memory_desc_t* weights_desc,
                       const dnnl_memory_desc_t* bias_desc, const dnnl_memory_desc_t* dst_desc,
                       const dnnl_dims_t strides, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r),
                      (conv_desc, prop_kind, alg_kind, src_desc, weights_desc, bias_desc, dst_desc, strides,
                       padding_l, padding_r))
TRAINSIM_DNNL_FORWARD(dnnl_convolution_backward_data_desc_init,
                      (dnnl_convolution_desc_t * conv_desc, dnnl_alg_kind_t alg_kind,
                       const dnnl_memory_desc_t* diff_src_desc, const dnnl_memory_desc_t* weights_desc,
                       const dnnl_memory_desc_t* diff_dst_desc, const dnnl_dims_t strides,
                       const dnnl_dims_t padding_l, const dnnl_dims_t padding_r),
                      (conv_desc, alg_kind, diff_src_desc, weights_desc, diff_dst_desc, strides, padding_l,
                       padding_r))
TRAINSIM_DNNL_FORWARD(dnnl_convolution_backward_weights_desc_init,
                      (dnnl_convolution_desc_t * conv_desc, dnnl_alg_kind_t alg_kind,
                       const dnnl_memory_desc_t* src_desc, const dnnl_memory_desc_t* diff_weights_desc,
                       const dnnl_memory_desc_t* diff_bias_desc, const dnnl_memory_desc_t* diff_dst_desc,
                       const dnnl_dims_t strides, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r),
                      (conv_desc, alg_kind, src_desc, diff_weights_desc, diff_bias_desc, diff_dst_desc, strides,
                       padding_l, padding_r))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_desc_iterator_create,
                      (dnnl_primitive_desc_iterator_t * iterator, const_dnnl_op_desc_t op_desc,
                       const_dnnl_primitive_attr_t attr, dnnl_engine_t engine,
                       const_dnnl_primitive_desc_t hint_forward_primitive_desc),
                      (iterator, op_desc, attr, engine, hint_forward_primitive_desc))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_desc_iterator_destroy, (dnnl_primitive_desc_iterator_t iterator), (iterator))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_desc_destroy, (dnnl_primitive_desc_t primitive_desc), (primitive_desc))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_desc_query,
                      (const_dnnl_primitive_desc_t primitive_desc, dnnl_query_t what, int index, void* result),
                      (primitive_desc, what, index, result))
TRAINSIM_DNNL_FORWARD(dnnl_reorder_primitive_desc_create,
                      (dnnl_primitive_desc_t * reorder_primitive_desc, const dnnl_memory_desc_t* src_desc,
                       dnnl_engine_t src_engine, const dnnl_memory_desc_t* dst_desc, dnnl_engine_t dst_engine,
                       const_dnnl_primitive_attr_t attr),
                      (reorder_primitive_desc, src_desc, src_engine, dst_desc, dst_engine, attr))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_create, (dnnl_primitive_t * primitive, const_dnnl_primitive_desc_t primitive_desc),
                      (primitive, primitive_desc))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_destroy, (dnnl_primitive_t primitive), (primitive))
TRAINSIM_DNNL_FORWARD(dnnl_primitive_execute,
                      (const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs, const dnnl_exec_arg_t* args),
                      (primitive, stream, nargs, args))

// The entry points that return something other than a status: where the
// library is missing, as if nothing matched.
int DNNL_API dnnl_memory_desc_equal(const dnnl_memory_desc_t* lhs, const dnnl_memory_desc_t* rhs) {
  static auto* const target = trainsim::onednn_resolve<decltype(dnnl_memory_desc_equal)>("dnnl_memory_desc_equal");
  return target != nullptr ? target(lhs, rhs) : 0;
}

dnnl_primitive_desc_t DNNL_API dnnl_primitive_desc_iterator_fetch(const_dnnl_primitive_desc_iterator_t iterator) {
  static auto* const target =
      trainsim::onednn_resolve<decltype(dnnl_primitive_desc_iterator_fetch)>("dnnl_primitive_desc_iterator_fetch");
  return target != nullptr ? target(iterator) : nullptr;
}

const dnnl_memory_desc_t DNNL_API* dnnl_primitive_desc_query_md(const_dnnl_primitive_desc_t primitive_desc,
                                                                 dnnl_query_t what, int index) {
  static auto* const target =
      trainsim::onednn_resolve<decltype(dnnl_primitive_desc_query_md)>("dnnl_primitive_desc_query_md");
  return target != nullptr ? target(primitive_desc, what, index) : nullptr;
}

}  // extern "C"
