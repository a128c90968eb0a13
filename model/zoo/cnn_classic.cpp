#include "model/zoo/families.hpp"
namespace trainsim { std::vector<ZooEntry> classic_cnn_zoo_entries() { return {}; } }
