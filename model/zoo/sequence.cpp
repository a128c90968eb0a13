#include "model/zoo/families.hpp"
namespace trainsim { std::vector<ZooEntry> sequence_zoo_entries() { return {}; } }
