// What oneDNN's kernels share (conv_onednn.cpp, and those to come): the CPU
// engine, and a memory in the layout a primitive wants. Included only where
// TRAINSIM_WITH_ONEDNN is defined.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace trainsim::onednn {

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// `from` in the layout `layout` wants: `from` itself when it already is, else
// a reordered copy made on `stream`.
inline dnnl::memory in_layout(const dnnl::memory& from, const dnnl::memory::desc& layout, dnnl::stream& stream) {
  if (from.get_desc() == layout) return from;
  dnnl::memory to(layout, cpu_engine());
  dnnl::reorder(from, to).execute(stream, const_cast<dnnl::memory&>(from), to);
  return to;
}

// `to` in the user's layout, from the primitive's memory `from` (a reorder
// where the layouts differ, nothing where `from` is `to`).
inline void to_user(const dnnl::memory& from, const dnnl::memory& to, dnnl::stream& stream) {
  if (from == to) return;
  dnnl::reorder(from, to).execute(stream, const_cast<dnnl::memory&>(from), const_cast<dnnl::memory&>(to));
}

}  // namespace trainsim::onednn
