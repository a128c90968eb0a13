// The zoo's registry: the families' entry lists, concatenated once.
#include "model/zoo/zoo.hpp"

#include "model/error.hpp"
#include "model/strings.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> all;
    for (auto family : {&classic_cnn_zoo_entries, &resnet_zoo_entries, &sequence_zoo_entries, &text_lm_zoo_entries}) {
      for (ZooEntry& entry : family()) all.push_back(std::move(entry));
    }
    return all;
  }();
  return entries;
}

const ZooEntry& find_zoo_entry(const std::string& name, const std::string& where) {
  std::vector<std::string> names;
  for (const ZooEntry& entry : zoo_entries()) {
    if (entry.name == name) return entry;
    names.push_back(entry.name);
  }
  throw InputError(where, "unknown model '" + name + "'", "one of " + join(names, ", "));
}

Model build_zoo_model(const std::string& name, const std::string& where) {
  Model model = find_zoo_entry(name, where).build();
  validate_model(model, "zoo model " + name);
  return model;
}

}  // namespace trainsim
