// A shared library opened when first needed (dlopen), for the entry points
// the project forwards to it (cuBLAS, oneDNN): linking them would make every
// run map them, and a build carried to a machine without them would not start.
#pragma once

#include <dlfcn.h>

#include <string>

namespace trainsim {

struct LibraryOnDemand {
  void* handle = nullptr;
  std::string error;  // why it could not be opened, naming `what`

  // Opens `file` (e.g. "libcublas.so.13"); `what` names it in the error.
  LibraryOnDemand(const std::string& what, const std::string& file) {
    handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      error = what + " (" + file + ") could not be loaded: " + (why != nullptr ? why : "unknown reason");
    }
  }

  // The library's own function `name` (or one of its dependencies'), of the
  // type of F, or nullptr when the library or the symbol is missing.
  template <typename F>
  F* resolve(const char* name) const {
    return handle != nullptr ? reinterpret_cast<F*>(dlsym(handle, name)) : nullptr;
  }
};

}  // namespace trainsim
