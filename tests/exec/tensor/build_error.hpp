// The InputError build_network throws for a model it cannot run, or a failed
// test and an empty error when it builds.
#pragma once

#include <gtest/gtest.h>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim::testing_fixtures {

inline InputError build_error(const Model& model) {
  try {
    build_network(model);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << model.name << " built";
  return InputError("", "", "");
}

}  // namespace trainsim::testing_fixtures
