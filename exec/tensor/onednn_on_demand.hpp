// oneDNN opened when first needed (onednn_on_demand.cpp defines the C entry
// points the project calls, forwarding to libdnnl.so.2 opened with dlopen).
#pragma once

#include <string>

namespace trainsim {

// Whether libdnnl.so.2 could be opened, and why not in *why.
bool onednn_loaded(std::string* why);

// Makes oneDNN's calls from this thread run on it alone (its OpenMP runtime
// would spread them over every core): the executor's workers are the
// parallelism, as with OpenBLAS (blas_threads.hpp).
void onednn_use_calling_thread();

}  // namespace trainsim
