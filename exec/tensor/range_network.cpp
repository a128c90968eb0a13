// What range_network.hpp declares beside its interfaces: an exported
// boundary brought to the host.
#include "exec/tensor/range_network.hpp"

#include <span>
#include <utility>
#include <vector>

namespace trainsim {

void exported_to_host(Tensor& t) {
  if (t.exported == nullptr) return;
  const ExportedBoundary& e = *t.exported;
  std::vector<float> data(static_cast<size_t>(element_count(t.shape)));
  KeptValues* const kept[] = {e.values.get()};
  const std::span<float> into[] = {data};
  e.store->to_host(kept, into, /*add=*/false);
  t.exported.reset();
  t.data = std::move(data);
}

}  // namespace trainsim
