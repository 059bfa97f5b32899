// copyIfReadable (common/readable_memory.h): copies mapped memory, and answers false, without a
// fault, for memory that is not mapped; both through process_vm_readv and through its pipe
// fallback, also for copies larger than a pipe holds.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "common/readable_memory.h"

namespace nccl_lamport {
namespace {

/** The parameter: true for the pipe fallback alone, false for copyIfReadable as used. */
class ReadableMemory : public ::testing::TestWithParam<bool> {
 protected:
  static bool copy(const void* from, void* to, size_t bytes) {
    return GetParam() ? copyIfReadableThroughPipe(from, to, bytes) : copyIfReadable(from, to, bytes);
  }
};

TEST_P(ReadableMemory, CopiesMappedMemoryOfAnySize) {
  for (size_t bytes : {size_t{1}, size_t{8}, size_t{4096}, size_t{64 * 1024 + 3}, size_t{1200000}}) {
    std::vector<uint8_t> from(bytes);
    std::iota(from.begin(), from.end(), uint8_t{7});
    std::vector<uint8_t> to(bytes, 0);
    ASSERT_TRUE(copy(from.data(), to.data(), bytes)) << bytes;
    EXPECT_EQ(from, to) << bytes;
  }
  EXPECT_TRUE(copy(nullptr, nullptr, 0));
}

TEST_P(ReadableMemory, AnUnmappedSourceIsFalseNotAFault) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* at = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(at, MAP_FAILED);
  char* base = static_cast<char*>(at);
  ASSERT_EQ(munmap(base + page, page), 0);  // the second page is gone
  uint64_t word = 0;
  EXPECT_FALSE(copy(base + page, &word, sizeof(word)));
  std::vector<char> across(page);
  EXPECT_FALSE(copy(base + page / 2, across.data(), across.size())) << "a copy that runs into it";
  EXPECT_TRUE(copy(base, &word, sizeof(word))) << "the first page is still mapped";
  EXPECT_FALSE(copy(reinterpret_cast<const void*>(uintptr_t{8}), &word, sizeof(word)));
  munmap(base, page);
}

INSTANTIATE_TEST_SUITE_P(Both, ReadableMemory, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& info) {
  return std::string(info.param ? "Pipe" : "Default");
});

}  // namespace
}  // namespace nccl_lamport
