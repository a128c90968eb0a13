// The model zoo: every architecture the seed papers train, plus small models
// a CPU can train. Each entry names its source and the published parameter
// count the tests hold it to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/layer.hpp"

namespace trainsim {

struct ZooEntry {
  std::string name;               // "vgg16"
  std::string summary;            // one line for `zoo list`
  int64_t published_params = 0;   // the figure the architecture's source publishes
  std::string params_source;      // where that figure comes from
  Model (*build)() = nullptr;
};

// All entries, in the order `zoo list` prints them.
const std::vector<ZooEntry>& zoo_entries();

// The entry called `name`; InputError naming `where` if there is none.
const ZooEntry& find_zoo_entry(const std::string& name, const std::string& where);

// Builds the model called `name` (validated).
Model build_zoo_model(const std::string& name, const std::string& where = "--model");

}  // namespace trainsim
