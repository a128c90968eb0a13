// The measuring profiler and the machine probe: structure and invariants of
// what they measure (never the timings' exact values, which depend on the
// machine), the channel fit against hand-computed sweeps, and bad options.
#include "profiles/profiler/profiler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"
#include "exec/data/synthetic_text.hpp"
#include "exec/interpreter.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "tests/profiles/quick_probe.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

// Few repeats: the tests check what is measured, not how precisely.
MeasureOptions quick(int64_t concurrent = 1) {
  MeasureOptions o;
  o.repeats = 3;
  o.warmups = 1;
  o.concurrent = concurrent;
  return o;
}

const LayerProfile& layer_named(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  throw std::out_of_range("no layer " + name);
}

TEST(MeasuredProfile, HasOneLayerPerModelLayerInOrderWithPositiveTimes) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Profile p = measure_profile(model, 64, quick());
  ASSERT_EQ(p.layers.size(), model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    EXPECT_EQ(p.layers[i].name, model.layers[i].name);
    EXPECT_EQ(p.layers[i].inputs, model.layers[i].inputs);
    EXPECT_GT(p.layers[i].forward_s, 0) << p.layers[i].name;
    EXPECT_GT(p.layers[i].backward_s, 0) << p.layers[i].name;
  }
  EXPECT_EQ(p.source, "measured");
  EXPECT_EQ(p.model, "fmnist-mlp");
  EXPECT_EQ(p.batch_size, 64);
  EXPECT_EQ(p.device.kind, "cpu");
  EXPECT_NE(p.device.name.find("(1 threads)"), std::string::npos) << p.device.name;
}

TEST(MeasuredProfile, UpdateIsTimedForLayersWithWeightsOnly) {
  // fc1 steps 784·256 + 256 weights with momentum; relu1 has none to step.
  const Profile p = measure_profile(build_zoo_model("fmnist-mlp"), 64, quick());
  ASSERT_TRUE(layer_named(p, "fc1").update_s.has_value());
  EXPECT_GT(*layer_named(p, "fc1").update_s, 0);
  ASSERT_TRUE(layer_named(p, "relu1").update_s.has_value());
  EXPECT_EQ(*layer_named(p, "relu1").update_s, 0);
}

TEST(MeasuredProfile, FixedPartsLieWithinTheWholeTimes) {
  // Fitted from a second measurement at batch 64 / 8 = 8 (the profile's
  // validation also rejects a fixed part above its whole time).
  const Profile p = measure_profile(build_zoo_model("fmnist-mlp"), 64, quick());
  for (const LayerProfile& l : p.layers) {
    ASSERT_TRUE(l.forward_fixed_s.has_value()) << l.name;
    ASSERT_TRUE(l.backward_fixed_s.has_value()) << l.name;
    EXPECT_GE(*l.forward_fixed_s, 0);
    EXPECT_LE(*l.forward_fixed_s, l.forward_s);
    EXPECT_LE(*l.backward_fixed_s, l.backward_s);
  }
  // Below batch 8 there is no smaller batch to fit against.
  EXPECT_FALSE(measure_profile(build_zoo_model("fmnist-mlp"), 4, quick()).layers[0].forward_fixed_s.has_value());
}

TEST(MeasuredProfile, GemmLayerForwardTakesLongerThanTheReluAfterIt) {
  // fc1 multiplies 64×784 by 784×256 (12.8M multiply-adds); relu1 touches
  // 64·256 = 16,384 values: three orders of magnitude less work.
  const Profile p = measure_profile(build_zoo_model("fmnist-mlp"), 64, quick());
  EXPECT_GT(layer_named(p, "fc1").forward_s, layer_named(p, "relu1").forward_s);
}

TEST(MeasuredProfile, BytesAreExactlyTheModelsAtTheBatch) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Profile p = measure_profile(model, 64, quick());
  // fc1: 784·256 + 256 = 200,960 fp32 parameters = 803,840 bytes; its output
  // is 64 samples × 256 floats × 4 bytes = 65,536 bytes.
  EXPECT_DOUBLE_EQ(layer_named(p, "fc1").param_bytes, 803840.0);
  EXPECT_DOUBLE_EQ(layer_named(p, "fc1").activation_bytes, 65536.0);
  // flatten: no parameters; 64 × 784 × 4 = 200,704 bytes out.
  EXPECT_DOUBLE_EQ(layer_named(p, "flatten").param_bytes, 0.0);
  EXPECT_DOUBLE_EQ(layer_named(p, "flatten").activation_bytes, 200704.0);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    EXPECT_DOUBLE_EQ(p.layers[i].param_bytes, 4.0 * static_cast<double>(model.layers[i].param_count));
    EXPECT_DOUBLE_EQ(p.layers[i].activation_bytes,
                     4.0 * 64 * static_cast<double>(element_count(model.layers[i].output_shape)));
    EXPECT_FALSE(p.layers[i].sparse);
    EXPECT_EQ(p.layers[i].sparsity, 1.0);
  }
}

TEST(MeasuredProfile, RoundTripsThroughTheProfileFormat) {
  const Profile p = measure_profile(build_zoo_model("fmnist-mlp"), 16, quick());
  const Profile back = profile_from_json(profile_to_json(p), "round trip");
  ASSERT_EQ(back.layers.size(), p.layers.size());
  EXPECT_EQ(back.source, "measured");
  EXPECT_EQ(back.device.name, p.device.name);
  EXPECT_DOUBLE_EQ(back.layers[1].forward_s, p.layers[1].forward_s);
}

TEST(MeasuredProfile, ConcurrentCopiesReportThreadZeroUnderTheThreadCount) {
  const Profile p = measure_profile(build_zoo_model("fmnist-mlp"), 16, quick(2));
  EXPECT_NE(p.device.name.find("(2 threads)"), std::string::npos) << p.device.name;
  EXPECT_EQ(p.layers.size(), 7u);
  EXPECT_GT(total_forward_s(p), 0);
}

TEST(MeasuredProfile, SparsityIsTheFractionOfTableRowsTheBatchTouched) {
  // 64 samples × 8 ids over a 4-row table: 512 uniform draws miss a given row
  // with probability (3/4)^512 ≈ 1e-64, so every row is touched: sparsity 1.
  ModelBuilder small("tiny-bag", "4-row bag", {8}, 64);
  small.linear("fc", small.embedding_bag("bag", kModelInput, 4, 3), 2);
  const Profile all = measure_profile(std::move(small).build(), 64, quick());
  EXPECT_TRUE(all.layers[0].sparse);
  EXPECT_DOUBLE_EQ(all.layers[0].sparsity, 1.0);
  // text-bag, one sample of 32 ids over 50,000 rows: between 1 and 32 distinct
  // rows, so the fraction lies in [1/50,000, 32/50,000] and is a whole number
  // of rows over 50,000.
  const Profile one = measure_profile(build_zoo_model("text-bag"), 1, quick());
  const double rows = one.layers[0].sparsity * 50000.0;
  EXPECT_GE(rows, 1.0 - 1e-9);
  EXPECT_LE(rows, 32.0 + 1e-9);
  EXPECT_NEAR(rows, std::round(rows), 1e-6);
  EXPECT_DOUBLE_EQ(one.layers[1].sparsity, 1.0);  // fc1 is dense
}

TEST(MeasuredProfile, BatchesComeFromTheGivenDataSet) {
  // text-bag's rows drawn from a data set whose token ids are all below 10:
  // at most 10 of the 50,000 table rows are touched, where random ids touch
  // hundreds.
  Tensor few_ids({100, 32});
  for (size_t i = 0; i < few_ids.data.size(); ++i) few_ids.data[i] = static_cast<float>(i % 10);
  MeasureOptions o = quick();
  o.source = &few_ids;
  const Profile p = measure_profile(build_zoo_model("text-bag"), 16, o);
  EXPECT_LE(p.layers[0].sparsity * 50000.0, 10.0 + 1e-9);
  const Profile random = measure_profile(build_zoo_model("text-bag"), 16, quick());
  EXPECT_GT(random.layers[0].sparsity * 50000.0, 100.0);
  Tensor wrong({100, 7});
  o.source = &wrong;
  EXPECT_THROW(measure_profile(build_zoo_model("text-bag"), 16, o), InputError);
}

TEST(MeasuredCluster, CallsTogetherBeforeEachProbe) {
  // Processes probing at once start each probe together: twelve probes for
  // one worker, and a ring hop's for two.
  for (const auto& [workers, probes] : std::vector<std::pair<int64_t, int>>{{1, 12}, {2, 13}}) {
    ClusterProbeOptions o = testing_fixtures::quick_probe();
    int calls = 0;
    o.together = [&] { ++calls; };
    measure_cpu_cluster(workers, o);
    EXPECT_EQ(calls, probes) << workers;
  }
}

TEST(MeasuredProfile, MeasuresTheRowsSeveralWorkersBatchesTouchTogether) {
  // text-bag's batches of 64 from the synthetic text set, whose tokens
  // repeat common words (a Zipf background): 2, 4, 8 and 16 batches touch
  // more rows than one, and fewer than independent draws of one batch's
  // fraction would (the workers' rows overlap). Random ids: about as many
  // as independent draws.
  const Dataset text = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 2000, 10, 5);
  MeasureOptions o = quick();
  o.source = &text.train_x;
  const Profile zipf = measure_profile(build_zoo_model("text-bag"), 64, o);
  const LayerProfile& table = zipf.layers[0];
  ASSERT_EQ(table.union_sparsity.size(), 4u);
  double below = table.sparsity;
  for (size_t k = 0; k < 4; ++k) {
    const double workers = std::exp2(static_cast<double>(k + 1));
    EXPECT_GT(table.union_sparsity[k], below) << k;
    EXPECT_LT(table.union_sparsity[k], 1 - std::pow(1 - table.sparsity, workers)) << k;
    below = table.union_sparsity[k];
  }
  EXPECT_LT(table.union_sparsity[3], 0.8 * (1 - std::pow(1 - table.sparsity, 16.0)));  // 16 workers: far fewer
  EXPECT_TRUE(zipf.layers[1].union_sparsity.empty());  // fc1 is dense
  const Profile random = measure_profile(build_zoo_model("text-bag"), 64, quick());
  const double independent = 1 - std::pow(1 - random.layers[0].sparsity, 2.0);
  EXPECT_NEAR(random.layers[0].union_sparsity.at(0), independent, 0.05 * independent);
  EXPECT_TRUE(measure_profile(build_zoo_model("fmnist-mlp"), 16, quick()).layers[0].union_sparsity.empty());
}

TEST(MeasuredProfile, MeasuresTheLanguageModelsOnTokenIdsWithALabelPerPosition) {
  // A token embedding reads integer ids; the {64, 256} output takes a label
  // per position.
  for (const char* name : {"fortunes-gpt", "fortunes-lstm"}) {
    const Model model = build_zoo_model(name);
    const Profile p = measure_profile(model, 2, quick());
    ASSERT_EQ(p.layers.size(), model.layers.size()) << name;
    EXPECT_GT(p.layers.front().forward_s, 0) << name;
    EXPECT_GT(p.layers.back().backward_s, 0) << name;
  }
}

TEST(MeasuredProfile, RejectsOptionsBelowOneNamingTheFlag) {
  const Model model = build_zoo_model("fmnist-mlp");
  MeasureOptions no_repeats = quick();
  no_repeats.repeats = 0;
  MeasureOptions no_threads = quick();
  no_threads.concurrent = 0;
  const auto where_of = [&](int64_t batch, const MeasureOptions& o) {
    try {
      measure_profile(model, batch, o);
    } catch (const InputError& e) {
      return e.where();
    }
    return std::string("no error");
  };
  EXPECT_EQ(where_of(0, quick()), "--batch");
  EXPECT_EQ(where_of(8, no_repeats), "--repeats");
  EXPECT_EQ(where_of(8, no_threads), "--concurrent");
  MeasureOptions too_many_threads = quick();
  too_many_threads.concurrent = 100'000;  // past max_worker_threads(): refused before any thread or network
  EXPECT_EQ(where_of(8, too_many_threads), "--concurrent");
}

TEST(WorkerThreads, TheLimitIsFourPerCoreAndAtMost1024) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  EXPECT_EQ(max_worker_threads(), std::min<int64_t>(4 * cores, 1024));
}

TEST(WorkerThreads, RunThreadsRunsEveryBodyOnceAndRethrowsTheFirstFailure) {
  std::atomic<int64_t> ran{0};
  run_threads(4, [&](int64_t, std::barrier<>& sync) {
    sync.arrive_and_wait();
    ++ran;
  });
  EXPECT_EQ(ran.load(), 4);
  EXPECT_THROW(run_threads(3, [](int64_t t, std::barrier<>& sync) {
                 if (t == 1) throw std::runtime_error("thread 1 failed");
                 sync.arrive_and_wait();
               }),
               std::runtime_error);
}

TEST(MeasuredProfile, ModelWithAnOpExecCannotRunFailsNamingTheLayer) {
  // snn's hidden layers use SELU, which has no CPU kernel.
  try {
    measure_profile(build_zoo_model("snn"), 1, quick());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(e.where().find("snn"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("selu"), std::string::npos) << e.what();
  }
}

TEST(MedianProfile, TakesEachLayersMedianTimeOverTheProfiles) {
  Profile a;
  a.batch_size = 8;
  a.layers.resize(2);
  a.layers[0].name = "fc";
  a.layers[1].name = "relu";
  a.layers[0].param_bytes = 400;
  a.layers[0].update_s = 1e-6;
  Profile b = a;
  Profile c = a;
  a.layers[0].forward_s = 1e-3, b.layers[0].forward_s = 5e-3, c.layers[0].forward_s = 2e-3;
  a.layers[1].backward_s = 9e-3, b.layers[1].backward_s = 1e-3, c.layers[1].backward_s = 3e-3;
  b.layers[0].update_s = 3e-6, c.layers[0].update_s = 2e-6;
  c.layers[0].backward_input_s = 1e-3;  // only one profile split the backward
  const Profile m = median_profile({a, b, c});
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s, 2e-3);
  EXPECT_DOUBLE_EQ(m.layers[1].backward_s, 3e-3);
  EXPECT_DOUBLE_EQ(*m.layers[0].update_s, 2e-6);
  EXPECT_FALSE(m.layers[0].backward_input_s.has_value());
  EXPECT_FALSE(m.layers[1].update_s.has_value());
  EXPECT_EQ(m.layers[0].param_bytes, 400);
  Profile other = a;
  other.batch_size = 16;
  EXPECT_ANY_THROW(median_profile({a, other}));
}

using testing_fixtures::quick_probe;

TEST(MeasuredCluster, IsOneMachineOfCpuWorkersWithPositiveRatesThatValidates) {
  const Cluster c = measure_cpu_cluster(2, quick_probe());
  EXPECT_EQ(c.name, "cpu2-measured");
  EXPECT_EQ(c.machines, 1);
  EXPECT_EQ(c.devices_per_machine, 2);
  EXPECT_EQ(c.device.kind, "cpu");
  EXPECT_GT(c.device.memory_bytes, 0);
  EXPECT_GT(c.device.peak_flops_per_s, 0);
  EXPECT_GT(c.device.memory_bytes_per_s, 0);
  EXPECT_GT(c.intra_link.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.intra_link.latency_s, 0);
  EXPECT_EQ(c.inter_link.bandwidth_bytes_per_s, c.intra_link.bandwidth_bytes_per_s);
  EXPECT_EQ(c.host.link_latency_s, c.intra_link.latency_s);
  EXPECT_GT(c.host.link_bandwidth_bytes_per_s, 0);  // both workers copying at once
  EXPECT_GT(c.host.reduce_bytes_per_s, 0);
  EXPECT_GT(c.collective.reduce_bytes_per_s, 0);  // both workers at once, a chunk each
  EXPECT_GT(c.collective.hop_bytes_per_s, 0);
  EXPECT_GE(c.host.threads, 1);
  EXPECT_EQ(c.host.stream_sync_s, 0);
  EXPECT_GE(c.collective.sync_s, 0);
  EXPECT_GT(c.collective.pack_bytes_per_s, 0);
  EXPECT_EQ(c.device.compute_rate_while_communicating,
            cpu_compute_rate_while_communicating(2, usable_cores()));
  EXPECT_GT(c.device.handoff_s, 0);  // at least the wake-up call
  EXPECT_LT(c.device.handoff_s, 0.1);
  for (const CodecRates& codec : {c.collective.trunc16, c.collective.quant8}) {  // the executor's codecs, timed
    EXPECT_GT(codec.encode_bytes_per_s, 0);
    EXPECT_GT(codec.decode_bytes_per_s, 0);
  }
  const Cluster one = measure_cpu_cluster(1, quick_probe());  // no peer thread to wake
  EXPECT_GT(one.device.handoff_s, 0);
  EXPECT_EQ(one.collective.hop_bytes_per_s, 0);  // no hop: the link's bandwidth
  // One worker's copy to the host is a copy in its memory, timed as such,
  // not a message between threads.
  EXPECT_NE(one.host.link_bandwidth_bytes_per_s, one.intra_link.bandwidth_bytes_per_s);
  EXPECT_GT(one.host.link_bandwidth_bytes_per_s, 0);
  EXPECT_EQ(one.collective.reduce_bytes_per_s, one.host.reduce_bytes_per_s);
  const Cluster back = cluster_from_json(cluster_to_json(c), "round trip");
  EXPECT_EQ(back.name, c.name);
  EXPECT_DOUBLE_EQ(back.device.peak_flops_per_s, c.device.peak_flops_per_s);
  EXPECT_DOUBLE_EQ(back.collective.hop_bytes_per_s, c.collective.hop_bytes_per_s);
}

// What a GPU's virtual workers' collectives cost on the host: the probe
// sets the hop, its latency, the chunk's sum and the barrier, and leaves
// the rest of the collective as it was (the GPU probe's packing, codecs).
TEST(MeasuredCluster, AHostCollectiveSetsItsHopSumAndBarrierOnly) {
  CollectiveSpec c;
  c.pack_bytes_per_s = 123;
  c.trunc16.encode_bytes_per_s = 7;
  measure_host_collective(2, 1 << 20, quick_probe(), c);
  EXPECT_GT(c.hop_bytes_per_s, 0);
  ASSERT_TRUE(c.hop_latency_s.has_value());
  EXPECT_GT(*c.hop_latency_s, 0);
  EXPECT_LT(*c.hop_latency_s, 0.1);
  EXPECT_GT(c.reduce_bytes_per_s, 0);
  EXPECT_GE(c.sync_s, 0);
  EXPECT_LT(c.sync_s, 0.1);
  EXPECT_EQ(c.pack_bytes_per_s, 123);
  EXPECT_EQ(c.trunc16.encode_bytes_per_s, 7);
  EXPECT_THROW(measure_host_collective(1, 1 << 20, quick_probe(), c), std::exception);  // no collective
}

TEST(MeasuredCluster, AProcessOfASharedRunTimesItsWorkersHandOff) {
  // Rank 3 of 4 (the MPI transport probe): its compute and communication
  // threads where worker 3's sit in that run, no peer thread.
  ClusterProbeOptions options = quick_probe();
  options.as_worker = 3;
  options.as_workers = 4;
  const Cluster c = measure_cpu_cluster(1, options);
  EXPECT_GT(c.device.handoff_s, 0);
  EXPECT_LT(c.device.handoff_s, 0.1);
  options.as_worker = 4;  // not one of the run's workers
  EXPECT_THROW(measure_cpu_cluster(1, options), std::logic_error);
}

TEST(MeasuredCluster, TheMedianOfProbesTakesEachRatesMedian) {
  // Three probes of one machine: each measured field is the middle value,
  // whichever probe it came from; the name and counts are the first's.
  Cluster a = load_cluster("p40x4-pcie3");
  Cluster b = a, c = a;
  a.device.peak_flops_per_s = 1;
  b.device.peak_flops_per_s = 3;
  c.device.peak_flops_per_s = 2;
  a.collective.hop_bytes_per_s = 9;
  b.collective.hop_bytes_per_s = 7;
  c.collective.hop_bytes_per_s = 8;
  a.intra_link.latency_s = 5e-6;
  b.intra_link.latency_s = 4e-6;
  c.intra_link.latency_s = 6e-6;
  a.link_kernel_s_per_byte = 8e-9;
  b.link_kernel_s_per_byte = 3e-9;
  c.link_kernel_s_per_byte = 3.5e-9;
  a.collective.pack_latency_s = 30e-6;
  b.collective.pack_latency_s = 10e-6;
  c.collective.pack_latency_s = 20e-6;
  a.device.compute_rate_while_shared = 0.5;  // virtual workers sharing a GPU, each round's own
  b.device.compute_rate_while_shared = 0.3;
  c.device.compute_rate_while_shared = 0.4;
  a.host.stream_sync_s = 3e-6;
  b.host.stream_sync_s = 1e-6;
  c.host.stream_sync_s = 2e-6;
  a.collective.library = CollectiveSpec::LibraryHops{40e9, 6e-6};
  b.collective.library = CollectiveSpec::LibraryHops{20e9, 4e-6};
  c.collective.library = CollectiveSpec::LibraryHops{30e9, 5e-6};
  a.device.host_per_op.forward = {90e-6, 3e-6};  // a GPU worker's host per op, each round's own
  b.device.host_per_op.forward = {70e-6, 5e-6};
  c.device.host_per_op.forward = {80e-6, 4e-6};
  b.device.host_per_op.update.fixed_s = 200e-6;
  c.name = "another";
  const Cluster m = median_cluster({a, b, c});
  EXPECT_EQ(m.device.host_per_op.forward.fixed_s, 80e-6);
  EXPECT_EQ(m.device.host_per_op.forward.per_layer_s, 4e-6);
  EXPECT_EQ(m.device.host_per_op.update.fixed_s, 0);  // 0, 200, 0
  ASSERT_TRUE(m.collective.library);
  EXPECT_EQ(m.collective.library->hop_bytes_per_s, 30e9);
  EXPECT_EQ(m.collective.library->hop_latency_s, 5e-6);
  Cluster unmeasured = a;  // a probe NCCL failed in: no library hops in the median
  unmeasured.collective.library.reset();
  EXPECT_FALSE(median_cluster({unmeasured, b, c}).collective.library);
  EXPECT_FALSE(median_cluster({b, unmeasured, c}).collective.library);
  EXPECT_EQ(m.link_kernel_s_per_byte, 3.5e-9);
  EXPECT_EQ(m.device.compute_rate_while_shared, 0.4);
  EXPECT_EQ(m.host.stream_sync_s, 2e-6);
  EXPECT_EQ(m.device.peak_flops_per_s, 2);
  EXPECT_EQ(m.collective.hop_bytes_per_s, 8);
  EXPECT_EQ(m.collective.pack_latency_s, 20e-6);
  EXPECT_EQ(m.intra_link.latency_s, 5e-6);
  EXPECT_EQ(m.collective.reduce_bytes_per_s, a.collective.reduce_bytes_per_s);
  EXPECT_EQ(m.name, a.name);
  Cluster bigger = a;
  bigger.devices_per_machine = 8;
  EXPECT_THROW(median_cluster({a, bigger}), InternalError);
  EXPECT_THROW(median_cluster({}), InternalError);
}

TEST(MeasuredCluster, ComputeSharesTheCoresWithTheCommunicationThreads) {
  // A worker's two threads share its core unless each worker has a spare
  // one: 2 workers on 2 or 3 cores share (0.5), on 4 or 16 they do not (1);
  // 4 workers on 2 cores share; 0 reported cores count as 1.
  EXPECT_EQ(cpu_compute_rate_while_communicating(2, 2), 0.5);
  EXPECT_EQ(cpu_compute_rate_while_communicating(2, 3), 0.5);
  EXPECT_EQ(cpu_compute_rate_while_communicating(4, 2), 0.5);
  EXPECT_EQ(cpu_compute_rate_while_communicating(2, 4), 1.0);
  EXPECT_EQ(cpu_compute_rate_while_communicating(2, 16), 1.0);
  EXPECT_EQ(cpu_compute_rate_while_communicating(1, 0), 0.5);
}

TEST(WorkerThreads, CommunicationRunsBesideComputeUnlessEachWorkerHasASpareCore) {
  // 2 workers on 2 cores: every thread of worker w on core w.
  EXPECT_EQ(worker_thread_core(0, 2, 2, true), 0);
  EXPECT_EQ(worker_thread_core(1, 2, 2, false), 1);
  // 2 workers on 4 cores: compute on 0 and 1, communication on 2 and 3.
  EXPECT_EQ(worker_thread_core(1, 2, 4, true), 1);
  EXPECT_EQ(worker_thread_core(0, 2, 4, false), 2);
  EXPECT_EQ(worker_thread_core(1, 2, 4, false), 3);
  EXPECT_GE(usable_cores(), 1);
}

TEST(MeasuredCluster, ProbeOptionsPackAndUpdateTheProfilesGradientBytes) {
  Profile profile;
  LayerProfile l;
  l.param_bytes = 940584;
  profile.layers = {l, l};
  EXPECT_EQ(probe_options_for(profile).pack_bytes, 2 * 940584);
  EXPECT_EQ(probe_options_for(profile).update_bytes, 2 * 940584);
}

TEST(MeasuredCluster, RejectsZeroWorkersAndMoreThanTheLimit) {
  for (int64_t workers : {int64_t{0}, max_worker_threads() + 1}) {
    try {
      measure_cpu_cluster(workers, quick_probe());
      FAIL() << "no error for " << workers;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--concurrent");
    }
  }
}

}  // namespace
}  // namespace trainsim
