#include "bench/result_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace nccl_lamport::bench {

namespace {

bool fail(const std::string& path, const char* what, const char* why) {
  std::fprintf(stderr, "nccl-lamport-bench: could not write the %s file %s%s%s\n", what, path.c_str(),
               why != nullptr ? ": " : "", why != nullptr ? why : "");
  return false;
}

bool writeInPlace(const std::string& path, const std::string& content, const char* what) {
  std::ofstream out(path);
  out << content;
  out.close();
  return out ? true : fail(path, what, nullptr);
}

bool writeAll(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool writeResultFile(const std::string& path, const std::string& content, const char* what) {
  struct stat existing {};
  const bool exists = lstat(path.c_str(), &existing) == 0;
  if (exists && !S_ISREG(existing.st_mode)) return writeInPlace(path, content, what);
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
