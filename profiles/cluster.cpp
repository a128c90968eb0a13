// trainsim.cluster/1 reader, writer, validation, and preset lookup.
#include "profiles/cluster.hpp"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <utility>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

LinkSpec read_link(const nlohmann::json& doc, const std::string& key, const std::string& where) {
  const nlohmann::json& j = require_field(doc, key, where);
  const std::string at = where + ": " + key;
  return LinkSpec{require_positive(j, "bandwidth_bytes_per_s", at), require_nonnegative(j, "latency_s", at),
                  optional_nonnegative(j, "send_buffer_bytes", at).value_or(0.0),
                  optional_nonnegative(j, "burst_bytes", at).value_or(0.0)};
}

nlohmann::json collective_json(const CollectiveSpec& k) {
  nlohmann::json j{{"reduce_bytes_per_s", k.reduce_bytes_per_s}, {"sync_s", k.sync_s}};
  if (k.pack_bytes_per_s != 0) j["pack_bytes_per_s"] = k.pack_bytes_per_s;  // optional: absent means in place
  if (k.pack_bytes_per_s != 0 && k.pack_latency_s != 0) j["pack_latency_s"] = k.pack_latency_s;  // beside a rate only
  if (k.hop_bytes_per_s != 0) j["hop_bytes_per_s"] = k.hop_bytes_per_s;  // optional: absent means the link's
  if (k.hop_latency_s) j["hop_latency_s"] = *k.hop_latency_s;            // optional: absent means the link's
  if (k.library) {  // optional: absent means the other algorithms' hops
    j["library"] = {{"hop_bytes_per_s", k.library->hop_bytes_per_s}, {"hop_latency_s", k.library->hop_latency_s}};
  }
  for (const auto& [name, rates] : {std::pair{"trunc16", k.trunc16}, std::pair{"quant8", k.quant8}}) {
    if (rates.encode_bytes_per_s == 0 && rates.decode_bytes_per_s == 0) continue;  // optional: absent means free
    j["codecs"][name] = {{"encode_bytes_per_s", rates.encode_bytes_per_s},
                         {"decode_bytes_per_s", rates.decode_bytes_per_s}};
  }
  return j;
}

nlohmann::json link_json(const LinkSpec& link) {
  nlohmann::json j{{"bandwidth_bytes_per_s", link.bandwidth_bytes_per_s}, {"latency_s", link.latency_s}};
  if (link.send_buffer_bytes != 0) j["send_buffer_bytes"] = link.send_buffer_bytes;  // optional: absent means none
  if (link.burst_bytes != 0) j["burst_bytes"] = link.burst_bytes;                    // optional: absent means none
  return j;
}

// DeviceSpec::host_per_op by kind, in the file's order.
constexpr std::pair<const char*, DeviceSpec::HostTime DeviceSpec::HostPerOp::*> kHostKinds[] = {
    {"forward", &DeviceSpec::HostPerOp::forward},
    {"backward", &DeviceSpec::HostPerOp::backward},
    {"update", &DeviceSpec::HostPerOp::update}};

nlohmann::json host_per_op_json(const DeviceSpec::HostPerOp& host) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, kind] : kHostKinds) {
    j[name] = {{"fixed_s", (host.*kind).fixed_s}, {"per_layer_s", (host.*kind).per_layer_s}};
  }
  return j;
}

DeviceSpec::HostPerOp read_host_per_op(const nlohmann::json& j, const std::string& at) {
  if (!j.is_object()) {
    throw InputError(at, "is not an object",
                     "{\"forward\": {\"fixed_s\": ..., \"per_layer_s\": ...}, \"backward\": ..., \"update\": ...}");
  }
  DeviceSpec::HostPerOp host;
  for (const auto& item : j.items()) {
    const std::string& name = item.key();
    const nlohmann::json& value = item.value();
    const auto* kind =
        std::find_if(std::begin(kHostKinds), std::end(kHostKinds), [&](const auto& k) { return name == k.first; });
    if (kind == std::end(kHostKinds))
      throw InputError(at, "names op kind '" + name + "'", "forward, backward or update");
    (host.*(kind->second)) = {require_nonnegative(value, "fixed_s", at + "." + name),
                              require_nonnegative(value, "per_layer_s", at + "." + name)};
  }
  return host;
}

}  // namespace

std::string host_per_op_text(const DeviceSpec::HostPerOp& host) {
  std::vector<std::string> kinds;
  for (const auto& [name, kind] : kHostKinds) {
    kinds.push_back(std::string(name) + " " + format_seconds((host.*kind).fixed_s) + " + " +
                    format_seconds((host.*kind).per_layer_s) + " a layer");
  }
  return join(kinds, ", ");
}

int64_t workers_per_shared_device(const Cluster& c) {
  if (c.shared_devices <= 0) return 1;
  return (c.devices_per_machine + c.shared_devices - 1) / c.shared_devices;
}

int64_t physical_device_of(const Cluster& c, int64_t device) {
  if (c.shared_devices <= 0) return device;
  const int64_t machine = device / c.devices_per_machine;
  return machine * c.shared_devices + (device % c.devices_per_machine) % c.shared_devices;
}

// DeviceSpec::compute_rate_while_shared: 1 / (1 + (n − 1)(1/r − 1)/(W − 1)),
// r = 1/W (processor sharing, 1/n) where the file gives none.
double shared_device_rate(const Cluster& c, int64_t computing) {
  const int64_t w = workers_per_shared_device(c);
  if (computing <= 1 || w <= 1) return 1;
  const double r =
      c.device.compute_rate_while_shared > 0 ? c.device.compute_rate_while_shared : 1.0 / static_cast<double>(w);
  const double slowdown_per_worker = (1 / r - 1) / static_cast<double>(w - 1);
  return 1 / (1 + static_cast<double>(computing - 1) * slowdown_per_worker);
}

void validate_cluster(const Cluster& c, const std::string& where) {
  // Round-tripping through JSON applies every field check in one place.
  cluster_from_json(cluster_to_json(c), where);
}

nlohmann::json cluster_to_json(const Cluster& c) {
  nlohmann::json doc = {{"format", "trainsim.cluster/1"},
          {"name", c.name},
          {"description", c.description},
          {"machines", c.machines},
          {"devices_per_machine", c.devices_per_machine},
          {"device",
           {{"name", c.device.name},
            {"kind", c.device.kind},
            {"memory_bytes", c.device.memory_bytes},
            {"peak_flops_per_s", c.device.peak_flops_per_s},
            {"memory_bytes_per_s", c.device.memory_bytes_per_s},
            {"compute_rate_while_communicating", c.device.compute_rate_while_communicating}}},
          {"intra_link", link_json(c.intra_link)},
          {"inter_link", link_json(c.inter_link)},
          {"host",
           {{"link_bandwidth_bytes_per_s", c.host.link_bandwidth_bytes_per_s},
            {"link_latency_s", c.host.link_latency_s},
            {"reduce_bytes_per_s", c.host.reduce_bytes_per_s},
            {"threads", c.host.threads},
            {"stream_sync_s", c.host.stream_sync_s}}},
          {"collective", collective_json(c.collective)}};
  if (c.device.handoff_s != 0) doc["device"]["handoff_s"] = c.device.handoff_s;  // optional: absent means 0
  if (c.device.collective_rate_while_computing != 0) {                           // optional: absent means derived
    doc["device"]["collective_rate_while_computing"] = c.device.collective_rate_while_computing;
  }
  if (c.shared_cores != 0) doc["shared_cores"] = c.shared_cores;                    // optional: absent means 0
  if (c.link_kernel_s_per_byte != 0) doc["link_kernel_s_per_byte"] = c.link_kernel_s_per_byte;  // optional: 0
  if (c.shared_devices != 0) doc["shared_devices"] = c.shared_devices;  // optional: absent means 0
  if (c.device.compute_rate_while_shared != 0) {                        // optional: absent means 1/W
    doc["device"]["compute_rate_while_shared"] = c.device.compute_rate_while_shared;
  }
  if (c.device.host_per_op.any()) doc["device"]["host_per_op"] = host_per_op_json(c.device.host_per_op);  // optional: 0
  return doc;
}

Cluster cluster_from_json(const nlohmann::json& doc, const std::string& where) {
  require_format(doc, "cluster", where);
  Cluster c;
  c.name = require_string(doc, "name", where);
  c.description = doc.contains("description") ? require_string(doc, "description", where) : "";
  c.machines = require_integer(doc, "machines", where, 1);
  c.devices_per_machine = require_integer(doc, "devices_per_machine", where, 1);
  if (doc.contains("shared_cores")) c.shared_cores = require_integer(doc, "shared_cores", where, 1);
  if (doc.contains("link_kernel_s_per_byte")) {
    c.link_kernel_s_per_byte = require_nonnegative(doc, "link_kernel_s_per_byte", where);
  }
  if (doc.contains("shared_devices")) {
    c.shared_devices = require_integer(doc, "shared_devices", where, 1);
    if (c.shared_devices > c.devices_per_machine) {
      throw InputError(where + ": shared_devices", "is " + std::to_string(c.shared_devices),
                       "at most devices_per_machine (" + std::to_string(c.devices_per_machine) + ")");
    }
    if (c.shared_cores != 0) {
      throw InputError(where + ": shared_devices", "is given with shared_cores",
                       "one of them: workers sharing a computer's cores, or virtual workers sharing devices");
    }
  }
  const nlohmann::json& d = require_field(doc, "device", where);
  const std::string at = where + ": device";
  c.device.name = require_string(d, "name", at);
  c.device.kind = require_string(d, "kind", at);
  if (c.device.kind != "gpu" && c.device.kind != "cpu") {
    throw InputError(at + ".kind", "is '" + c.device.kind + "'", "gpu or cpu");
  }
  c.device.memory_bytes = require_positive(d, "memory_bytes", at);
  c.device.peak_flops_per_s = require_positive(d, "peak_flops_per_s", at);
  c.device.memory_bytes_per_s = require_positive(d, "memory_bytes_per_s", at);
  const std::pair<const char*, double*> sharing[] = {
      {"compute_rate_while_communicating", &c.device.compute_rate_while_communicating},
      {"collective_rate_while_computing", &c.device.collective_rate_while_computing}};
  for (const auto& [field, rate] : sharing) {
    if (!d.contains(field)) continue;
    *rate = require_positive(d, field, at);
    if (*rate > 1) throw InputError(at + "." + field, "is " + std::to_string(*rate), "a rate in (0, 1]");
  }
  if (d.contains("handoff_s")) c.device.handoff_s = require_nonnegative(d, "handoff_s", at);
  if (d.contains("compute_rate_while_shared")) {
    const double rate = require_positive(d, "compute_rate_while_shared", at);
    if (rate > 1) throw InputError(at + ".compute_rate_while_shared", "is " + std::to_string(rate), "a rate in (0, 1]");
    if (c.shared_devices == 0) {
      throw InputError(at + ".compute_rate_while_shared", "is given without shared_devices",
                       "shared_devices, the physical devices the workers share");
    }
    c.device.compute_rate_while_shared = rate;
  }
  if (d.contains("host_per_op")) {
    c.device.host_per_op = read_host_per_op(d.at("host_per_op"), at + ".host_per_op");
    if (c.device.kind == "cpu" && c.device.host_per_op.any()) {
      throw InputError(at + ".host_per_op", "is given for a cpu device, whose work is its host's",
                       "a gpu device, or no host_per_op");
    }
  }
  c.intra_link = read_link(doc, "intra_link", where);
  c.inter_link = read_link(doc, "inter_link", where);
  const nlohmann::json& h = require_field(doc, "host", where);
  const std::string ht = where + ": host";
  c.host.link_bandwidth_bytes_per_s = require_positive(h, "link_bandwidth_bytes_per_s", ht);
  c.host.link_latency_s = require_nonnegative(h, "link_latency_s", ht);
  c.host.reduce_bytes_per_s = require_positive(h, "reduce_bytes_per_s", ht);
  c.host.threads = require_integer(h, "threads", ht, 1);
  c.host.stream_sync_s = require_nonnegative(h, "stream_sync_s", ht);
  const nlohmann::json& k = require_field(doc, "collective", where);
  c.collective.reduce_bytes_per_s = require_positive(k, "reduce_bytes_per_s", where + ": collective");
  c.collective.sync_s = require_nonnegative(k, "sync_s", where + ": collective");
  if (k.contains("pack_bytes_per_s")) {
    c.collective.pack_bytes_per_s = require_positive(k, "pack_bytes_per_s", where + ": collective");
  }
  if (k.contains("pack_latency_s")) {
    if (!k.contains("pack_bytes_per_s")) {
      throw InputError(where + ": collective: pack_latency_s", "is given without pack_bytes_per_s",
                       "pack_bytes_per_s beside it (a packing's rate), or neither (collectives read in place)");
    }
    c.collective.pack_latency_s = require_nonnegative(k, "pack_latency_s", where + ": collective");
  }
  if (k.contains("hop_bytes_per_s")) {
    c.collective.hop_bytes_per_s = require_positive(k, "hop_bytes_per_s", where + ": collective");
  }
  if (k.contains("hop_latency_s")) {
    c.collective.hop_latency_s = require_nonnegative(k, "hop_latency_s", where + ": collective");
  }
  if (k.contains("library")) {
    const nlohmann::json& library = k.at("library");
    const std::string library_at = where + ": collective: library";
    if (!library.is_object()) {
      throw InputError(library_at, "is not an object", "{\"hop_bytes_per_s\": ..., \"hop_latency_s\": ...}");
    }
    c.collective.library = CollectiveSpec::LibraryHops{require_positive(library, "hop_bytes_per_s", library_at),
                                                       require_nonnegative(library, "hop_latency_s", library_at)};
  }
  if (k.contains("codecs")) {
    const nlohmann::json& codecs = k.at("codecs");
    const std::string codecs_at = where + ": collective: codecs";
    if (!codecs.is_object()) throw InputError(codecs_at, "is not an object", "{\"quant8\": {\"encode_bytes_per_s\": ..., ...}}");
    for (const auto& [name, value] : codecs.items()) {
      if (name != "trunc16" && name != "quant8") throw InputError(codecs_at, "names codec '" + name + "'", "trunc16 or quant8");
      CodecRates& rates = name == "trunc16" ? c.collective.trunc16 : c.collective.quant8;
      rates.encode_bytes_per_s = require_positive(value, "encode_bytes_per_s", codecs_at + ": " + name);
      rates.decode_bytes_per_s = require_positive(value, "decode_bytes_per_s", codecs_at + ": " + name);
    }
  }
  return c;
}

Cluster load_cluster(const std::string& name_or_path, const std::string& where) {
  std::vector<std::string> names;
  for (const Cluster& preset : cluster_presets()) {
    if (preset.name == name_or_path) return preset;
    names.push_back(preset.name);
  }
  std::error_code error;  // a name too long for a path is no file, not a failure
  if (std::filesystem::exists(name_or_path, error)) return cluster_from_json(read_json_file(name_or_path), name_or_path);
  throw InputError(where, "'" + name_or_path + "' is neither a preset nor a file",
                   "a cluster JSON file or one of " + join(names, ", "));
}

}  // namespace trainsim
