// write_output_file: what happens to PATH for each kind of file it may be,
// and that no temporary is ever left behind or written through.
#include "model/output_file.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;

class Folder {
 public:
  Folder() : path_(fs::temp_directory_path() / ("trainsim_output_file_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Folder() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Every name in the folder, sorted: what a write left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(path_)) found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  }

 private:
  fs::path path_;
};

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::string& path, const std::string& text) {
  std::ostringstream standard_output;
  write_output_file(path, text, standard_output, "--json");
}

TEST(OutputFile, ANewFileGetsTheWholeTextAndNoTemporaryStays) {
  const Folder folder;
  write(folder.file("out.json"), "{}\n");
  EXPECT_EQ(contents(folder.file("out.json")), "{}\n");
  write(folder.file("out.json"), "[1]\n");  // replaced
  EXPECT_EQ(contents(folder.file("out.json")), "[1]\n");
  EXPECT_EQ(folder.names(), std::vector<std::string>{"out.json"});
}

TEST(OutputFile, DashAndDevStdoutGoToStandardOutput) {
  for (const std::string path : {"-", "/dev/stdout"}) {
    std::ostringstream standard_output;
    write_output_file(path, "text\n", standard_output, "--json");
    EXPECT_EQ(standard_output.str(), "text\n") << path;
  }
}

TEST(OutputFile, DevNullStaysACharacterDevice) {
  write("/dev/null", "{\"a\": 1}\n");
  struct stat status {};
  ASSERT_EQ(::lstat("/dev/null", &status), 0);
  EXPECT_TRUE(S_ISCHR(status.st_mode));
}

TEST(OutputFile, ASymlinkStaysALinkAndItsTargetGetsTheText) {
  const Folder folder;
  std::ofstream(folder.file("target.json")) << "old";
  fs::create_symlink("target.json", folder.file("link.json"));
  write(folder.file("link.json"), "new\n");
  EXPECT_TRUE(fs::is_symlink(folder.file("link.json")));
  EXPECT_EQ(contents(folder.file("target.json")), "new\n");
  EXPECT_EQ(folder.names(), (std::vector<std::string>{"link.json", "target.json"}));
}

TEST(OutputFile, ADanglingSymlinkGetsItsTargetCreated) {
  const Folder folder;
  fs::create_symlink(folder.file("made.json"), folder.file("link.json"));
  write(folder.file("link.json"), "made\n");
  EXPECT_TRUE(fs::is_symlink(folder.file("link.json")));
  EXPECT_EQ(contents(folder.file("made.json")), "made\n");
}

TEST(OutputFile, AnExistingTmpSymlinkIsNotWrittenThrough) {
  const Folder folder;
  std::ofstream(folder.file("victim")) << "keep";
  fs::create_symlink(folder.file("victim"), folder.file("out.json.tmp"));
  write(folder.file("out.json"), "result\n");
  EXPECT_EQ(contents(folder.file("victim")), "keep");
  EXPECT_TRUE(fs::is_symlink(folder.file("out.json.tmp")));
  EXPECT_EQ(contents(folder.file("out.json")), "result\n");
}

TEST(OutputFile, AFifoIsWrittenIntoAndStaysAFifo) {
  const Folder folder;
  const std::string fifo = folder.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = contents(fifo); });
  write(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(received, "through the pipe\n");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(OutputFile, ADirectoryIsRefusedAndLeftEmpty) {
  const Folder folder;
  fs::create_directory(folder.file("dir"));
  try {
    write(folder.file("dir"), "x");
    ADD_FAILURE() << "a directory was written";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--json");
    EXPECT_NE(e.problem().find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(folder.file("dir")));
  EXPECT_EQ(folder.names(), std::vector<std::string>{"dir"});
}

TEST(OutputFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const Folder folder;
  std::ofstream(folder.file("out.json")) << "old";
  // Files may grow to 1 kB only: writing 1 MB fails with EFBIG (SIGXFSZ ignored).
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool refused = false;
  try {
    write(folder.file("out.json"), std::string(1 << 20, 'x'));
  } catch (const InputError& e) {
    refused = true;
    EXPECT_NE(e.problem().find("cannot be written"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(refused);
  EXPECT_EQ(contents(folder.file("out.json")), "old");
  EXPECT_EQ(folder.names(), std::vector<std::string>{"out.json"});
}

TEST(OutputFile, AReplacedFileKeepsItsPermissions) {
  const Folder folder;
  std::ofstream(folder.file("out.json")) << "old";
  fs::permissions(folder.file("out.json"), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write(folder.file("out.json"), "new");
  EXPECT_EQ(fs::status(folder.file("out.json")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(OutputFile, AnEmptyPathIsAnInputError) { EXPECT_THROW(write("", "x"), InputError); }

}  // namespace
}  // namespace trainsim
