// Cluster presets: every one validates, survives a JSON round trip, is found
// by load_cluster, and carries its testbed's shape and derived rates.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/error.hpp"
#include "profiles/cluster.hpp"

namespace trainsim {
namespace {

const Cluster& preset(const std::string& name) {
  for (const Cluster& c : cluster_presets()) {
    if (c.name == name) return c;
  }
  throw std::logic_error("no preset " + name);
}

void expect_same_link(const LinkSpec& a, const LinkSpec& b) {
  EXPECT_EQ(a.bandwidth_bytes_per_s, b.bandwidth_bytes_per_s);
  EXPECT_EQ(a.latency_s, b.latency_s);
}

void expect_same_cluster(const Cluster& a, const Cluster& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.machines, b.machines);
  EXPECT_EQ(a.devices_per_machine, b.devices_per_machine);
  EXPECT_EQ(a.device.name, b.device.name);
  EXPECT_EQ(a.device.kind, b.device.kind);
  EXPECT_EQ(a.device.memory_bytes, b.device.memory_bytes);
  EXPECT_EQ(a.device.peak_flops_per_s, b.device.peak_flops_per_s);
  EXPECT_EQ(a.device.memory_bytes_per_s, b.device.memory_bytes_per_s);
  EXPECT_EQ(a.device.compute_rate_while_communicating, b.device.compute_rate_while_communicating);
  EXPECT_EQ(a.device.collective_rate_while_computing, b.device.collective_rate_while_computing);
  EXPECT_EQ(a.device.handoff_s, b.device.handoff_s);
  EXPECT_EQ(a.shared_cores, b.shared_cores);
  EXPECT_EQ(a.link_kernel_s_per_byte, b.link_kernel_s_per_byte);
  expect_same_link(a.intra_link, b.intra_link);
  expect_same_link(a.inter_link, b.inter_link);
  EXPECT_EQ(a.host.link_bandwidth_bytes_per_s, b.host.link_bandwidth_bytes_per_s);
  EXPECT_EQ(a.host.link_latency_s, b.host.link_latency_s);
  EXPECT_EQ(a.host.reduce_bytes_per_s, b.host.reduce_bytes_per_s);
  EXPECT_EQ(a.host.threads, b.host.threads);
  EXPECT_EQ(a.host.stream_sync_s, b.host.stream_sync_s);
  EXPECT_EQ(a.collective.reduce_bytes_per_s, b.collective.reduce_bytes_per_s);
  EXPECT_EQ(a.collective.sync_s, b.collective.sync_s);
  EXPECT_EQ(a.collective.pack_bytes_per_s, b.collective.pack_bytes_per_s);
}

TEST(Presets, EveryPresetValidates) {
  for (const Cluster& c : cluster_presets()) {
    SCOPED_TRACE(c.name);
    EXPECT_NO_THROW(validate_cluster(c, "preset " + c.name));
  }
}

TEST(Presets, NamesAreUniqueAndInTheListedOrder) {
  std::vector<std::string> names;
  for (const Cluster& c : cluster_presets()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"p40x4-pcie3", "titanxp-4node-10gbe", "p100x4-nvlink-power8",
                                             "titanxp-8x6-ib100", "h100x8-nvlink", "h100x4node-ib400"}));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

TEST(Presets, DeviceCountsMatchTheTestbeds) {
  // Seed 000: 4 P40 in one box; seed 002: 4 nodes × 1 TITAN Xp; seed 003: 4
  // P100 in one Minsky; seed 004: 8 machines × 6 TITAN Xp = 48; DGX H100: 8;
  // 4 DGX-style machines: 32.
  EXPECT_EQ(device_count(preset("p40x4-pcie3")), 4);
  EXPECT_EQ(preset("titanxp-4node-10gbe").machines, 4);
  EXPECT_EQ(device_count(preset("titanxp-4node-10gbe")), 4);
  EXPECT_EQ(device_count(preset("p100x4-nvlink-power8")), 4);
  EXPECT_EQ(preset("titanxp-8x6-ib100").machines, 8);
  EXPECT_EQ(device_count(preset("titanxp-8x6-ib100")), 48);
  EXPECT_EQ(device_count(preset("h100x8-nvlink")), 8);
  EXPECT_EQ(device_count(preset("h100x4node-ib400")), 32);
}

TEST(Presets, DescriptionsNameTheirSeed) {
  EXPECT_NE(preset("p40x4-pcie3").description.find("Seed 000"), std::string::npos);
  EXPECT_NE(preset("titanxp-4node-10gbe").description.find("Seed 002"), std::string::npos);
  EXPECT_NE(preset("p100x4-nvlink-power8").description.find("Seed 003"), std::string::npos);
  EXPECT_NE(preset("titanxp-8x6-ib100").description.find("Seed 004"), std::string::npos);
}

TEST(Presets, JsonRoundTripKeepsEveryField) {
  for (const Cluster& c : cluster_presets()) {
    SCOPED_TRACE(c.name);
    expect_same_cluster(cluster_from_json(cluster_to_json(c), c.name), c);
  }
}

// Both sharing rates: optional (1 and 0, derived, when absent), in (0, 1].
TEST(Presets, TheSharingRatesAreOptionalAndAtMostOne) {
  const std::pair<const char*, double> fields[] = {{"compute_rate_while_communicating", 1.0},
                                                   {"collective_rate_while_computing", 0.0}};
  for (const auto& [field, absent] : fields) {
    SCOPED_TRACE(field);
    const auto read = [field = std::string(field)](const nlohmann::json& doc) {
      const Cluster c = cluster_from_json(doc, "f");
      return field == "compute_rate_while_communicating" ? c.device.compute_rate_while_communicating
                                                         : c.device.collective_rate_while_computing;
    };
    nlohmann::json doc = cluster_to_json(cluster_presets().front());
    doc["device"][field] = 0.4;
    EXPECT_EQ(read(doc), 0.4);
    Cluster kept = cluster_from_json(doc, "f");
    expect_same_cluster(cluster_from_json(cluster_to_json(kept), "f"), kept);
    doc["device"].erase(field);
    EXPECT_EQ(read(doc), absent);
    for (const double bad : {0.0, 1.5}) {
      doc["device"][field] = bad;
      try {
        cluster_from_json(doc, "f");
        FAIL() << bad << " was accepted";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      }
    }
  }
}

// Found by fuzzing (tests/fuzz/corpus/cluster_json/description-list.json).
TEST(Presets, ADescriptionThatIsNoStringIsAnInputError) {
  nlohmann::json doc = cluster_to_json(cluster_presets().front());
  doc["description"] = nlohmann::json::array({1});
  EXPECT_THROW(cluster_from_json(doc, "f"), InputError);
  doc.erase("description");
  EXPECT_EQ(cluster_from_json(doc, "f").description, "");
}

TEST(Presets, CodecRatesAreOptionalAndPositive) {
  Cluster c = cluster_presets().front();
  EXPECT_FALSE(cluster_to_json(c)["collective"].contains("codecs"));  // no rates: absent, the codec free
  c.collective.quant8 = {1e9, 2e9};
  const Cluster with_codec = cluster_from_json(cluster_to_json(c), "f");
  EXPECT_EQ(with_codec.collective.quant8.encode_bytes_per_s, 1e9);
  EXPECT_EQ(with_codec.collective.quant8.decode_bytes_per_s, 2e9);
  EXPECT_EQ(with_codec.collective.trunc16.encode_bytes_per_s, 0.0);
  nlohmann::json bad = cluster_to_json(c);
  bad["collective"]["codecs"]["fp8"] = bad["collective"]["codecs"]["quant8"];
  EXPECT_THROW(cluster_from_json(bad, "f"), InputError);
  bad = cluster_to_json(c);
  bad["collective"]["codecs"]["quant8"]["decode_bytes_per_s"] = 0;
  EXPECT_THROW(cluster_from_json(bad, "f"), InputError);
}

TEST(Presets, HandoffIsOptionalAndNotNegative) {
  Cluster c = cluster_presets().front();
  EXPECT_FALSE(cluster_to_json(c)["device"].contains("handoff_s"));  // 0 is written as absent
  c.device.handoff_s = 25e-6;
  nlohmann::json doc = cluster_to_json(c);
  EXPECT_EQ(cluster_from_json(doc, "f").device.handoff_s, 25e-6);
  doc["device"].erase("handoff_s");
  EXPECT_EQ(cluster_from_json(doc, "f").device.handoff_s, 0.0);
  doc["device"]["handoff_s"] = -1e-6;
  try {
    cluster_from_json(doc, "f");
    FAIL() << "a negative hand-off was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("handoff_s"), std::string::npos) << e.what();
  }
}

// A GPU worker's host time per compute op: written only where some part is
// not 0, read back by kind, and a negative time or another kind refused,
// naming the field.
TEST(Presets, HostPerOpIsOptionalAndChecked) {
  Cluster c = cluster_presets().front();
  EXPECT_FALSE(cluster_to_json(c)["device"].contains("host_per_op"));  // all 0 is written as absent
  c.device.host_per_op = {{90e-6, 5e-6}, {0, 30e-6}, {240e-6, 0}};
  nlohmann::json doc = cluster_to_json(c);
  const DeviceSpec::HostPerOp read = cluster_from_json(doc, "f").device.host_per_op;
  EXPECT_EQ(read.forward.fixed_s, 90e-6);
  EXPECT_EQ(read.forward.per_layer_s, 5e-6);
  EXPECT_EQ(read.backward.fixed_s, 0);
  EXPECT_EQ(read.backward.per_layer_s, 30e-6);
  EXPECT_EQ(read.update.fixed_s, 240e-6);
  EXPECT_DOUBLE_EQ(read.forward.seconds(4), 110e-6);
  EXPECT_EQ(host_per_op_text(read),
            "forward 90 us + 5 us a layer, backward 0 ns + 30 us a layer, update 240 us + 0 ns a layer");
  doc["device"]["host_per_op"].erase("update");  // a kind left out is 0
  EXPECT_EQ(cluster_from_json(doc, "f").device.host_per_op.update.fixed_s, 0);
  const auto refused = [](const nlohmann::json& d, const std::string& field) {
    try {
      cluster_from_json(d, "f");
      ADD_FAILURE() << d.dump() << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  nlohmann::json bad = doc;
  bad["device"]["host_per_op"]["forward"]["fixed_s"] = -1e-6;
  refused(bad, "host_per_op.forward");
  bad = doc;
  bad["device"]["host_per_op"]["send"] = {{"fixed_s", 1e-6}, {"per_layer_s", 0}};
  refused(bad, "send");
  bad = doc;
  bad["device"]["host_per_op"] = 5e-6;
  refused(bad, "host_per_op");
  bad = doc;
  bad["device"]["kind"] = "cpu";  // a CPU's work is its host's
  refused(bad, "host_per_op");
}

TEST(Presets, SharedCoresAreOptionalAndAtLeastOne) {
  Cluster c = cluster_presets().front();
  EXPECT_FALSE(cluster_to_json(c).contains("shared_cores"));  // 0: each device its own
  c.shared_cores = 2;
  nlohmann::json doc = cluster_to_json(c);
  EXPECT_EQ(cluster_from_json(doc, "f").shared_cores, 2);
  doc.erase("shared_cores");
  EXPECT_EQ(cluster_from_json(doc, "f").shared_cores, 0);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(-2), nlohmann::json(1.5), nlohmann::json("2")}) {
    doc["shared_cores"] = bad;
    try {
      cluster_from_json(doc, "f");
      FAIL() << "shared_cores " << bad.dump() << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("shared_cores"), std::string::npos) << e.what();
    }
  }
}

TEST(Presets, SharedDevicesAndTheirRateAreOptionalAndChecked) {
  Cluster c = cluster_presets().front();  // 4 devices per machine
  ASSERT_EQ(c.devices_per_machine, 4);
  EXPECT_FALSE(cluster_to_json(c).contains("shared_devices"));  // 0: each device its own
  c.shared_devices = 1;
  c.device.compute_rate_while_shared = 0.4;
  nlohmann::json doc = cluster_to_json(c);
  EXPECT_EQ(cluster_from_json(doc, "f").shared_devices, 1);
  EXPECT_EQ(cluster_from_json(doc, "f").device.compute_rate_while_shared, 0.4);
  const auto refused = [&](const nlohmann::json& d, const std::string& field) {
    try {
      cluster_from_json(d, "f");
      ADD_FAILURE() << d.dump() << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(5), nlohmann::json(1.5)}) {
    nlohmann::json d = doc;
    d["shared_devices"] = bad;
    refused(d, "shared_devices");
  }
  for (const double bad : {0.0, 1.5, -0.2}) {
    nlohmann::json d = doc;
    d["device"]["compute_rate_while_shared"] = bad;
    refused(d, "compute_rate_while_shared");
  }
  nlohmann::json without = doc;
  without.erase("shared_devices");
  refused(without, "compute_rate_while_shared");  // a rate for devices nobody shares
  nlohmann::json with_cores = doc;
  with_cores["shared_cores"] = 2;
  refused(with_cores, "shared_cores");
}

// 1 / (1 + (n − 1)(1/r − 1)/(W − 1)) by hand, W = 4 workers on one device.
TEST(Presets, ASharedDevicesRateFollowsHowManyCompute) {
  Cluster c = cluster_presets().front();
  EXPECT_EQ(shared_device_rate(c, 4), 1.0);  // nobody shares
  c.shared_devices = 1;
  EXPECT_EQ(workers_per_shared_device(c), 4);
  EXPECT_EQ(shared_device_rate(c, 1), 1.0);
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 2), 0.5);  // r = 1/4: processor sharing
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 4), 0.25);
  c.device.compute_rate_while_shared = 0.4;  // 1/r − 1 = 1.5 over 3 workers: 0.5 each
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 2), 1 / 1.5);
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 3), 0.5);
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 4), 0.4);
  c.device.compute_rate_while_shared = 1;  // never slower
  EXPECT_EQ(shared_device_rate(c, 4), 1.0);
  c.shared_devices = 2;  // two workers on each
  c.device.compute_rate_while_shared = 0;
  EXPECT_EQ(workers_per_shared_device(c), 2);
  EXPECT_DOUBLE_EQ(shared_device_rate(c, 2), 0.5);
}

TEST(Presets, LinkKernelTimeIsOptionalAndNonNegative) {
  Cluster c = cluster_presets().front();
  EXPECT_FALSE(cluster_to_json(c).contains("link_kernel_s_per_byte"));  // 0: links cost the cores nothing
  c.link_kernel_s_per_byte = 2.9e-9;
  nlohmann::json doc = cluster_to_json(c);
  EXPECT_EQ(cluster_from_json(doc, "f").link_kernel_s_per_byte, 2.9e-9);
  doc.erase("link_kernel_s_per_byte");
  EXPECT_EQ(cluster_from_json(doc, "f").link_kernel_s_per_byte, 0.0);
  for (const nlohmann::json& bad : {nlohmann::json(-1e-9), nlohmann::json("3e-9"), nlohmann::json(nullptr)}) {
    doc["link_kernel_s_per_byte"] = bad;
    try {
      cluster_from_json(doc, "f");
      FAIL() << "link_kernel_s_per_byte " << bad.dump() << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("link_kernel_s_per_byte"), std::string::npos) << e.what();
    }
  }
}

TEST(Presets, PackBytesPerSecondIsOptionalAndPositive) {
  nlohmann::json doc = cluster_to_json(cluster_presets().front());
  EXPECT_FALSE(doc["collective"].contains("pack_bytes_per_s"));  // presets collect in place
  EXPECT_EQ(cluster_from_json(doc, "f").collective.pack_bytes_per_s, 0.0);
  doc["collective"]["pack_bytes_per_s"] = 8e9;
  const Cluster c = cluster_from_json(doc, "f");
  EXPECT_EQ(c.collective.pack_bytes_per_s, 8e9);
  EXPECT_EQ(cluster_to_json(c)["collective"]["pack_bytes_per_s"], 8e9);
  for (const double bad : {0.0, -1.0}) {
    doc["collective"]["pack_bytes_per_s"] = bad;
    try {
      cluster_from_json(doc, "f");
      FAIL() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("pack_bytes_per_s"), std::string::npos) << e.what();
    }
  }
}

// A packing's fixed part: absent means none, kept when set, refused when
// negative or without a packing rate beside it.
TEST(Presets, PackLatencyIsOptionalNotNegativeAndComesWithARate) {
  nlohmann::json doc = cluster_to_json(cluster_presets().front());
  EXPECT_FALSE(doc["collective"].contains("pack_latency_s"));
  doc["collective"]["pack_latency_s"] = 30e-6;
  try {
    cluster_from_json(doc, "f");
    FAIL() << "pack_latency_s without pack_bytes_per_s was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("f: collective: pack_latency_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pack_bytes_per_s"), std::string::npos) << e.what();
  }
  doc["collective"]["pack_bytes_per_s"] = 8e9;
  const Cluster c = cluster_from_json(doc, "f");
  EXPECT_EQ(c.collective.pack_latency_s, 30e-6);
  EXPECT_EQ(cluster_to_json(c)["collective"]["pack_latency_s"], 30e-6);
  doc["collective"]["pack_latency_s"] = -1e-6;
  try {
    cluster_from_json(doc, "f");
    FAIL() << "a negative pack_latency_s was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pack_latency_s"), std::string::npos) << e.what();
  }
}

// The library AllReduce's own hops: absent in the presets, kept when
// given, refused when not an object or a rate is not positive, the field
// named.
TEST(Presets, TheLibrarysHopsAreOptionalAndPositive) {
  nlohmann::json doc = cluster_to_json(cluster_presets().front());
  EXPECT_FALSE(doc["collective"].contains("library"));
  EXPECT_FALSE(cluster_from_json(doc, "f").collective.library);
  doc["collective"]["library"] = {{"hop_bytes_per_s", 40e9}, {"hop_latency_s", 5e-6}};
  const Cluster c = cluster_from_json(doc, "f");
  ASSERT_TRUE(c.collective.library);
  EXPECT_EQ(c.collective.library->hop_bytes_per_s, 40e9);
  EXPECT_EQ(c.collective.library->hop_latency_s, 5e-6);
  EXPECT_EQ(cluster_to_json(c)["collective"]["library"], doc["collective"]["library"]);
  for (const nlohmann::json& bad :
       {nlohmann::json(3), nlohmann::json{{"hop_bytes_per_s", 0}, {"hop_latency_s", 0}},
        nlohmann::json{{"hop_bytes_per_s", 1e9}, {"hop_latency_s", -1}}, nlohmann::json{{"hop_latency_s", 0}}}) {
    doc["collective"]["library"] = bad;
    try {
      cluster_from_json(doc, "f");
      FAIL() << "accepted library " << bad.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("f: collective: library"), std::string::npos) << e.what();
    }
  }
}

// The links' optional fields: absent in the presets and read back as 0,
// kept when set, refused when negative with the link and field named.
TEST(Presets, SendBuffersAndBurstsAreOptionalAndNotNegative) {
  for (const auto& [field, member] : {std::pair{"send_buffer_bytes", &LinkSpec::send_buffer_bytes},
                                      std::pair{"burst_bytes", &LinkSpec::burst_bytes}}) {
    Cluster c = cluster_presets().front();
    EXPECT_FALSE(cluster_to_json(c)["inter_link"].contains(field)) << field;  // presets: none
    c.inter_link.*member = 131072;
    nlohmann::json doc = cluster_to_json(c);
    EXPECT_EQ(cluster_from_json(doc, "f").inter_link.*member, 131072.0) << field;
    EXPECT_EQ(cluster_from_json(doc, "f").intra_link.*member, 0.0) << field;
    doc["intra_link"][field] = -1;
    try {
      cluster_from_json(doc, "f");
      ADD_FAILURE() << "a negative " << field << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("intra_link"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

TEST(Presets, LoadClusterFindsEveryPresetByName) {
  for (const Cluster& c : cluster_presets()) expect_same_cluster(load_cluster(c.name), c);
}

TEST(Presets, LoadClusterRejectsAnUnknownName) {
  try {
    load_cluster("p40x5-pcie3", "--cluster");
    FAIL() << "an unknown preset name was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--cluster");
    EXPECT_NE(e.expected().find("h100x8-nvlink"), std::string::npos);  // lists the presets
  }
}

TEST(Presets, ReductionRatesAreMemoryBandwidthOverThree) {
  // Summation reads two bytes and writes one per byte reduced.
  // P40: 346 GB/s / 3 = 115.33 GB/s on the device. Host (one Xeon E5-2650
  // v4, 4 × DDR4-2400 = 76.8 GB/s, 75% sustained): 76.8e9 × 0.75 / 3 = 19.2 GB/s.
  const Cluster& p40 = preset("p40x4-pcie3");
  EXPECT_DOUBLE_EQ(p40.collective.reduce_bytes_per_s, 346e9 / 3);
  EXPECT_DOUBLE_EQ(p40.host.reduce_bytes_per_s, 19.2e9);
  // POWER8 S822LC: 2 × 115 GB/s × 0.75 / 3 = 57.5 GB/s.
  EXPECT_DOUBLE_EQ(preset("p100x4-nvlink-power8").host.reduce_bytes_per_s, 57.5e9);
  // H100: 3.35 TB/s / 3 = 1.1167 TB/s.
  EXPECT_DOUBLE_EQ(preset("h100x8-nvlink").collective.reduce_bytes_per_s, 3.35e12 / 3);
}

TEST(Presets, EffectiveLinkRatesStayBelowTheirLineRates) {
  // PCIe 3.0 x16 15.75 GB/s; 10 GbE 1.25 GB/s; NVLink 1 pair 40 GB/s per
  // direction (seed 003: 80 GB/s duplex); EDR InfiniBand 12.5 GB/s; NVLink 4
  // 450 GB/s per GPU; 8 × NDR 400 Gb/s = 400 GB/s per machine.
  EXPECT_LE(preset("p40x4-pcie3").intra_link.bandwidth_bytes_per_s, 15.75e9);
  EXPECT_LE(preset("titanxp-4node-10gbe").inter_link.bandwidth_bytes_per_s, 1.25e9);
  EXPECT_LE(preset("p100x4-nvlink-power8").intra_link.bandwidth_bytes_per_s, 40e9);
  EXPECT_LE(preset("p100x4-nvlink-power8").host.link_bandwidth_bytes_per_s, 40e9);
  EXPECT_LE(preset("titanxp-8x6-ib100").inter_link.bandwidth_bytes_per_s, 12.5e9);
  EXPECT_LE(preset("h100x8-nvlink").intra_link.bandwidth_bytes_per_s, 450e9);
  EXPECT_LE(preset("h100x4node-ib400").inter_link.bandwidth_bytes_per_s, 400e9);
  // And the multi-machine networks are slower than the links inside a machine.
  for (const char* name : {"titanxp-8x6-ib100", "h100x4node-ib400"}) {
    EXPECT_LT(preset(name).inter_link.bandwidth_bytes_per_s / preset(name).devices_per_machine,
              preset(name).intra_link.bandwidth_bytes_per_s)
        << name;
  }
}

}  // namespace
}  // namespace trainsim
