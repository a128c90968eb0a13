// The checkpoint file: "trainsim.checkpoint/1\n", the header's length and the
// header (JSON: identity, next_iteration, counts), the losses (doubles), each
// endpoint's weights, velocity, smoothed gradient and statistics (per group:
// layers, per layer tensors, per tensor rank, dims, floats; little-endian
// 64-bit counts), then the CRC-32 of all that (zlib's).
#include "exec/checkpoint.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr char kMagic[] = "trainsim.checkpoint/1\n";

class Writer {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void count(uint64_t v) { bytes(&v, sizeof v); }
  void weights(const Weights& w) {
    count(w.size());
    for (const LayerParams& layer : w) {
      count(layer.size());
      for (const Tensor& t : layer) {
        count(t.shape.size());
        for (int64_t d : t.shape) count(static_cast<uint64_t>(d));
        count(t.data.size());
        bytes(t.data.data(), t.data.size() * sizeof(float));
      }
    }
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& in, std::string path) : in_(in), path_(std::move(path)) {}
  void bytes(void* p, size_t n) {
    if (n > in_.size() - at_) fail("ends early (truncated)");
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  uint64_t count(uint64_t at_most) {
    uint64_t v = 0;
    bytes(&v, sizeof v);
    if (v > at_most) fail("holds a count of " + std::to_string(v) + " where at most " + std::to_string(at_most) + " fit");
    return v;
  }
  Weights weights() {
    Weights w(count(remaining()));
    for (LayerParams& layer : w) {
      layer.resize(count(remaining()));
      for (Tensor& t : layer) {
        t.shape.resize(count(8));
        uint64_t elements = 1;
        for (int64_t& d : t.shape) {
          d = static_cast<int64_t>(count(remaining()));
          elements *= static_cast<uint64_t>(d);
        }
        const uint64_t n = count(remaining() / sizeof(float));
        if (n != elements) fail("holds a tensor whose values do not fill its shape");
        t.data.resize(n);
        bytes(t.data.data(), n * sizeof(float));
      }
    }
    return w;
  }
  size_t remaining() const { return in_.size() - at_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("--resume", path_ + " " + what, "a whole checkpoint written by trainsim run --checkpoint");
  }

 private:
  const std::string& in_;
  std::string path_;
  size_t at_ = 0;
};

uint32_t crc_of(const std::string& s, size_t n) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(n)));
}

}  // namespace

std::string checkpoint_path(const std::string& dir) { return (std::filesystem::path(dir) / "checkpoint").string(); }

void write_checkpoint(const std::string& dir, const Checkpoint& c) {
  Writer w;
  w.bytes(kMagic, sizeof kMagic - 1);
  const std::string header = nlohmann::json{{"identity", c.identity},
                                            {"next_iteration", c.next_iteration},
                                            {"losses", c.losses.size()},
                                            {"endpoints", c.state.endpoints.size()}}
                                 .dump();
  w.count(header.size());
  w.bytes(header.data(), header.size());
  w.bytes(c.losses.data(), c.losses.size() * sizeof(double));
  for (const EndpointState& e : c.state.endpoints) {
    w.weights(e.weights);
    w.weights(e.velocity);
    w.weights(e.smoothed);
    w.weights(e.statistics);
  }
  const uint32_t crc = crc_of(w.out(), w.out().size());
  w.bytes(&crc, sizeof crc);

  const auto fail = [&](const std::string& what) {
    throw InputError("--checkpoint", dir + ": " + what + ": " + std::strerror(errno), "a directory trainsim may write");
  };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = checkpoint_path(dir), temporary = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(temporary.c_str(), "wb"), &std::fclose);
  if (!f) fail("cannot create " + temporary);
  if (std::fwrite(w.out().data(), 1, w.out().size(), f.get()) != w.out().size() || std::fflush(f.get()) != 0 ||
      ::fsync(::fileno(f.get())) != 0) {
    fail("cannot write " + temporary);
  }
  if (std::fclose(f.release()) != 0) fail("cannot write " + temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename " + temporary);
}

Checkpoint read_checkpoint(const std::string& dir) {
  const std::string path = checkpoint_path(dir);
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("--resume", dir + " holds no checkpoint (" + path + ")", "a directory written by --checkpoint");
  const std::string in((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  Reader r(in, path);
  if (in.compare(0, sizeof kMagic - 1, kMagic) != 0) r.fail("is not a trainsim checkpoint");
  if (in.size() < sizeof kMagic - 1 + sizeof(uint32_t)) r.fail("ends early (truncated)");
  uint32_t stored = 0;
  std::memcpy(&stored, in.data() + in.size() - sizeof stored, sizeof stored);
  if (stored != crc_of(in, in.size() - sizeof stored)) r.fail("does not match its checksum (truncated or corrupted)");
  std::string magic(sizeof kMagic - 1, '\0');
  r.bytes(magic.data(), magic.size());
  std::string header(r.count(r.remaining()), '\0');
  r.bytes(header.data(), header.size());
  Checkpoint c;
  try {
    const nlohmann::json h = nlohmann::json::parse(header);
    c.identity = h.at("identity");
    c.next_iteration = h.at("next_iteration").get<int32_t>();
    c.losses.resize(h.at("losses").get<size_t>());
    c.state.endpoints.resize(h.at("endpoints").get<size_t>());
  } catch (const nlohmann::json::exception& e) {
    r.fail(std::string("has a header trainsim cannot read (") + e.what() + ")");
  }
  if (c.losses.size() * sizeof(double) > r.remaining()) r.fail("ends early (truncated)");
  r.bytes(c.losses.data(), c.losses.size() * sizeof(double));
  for (EndpointState& e : c.state.endpoints) {
    e.weights = r.weights();
    e.velocity = r.weights();
    e.smoothed = r.weights();
    e.statistics = r.weights();
  }
  if (r.remaining() != sizeof(uint32_t)) r.fail("holds more than its header says");
  return c;
}

void check_same_run(const Checkpoint& checkpoint, const nlohmann::json& identity) {
  for (const auto& [key, value] : identity.items()) {
    if (!checkpoint.identity.contains(key)) {
      throw InputError("--resume", "the checkpoint does not record its " + key, "a checkpoint of this run");
    }
    const nlohmann::json& theirs = checkpoint.identity.at(key);
    if (theirs != value) {
      throw InputError("--resume", "the checkpoint's " + key + " is " + theirs.dump() + ", this run's " + value.dump(),
                       "the run that wrote the checkpoint, with only --iterations (or --epochs) raised");
    }
  }
}

}  // namespace trainsim
