// libFuzzer target: the knob parsers (common/config.h) and NCCL_DEBUG / NCCL_DEBUG_SUBSYS
// (common/log.h) on arbitrary text. The input is split at NUL bytes into values; each value goes
// to every single-value parser, and the values in turn fill the environment parseConfig reads.
// Besides the sanitizers' findings, checks what the parsers promise: a value they accept is
// within its type, and parseConfig never throws. Built and run by tests/reliability/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"

namespace {

void discard(const char*) {}

[[noreturn]] void broken(const char* what) {
  fprintf(stderr, "fuzz_knobs: %s\n", what);
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    nccl_lamport::setLogSinkForTest(&discard);  // the WARNs of bad values, thousands of them
    return true;
  }();
  (void)quiet;
  std::vector<std::string> values(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      values.emplace_back();
    } else {
      values.back().push_back(static_cast<char>(data[i]));
    }
  }
  for (const std::string& v : values) {
    size_t bytes = 0;
    uint64_t number = 0;
    bool flag = false;
    nccl_lamport::parseByteSize(v.c_str(), &bytes);
    nccl_lamport::parseUnsigned(v.c_str(), &number);
    if (nccl_lamport::parseBool(v.c_str(), &flag) && flag != true && flag != false) broken("parseBool: not a bool");
    nccl_lamport::parseLogSettings(v.c_str(), values.size() > 1 ? values[1].c_str() : nullptr);
  }
  const auto& knobs = nccl_lamport::knobTable();
  try {
    const nccl_lamport::Config config = nccl_lamport::parseConfig([&](const char* name) -> const char* {
      for (size_t k = 0; k < knobs.size(); ++k) {
        if (std::string(knobs[k].variable) == name) return k < values.size() ? values[k].c_str() : nullptr;
      }
      return nullptr;
    });
    (void)config;
  } catch (...) {
    broken("parseConfig threw");
  }
  return 0;
}
