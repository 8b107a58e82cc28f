#include "checkpoint_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "attnlab/checksum.hpp"
#include "attnlab/train/job.hpp"

namespace attnlab::checkpoint_file {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Writes every byte or records the first error. It always tells LibTorch's writer that the bytes
// were taken: a short write there throws, and throws again from the writer's destructor, which
// aborts the process (a full disk killed the job with signal 6 and a backtrace).
class FileSink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  std::size_t operator()(const void* data, std::size_t size) {
    const char* bytes = static_cast<const char*>(data);
    sum_.add(bytes, size);
    for (std::size_t done = 0; done < size && error_ == 0;) {
      const ssize_t n = ::write(fd_, bytes + done, size - done);
      if (n < 0 && errno != EINTR) error_ = errno;
      if (n > 0) done += static_cast<std::size_t>(n);
    }
    return size;
  }
  int error() const { return error_; }
  std::string checksum() const { return checksum_text(sum_.value()); }

 private:
  int fd_;
  int error_ = 0;
  Checksum sum_;
};

void sync_folder_of(const std::string& path) {
  // the rename survives a power cut once the folder is synced (best effort: not every file
  // system allows it)
  const auto folder = std::filesystem::path(path).parent_path();
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

std::string write(torch::serialize::OutputArchive& archive, const std::string& path) {
  const std::string partial = path + ".partial." + std::to_string(::getpid());
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  auto fail = [&](int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(partial.c_str());
    throw CheckpointWriteError(path, error);
  };
  if (fd < 0) fail(errno);
  FileSink sink(fd);
  archive.save_to([&sink](const void* data, std::size_t size) { return sink(data, size); });
  if (sink.error() != 0) fail(sink.error());
  if (::fsync(fd) != 0) fail(errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail(errno);
  if (std::rename(partial.c_str(), path.c_str()) != 0) fail(errno);
  sync_folder_of(path);
  return sink.checksum();
}

void read(const std::string& path, const std::string& expected, c10::Device device,
          torch::serialize::InputArchive& archive) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + " is unreadable (" + std::strerror(errno) + ")");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(path + " is unreadable (a read failed)");
  if (!expected.empty()) {
    Checksum sum;
    sum.add(bytes.data(), bytes.size());
    if (const auto actual = checksum_text(sum.value()); actual != expected)
      throw std::runtime_error(path + " is damaged (checksum " + actual + ", recorded " + expected + ")");
  }
  try {
    archive.load_from(bytes.data(), bytes.size(), device);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + " is unreadable (truncated, or not a checkpoint): " + first_line(e.what()));
  }
}

}  // namespace attnlab::checkpoint_file
