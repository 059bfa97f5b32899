#include "bench/result_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nccl_lamport::bench {

namespace {

bool fail(const std::string& path, const char* what, const char* why) {
  std::fprintf(stderr, "nccl-lamport-bench: could not write the %s file %s%s%s\n", what, path.c_str(),
               why != nullptr ? ": " : "", why != nullptr ? why : "");
  return false;
}

bool writeAll(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool writeInPlace(const std::string& path, const std::string& content, const char* what) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return fail(path, what, std::strerror(errno));
  const bool written = writeAll(fd, content);
  const int saved = errno;
  const bool closed = close(fd) == 0;
  if (!written || !closed) return fail(path, what, std::strerror(written ? errno : saved));
  return true;
}

/** The folder part of path ("." for a bare name, "/" for a name under the root). */
std::string folderOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string nameOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string resultPathProblem(const std::string& path) {
  if (path.empty()) return "an empty path";
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "is a folder";
    if (access(path.c_str(), W_OK) != 0) return std::strerror(errno);
    return "";
  }
  const std::string folder = folderOf(path);
  if (stat(folder.c_str(), &st) != 0) return "folder " + folder + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return folder + " is not a folder";
  if (access(folder.c_str(), W_OK | X_OK) != 0) return "folder " + folder + ": " + std::strerror(errno);
  return "";
}

bool sameResultPath(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (nameOf(a) != nameOf(b)) return false;
  char folderA[PATH_MAX];
  char folderB[PATH_MAX];
  if (realpath(folderOf(a).c_str(), folderA) == nullptr || realpath(folderOf(b).c_str(), folderB) == nullptr) {
    return false;
  }
  return std::strcmp(folderA, folderB) == 0;
}

bool writeResultFile(const std::string& path, const std::string& content, const char* what) {
  struct stat existing {};
  const bool exists = lstat(path.c_str(), &existing) == 0;
  if (exists && !S_ISREG(existing.st_mode)) return writeInPlace(path, content, what);
  // A file this user may not write is not replaced through the folder either (as `>` would not).
  if (exists && access(path.c_str(), W_OK) != 0) return fail(path, what, std::strerror(errno));
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  // No temporary file beside it (a folder we may not create in, though the file itself is
  // writable): write in place as before.
  if (fd < 0) return writeInPlace(path, content, what);
  // mkstemp makes 0600; a result file (a tuning file read by every job's ranks) gets what a plain
  // create would give, or the older file's mode.
  mode_t mode = 0;
  if (exists) {
    mode = existing.st_mode & 07777;
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  bool ok = fchmod(fd, mode) == 0 && writeAll(fd, content) && fsync(fd) == 0;
  const int saved = errno;
  ok = (close(fd) == 0) && ok;
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) return true;
  const char* why = std::strerror(ok ? errno : saved);
  unlink(tmp.c_str());
  return fail(path, what, why);
}

std::string resultJsonText(const nlohmann::json& doc) {
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace nccl_lamport::bench
