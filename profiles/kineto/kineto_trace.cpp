// Streams a Kineto trace through nlohmann's SAX parser (kineto_trace.hpp):
// each element of traceEvents is built as a small JSON value, turned into a
// KinetoEvent and dropped; the other top-level fields (deviceProperties,
// distributedInfo, ...) are kept whole, being small.
#include "profiles/kineto/kineto_trace.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <streambuf>
#include <unordered_map>

#include "model/error.hpp"

namespace trainsim {
namespace {

// A file read through zlib's gz* calls, which pass plain files through.
class GzBuffer : public std::streambuf {
 public:
  explicit GzBuffer(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {}
  ~GzBuffer() override {
    if (file_ != nullptr) gzclose(file_);
  }
  GzBuffer(const GzBuffer&) = delete;
  GzBuffer& operator=(const GzBuffer&) = delete;
  bool open() const { return file_ != nullptr; }
  // What went wrong, or "" (a stream that ends inside gzip data is truncated).
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n <= 0) {
      int code = Z_OK;
      const char* message = gzerror(file_, &code);
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
        error_ = code == Z_BUF_ERROR ? "ends inside its gzip data (truncated)"
                                     : "is not readable gzip data: " + std::string(message != nullptr ? message : "");
      }
      return traits_type::eof();
    }
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  std::array<char, 1 << 16> buffer_{};
  std::string error_;
};

int element_bytes(const std::string& type) {
  static const std::unordered_map<std::string, int> sizes = {{"float", 4},
                                                             {"double", 8},
                                                             {"c10::Half", 2},
                                                             {"c10::BFloat16", 2},
                                                             {"long int", 8},
                                                             {"long", 8},
                                                             {"int", 4},
                                                             {"short int", 2},
                                                             {"signed char", 1},
                                                             {"unsigned char", 1},
                                                             {"bool", 1},
                                                             {"c10::complex<float>", 8},
                                                             {"c10::Float8_e4m3fn", 1},
                                                             {"c10::Float8_e5m2", 1}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

bool category_of(const std::string& cat, KinetoCat& out, bool& legacy) {
  static const std::unordered_map<std::string, std::pair<KinetoCat, bool>> cats = {
      {"cpu_op", {KinetoCat::kCpuOp, false}},
      {"user_annotation", {KinetoCat::kAnnotation, false}},
      {"gpu_user_annotation", {KinetoCat::kGpuAnnotation, false}},
      {"python_function", {KinetoCat::kPython, false}},
      {"cuda_runtime", {KinetoCat::kRuntime, false}},
      {"cuda_driver", {KinetoCat::kRuntime, false}},
      {"kernel", {KinetoCat::kKernel, false}},
      {"gpu_memcpy", {KinetoCat::kMemcpy, false}},
      {"gpu_memset", {KinetoCat::kMemset, false}},
      {"Operator", {KinetoCat::kCpuOp, true}},
      {"Runtime", {KinetoCat::kRuntime, true}},
      {"Kernel", {KinetoCat::kKernel, true}},
      {"Memcpy", {KinetoCat::kMemcpy, true}},
      {"Memset", {KinetoCat::kMemset, true}}};
  const auto it = cats.find(cat);
  if (it == cats.end()) return false;
  out = it->second.first;
  legacy = legacy || it->second.second;
  return true;
}

// Builds traceEvents' elements and the top-level fields; hands each event
// to the trace.
class Reader : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Reader(KinetoTrace& trace) : trace_(trace) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { return value(nullptr); }
  bool key(string_t& k) override {
    if (stack_.empty() && depth_ == 1) {
      top_key_ = k;
      in_events_ = false;
    }
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return open(nlohmann::json::object()); }
  bool start_array(std::size_t) override {
    if (stack_.empty() && ((depth_ == 0) || (depth_ == 1 && top_key_ == "traceEvents"))) {
      in_events_ = true;  // the events' array (or a trace that is a bare list)
      found_events_ = true;
      ++depth_;
      return true;
    }
    return open(nlohmann::json::array());
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_position_ = position;
    error_ = e.what();
    return false;
  }

  bool found_events() const { return found_events_; }
  const nlohmann::json& header() const { return header_; }
  const std::string& error() const { return error_; }
  std::size_t error_position() const { return error_position_; }

 private:
  bool open(nlohmann::json v) {
    if (stack_.empty() && depth_ == 0) {  // the top-level object
      ++depth_;
      return true;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
      stack_.push_back(&root_);
      return true;
    }
    nlohmann::json& parent = *stack_.back();
    nlohmann::json& child = parent.is_array() ? parent.emplace_back(std::move(v)) : (parent[key_] = std::move(v));
    stack_.push_back(&child);
    return true;
  }
  bool close() {
    if (stack_.empty()) {  // the events' array or the top-level object ends
      --depth_;
      in_events_ = false;
      return true;
    }
    stack_.pop_back();
    if (stack_.empty()) finish(std::move(root_));
    return true;
  }
  bool value(nlohmann::json v) {
    if (stack_.empty()) {
      if (depth_ == 1 && !in_events_) header_[top_key_] = std::move(v);
      return true;
    }
    nlohmann::json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.emplace_back(std::move(v));
    } else {
      parent[key_] = std::move(v);
    }
    return true;
  }
  void finish(nlohmann::json v) {
    if (in_events_) {
      add_event(v);
    } else if (depth_ == 1) {
      header_[top_key_] = std::move(v);
    }
  }
  void add_event(const nlohmann::json& e);
  uint32_t intern(std::vector<std::string>& table, std::unordered_map<std::string, uint32_t>& index,
                  const std::string& text) {
    const auto [it, added] = index.try_emplace(text, static_cast<uint32_t>(table.size()));
    if (added) table.push_back(text);
    return it->second;
  }

  KinetoTrace& trace_;
  nlohmann::json header_ = nlohmann::json::object();
  nlohmann::json root_;
  std::vector<nlohmann::json*> stack_;
  std::string key_, top_key_;
  int depth_ = 0;
  bool in_events_ = false, found_events_ = false;
  std::unordered_map<std::string, uint32_t> name_index_, thread_index_;
  std::string error_;
  std::size_t error_position_ = 0;
};

int64_t id_field(const nlohmann::json& args, const char* key, const char* legacy_key) {
  for (const char* k : {key, legacy_key}) {
    const auto it = args.find(k);
    if (it != args.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return kNoId;
}

std::string id_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A field's text, "" where it is missing or not a string (a trace's fields
// are read as they come: nothing here may throw on a field's type).
std::string text_of(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}
double number_of(const nlohmann::json& object, const char* key, double fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

void Reader::add_event(const nlohmann::json& e) {
  if (!e.is_object() || text_of(e, "ph") != "X") {
    ++trace_.skipped_events;
    return;
  }
  KinetoEvent out;
  if (!category_of(text_of(e, "cat"), out.cat, trace_.legacy)) {
    ++trace_.skipped_events;
    return;
  }
  const auto ts = e.find("ts");
  const auto dur = e.find("dur");
  if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number()) {
    throw InputError(trace_.path,
                     "a " + text_of(e, "cat") + " span '" + text_of(e, "name") + "' without a numeric ts and dur",
                     "Chrome trace spans: \"ph\": \"X\" with ts and dur in microseconds");
  }
  out.ts_us = ts->get<double>();
  out.dur_us = dur->get<double>();
  if (out.dur_us < 0) {
    throw InputError(trace_.path, "a " + text_of(e, "cat") + " span '" + text_of(e, "name") + "' of negative dur",
                     "spans of 0 µs or more");
  }
  out.name = intern(trace_.names, name_index_, text_of(e, "name"));
  out.thread = intern(trace_.threads, thread_index_,
                      id_text(e.contains("pid") ? e["pid"] : nlohmann::json(0)) + "/" +
                          id_text(e.contains("tid") ? e["tid"] : nlohmann::json(0)));
  const nlohmann::json& args = e.contains("args") && e["args"].is_object() ? e["args"] : nlohmann::json::object();
  out.external_id = id_field(args, "External id", "external id");
  out.correlation = id_field(args, "correlation", "correlation");
  out.sequence = id_field(args, "Sequence number", "Sequence number");
  out.backward = id_field(args, "Fwd thread id", "Fwd thread id") > 0;
  out.device = id_field(args, "device", "device");
  if (const auto n = args.find("In msg nelems"); n != args.end() && n->is_number()) {
    out.message_elements = std::max(0.0, n->get<double>());
    out.message_element_bytes = element_bytes(text_of(args, "dtype"));
    if (out.message_element_bytes == 0) {  // NCCL's names: Float, Half, BFloat16, ...
      static const std::unordered_map<std::string, int> nccl = {{"Float", 4},  {"Half", 2}, {"BFloat16", 2},
                                                                {"Double", 8}, {"Int", 4},  {"Long", 8}};
      const auto it = nccl.find(text_of(args, "dtype"));
      out.message_element_bytes = it == nccl.end() ? 0 : it->second;
    }
  }
  const auto dims = args.find("Input Dims");
  if (out.cat == KinetoCat::kCpuOp && dims != args.end() && dims->is_array()) {
    const auto types = args.find("Input type");
    std::vector<KinetoInput> inputs;
    for (size_t i = 0; i < dims->size(); ++i) {
      KinetoInput in;
      if ((*dims)[i].is_array()) {
        for (const nlohmann::json& d : (*dims)[i]) {
          if (d.is_number_integer()) in.dims.push_back(d.get<int64_t>());
        }
      }
      if (types != args.end() && types->is_array() && i < types->size() && (*types)[i].is_string()) {
        in.element_bytes = element_bytes((*types)[i].get<std::string>());
      }
      inputs.push_back(std::move(in));
    }
    out.inputs = static_cast<uint32_t>(trace_.inputs.size());
    trace_.inputs.push_back(std::move(inputs));
  }
  trace_.events.push_back(out);
}

}  // namespace

double KinetoInput::bytes() const {
  double elements = dims.empty() ? 0 : 1;
  for (const int64_t d : dims) elements *= static_cast<double>(d);
  return elements * element_bytes;
}

KinetoTrace read_kineto_trace(const std::string& path) {
  KinetoTrace trace;
  trace.path = path;
  GzBuffer buffer(path);
  if (!buffer.open()) throw InputError(path, "cannot be read", "a PyTorch profiler trace (.json or .json.gz)");
  std::istream in(&buffer);
  Reader reader(trace);
  const bool parsed = nlohmann::json::sax_parse(in, &reader);
  if (!buffer.error().empty()) throw InputError(path, buffer.error(), "a whole .json.gz trace");
  if (!parsed) {
    const std::string& what = reader.error();
    const bool ended = what.find("end of input") != std::string::npos;
    throw InputError(path,
                     ended ? "ends early, at byte " + std::to_string(reader.error_position()) + " (truncated?)"
                           : "is not JSON at byte " + std::to_string(reader.error_position()),
                     "a PyTorch profiler trace: Chrome-trace JSON");
  }
  if (!reader.found_events()) {
    throw InputError(path, "has no traceEvents", "a PyTorch profiler trace: {\"traceEvents\": [...], ...}");
  }
  if (trace.events.empty()) {
    throw InputError(path, "has no spans of PyTorch's profiler (cpu_op, kernel, cuda_runtime, ...)",
                     "a trace written by torch.profiler");
  }
  const nlohmann::json& header = reader.header();
  if (const auto devices = header.find("deviceProperties");
      devices != header.end() && devices->is_array() && !devices->empty() && (*devices)[0].is_object()) {
    trace.device_name = text_of((*devices)[0], "name");
    trace.device_memory_bytes = std::max(0.0, number_of((*devices)[0], "totalGlobalMem", 0.0));
  }
  if (const auto info = header.find("distributedInfo"); info != header.end() && info->is_object()) {
    const double world = number_of(*info, "world_size", 1);
    trace.world_size = world >= 1 && world <= 1 << 20 ? static_cast<int64_t>(world) : 1;
    const double rank = number_of(*info, "rank", 0);
    trace.rank = rank >= 0 && rank < static_cast<double>(trace.world_size) ? static_cast<int64_t>(rank) : 0;
    trace.backend = text_of(*info, "backend");
  }
  return trace;
}

}  // namespace trainsim
