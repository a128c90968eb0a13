// write_output_file: standard output, special files written through, and
// regular files replaced atomically; see output_file.hpp.
#include "model/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <random>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr int kMaxLinkHops = 40;         // the kernel's own limit before ELOOP
constexpr int kTemporaryAttempts = 100;  // fresh names tried before giving up
constexpr const char* kExpected = "a writable file path, or - for standard output";

std::string quoted(const std::string& path) { return "'" + path + "'"; }

[[noreturn]] void fail(const std::string& where, const std::string& what, int error) {
  throw InputError(where, what + ": " + std::strerror(error), kExpected);
}

// Closes the descriptor it holds when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now; the errno of a failed close (0 on success).
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Writes all of `text`; 0, or the errno of the write that failed.
int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
  return 0;
}

// The descriptor a /dev/stderr, /dev/fd/N or /proc/self/fd/N path names, or -1.
int descriptor_alias(const std::string& path) {
  if (path == "/dev/stderr") return 2;
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!path.starts_with(prefix)) continue;
    int fd = -1;
    const char* begin = path.data() + prefix.size();
    const char* end = path.data() + path.size();
    const auto [ptr, error] = std::from_chars(begin, end, fd);
    if (error == std::errc() && ptr == end && ptr != begin) return fd;
  }
  return -1;
}

// Writes into an existing special file (a device, a FIFO, an open descriptor).
void write_through(const std::string& path, std::string_view text, const std::string& where) {
  int alias = descriptor_alias(path);
  if (alias >= 0) {
    if (const int error = write_all(alias, text)) fail(where, quoted(path) + " cannot be written", error);
    return;
  }
  FileDescriptor file(::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
  if (file.get() < 0) fail(where, quoted(path) + " cannot be opened", errno);
  if (const int error = write_all(file.get(), text)) fail(where, quoted(path) + " cannot be written", error);
  if (const int error = file.close()) fail(where, quoted(path) + " cannot be written", error);
}

// Follows symbolic links from `path` to the path they end at (which may not
// exist yet: a dangling link's target is created).
std::string resolve_links(const std::string& path, const std::string& where) {
  std::filesystem::path at = path;
  for (int hop = 0; hop <= kMaxLinkHops; ++hop) {
    struct stat status {};
    if (::lstat(at.c_str(), &status) != 0) {
      if (errno == ENOENT) return at.string();
      fail(where, quoted(at.string()) + " cannot be examined", errno);
    }
    if (!S_ISLNK(status.st_mode)) return at.string();
    std::error_code error;
    const std::filesystem::path target = std::filesystem::read_symlink(at, error);
    if (error) fail(where, "the link " + quoted(at.string()) + " cannot be read", error.value());
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  fail(where, quoted(path) + " is a chain of too many links", ELOOP);
}

// A fresh file beside `path`, created exclusively (never an existing file or
// link): its name, and its descriptor in `fd`.
std::string create_temporary(const std::string& path, const std::string& where, int& fd) {
  static const char kLetters[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  for (int attempt = 0; attempt < kTemporaryAttempts; ++attempt) {
    std::string name = path + ".tmp.";
    for (int i = 0; i < 8; ++i) name += kLetters[random() % (sizeof kLetters - 1)];
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return name;
    if (errno != EEXIST) fail(where, "no temporary file can be created beside " + quoted(path), errno);
  }
  fail(where, "no fresh temporary file name beside " + quoted(path), EEXIST);
}

// Writes `text` to a temporary beside `path` and renames it over `path`;
// the temporary is removed if anything fails.
void replace_atomically(const std::string& path, std::string_view text, const struct stat* existing,
                        const std::string& where) {
  int fd = -1;
  const std::string temporary = create_temporary(path, where, fd);
  FileDescriptor file(fd);
  int error = write_all(file.get(), text);
  if (error == 0 && existing != nullptr) ::fchmod(file.get(), existing->st_mode & 07777);  // keep its permissions
  const int close_error = file.close();
  if (error == 0) error = close_error;
  if (error == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail(where, quoted(path) + " cannot be written", error);
  }
}

}  // namespace

void write_output_file(const std::string& path, std::string_view text, std::ostream& standard_output,
                       const std::string& where) {
  if (path.empty()) throw InputError(where, "is an empty path", kExpected);
  if (path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1") {
    standard_output << text;
    standard_output.flush();
    return;
  }
  standard_output.flush();  // earlier output first, should `path` be the same terminal or pipe
  if (descriptor_alias(path) >= 0) return write_through(path, text, where);

  struct stat status {};
  const bool exists = ::stat(path.c_str(), &status) == 0;  // follows links
  if (!exists && errno != ENOENT) fail(where, quoted(path) + " cannot be examined", errno);
  if (exists && S_ISDIR(status.st_mode)) throw InputError(where, quoted(path) + " is a directory", kExpected);
  if (exists && (S_ISCHR(status.st_mode) || S_ISFIFO(status.st_mode))) return write_through(path, text, where);
  if (exists && !S_ISREG(status.st_mode)) {
    throw InputError(where, quoted(path) + " is neither a regular file, a character device nor a pipe", kExpected);
  }
  const std::string target = resolve_links(path, where);
  replace_atomically(target, text, exists ? &status : nullptr, where);
}

}  // namespace trainsim
