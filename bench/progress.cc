#include "bench/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/byte_size.h"

namespace nccl_lamport::bench {

std::string formatProgress(int index, int total, size_t bytes, const std::string& phase) {
  return "nccl-lamport-bench: size " + std::to_string(index + 1) + "/" + std::to_string(total) + ": " +
         formatByteSize(bytes) + " bytes, " + phase;
}

bool progressWanted(bool quiet, int fd) { return !quiet && isatty(fd) == 1; }

void showProgress(const std::string& text) {
  std::fprintf(stderr, "\r%s\033[K", text.c_str());
  std::fflush(stderr);
}

void clearProgress() {
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

}  // namespace nccl_lamport::bench
