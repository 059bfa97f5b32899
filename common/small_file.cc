#include "common/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace nccl_lamport {

bool readSmallRegularFile(const std::string& path, size_t maxBytes, std::string* text, std::string* error) {
  // system_category().message, not strerror: set-ups of several communicators may run at once.
  const auto unreadable = [] { return "cannot be read (" + std::system_category().message(errno) + ")"; };
  const std::string tooLarge = "is larger than " + std::to_string(maxBytes) + " bytes";
  text->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = unreadable();
    return false;
  }
  struct stat st {};
  bool ok = fstat(fd, &st) == 0;
  if (!ok) {
    *error = unreadable();
  } else if (!S_ISREG(st.st_mode)) {
    *error = "is not a regular file";
    ok = false;
  } else if (static_cast<unsigned long long>(st.st_size) > maxBytes) {
    *error = tooLarge;
    ok = false;
  }
  char buffer[4096];
  while (ok) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = unreadable();
      ok = false;
    } else if (n == 0) {
      break;
    } else if (text->size() + static_cast<size_t>(n) > maxBytes) {  // it grew after fstat
      *error = tooLarge;
      ok = false;
    } else {
      text->append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (!ok) text->clear();
  return ok;
}

bool pathIsNotARegularFile(const std::string& name) {
  struct stat st {};
  return name.find('/') != std::string::npos && stat(name.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

}  // namespace nccl_lamport
