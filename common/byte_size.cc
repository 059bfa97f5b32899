#include "common/byte_size.h"

#include <cctype>
#include <cstdint>
#include <limits>

namespace nccl_lamport {

namespace {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

int unitShift(char letter) {
  switch (std::tolower(static_cast<unsigned char>(letter))) {
    case 'k': return 10;
    case 'm': return 20;
    case 'g': return 30;
    default: return -1;
  }
}

}  // namespace

bool parseByteSize(std::string_view text, size_t* out) {
  size_t pos = 0;
  uint64_t value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    const uint64_t digit = static_cast<uint64_t>(text[pos] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
    ++pos;
  }
  if (pos == 0) return false;  // no digits: "", "K", "-1", " 1"
  std::string_view rest = text.substr(pos);
  int shift = 0;
  if (!rest.empty() && unitShift(rest[0]) >= 0) {
    shift = unitShift(rest[0]);
    rest.remove_prefix(1);
    if (!rest.empty() && !equalsIgnoreCase(rest, "b") && !equalsIgnoreCase(rest, "ib")) return false;
  } else if (!rest.empty() && !equalsIgnoreCase(rest, "b")) {
    return false;
  }
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return false;
  value <<= shift;
  if (value > std::numeric_limits<size_t>::max()) return false;
  *out = static_cast<size_t>(value);
  return true;
}

bool parseByteSize(const char* text, size_t* out) {
  return text != nullptr && parseByteSize(std::string_view(text), out);
}

std::string formatByteSize(size_t bytes) {
  if (bytes != 0 && bytes % (size_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes != 0 && bytes % (size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes != 0 && bytes % (size_t{1} << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace nccl_lamport
