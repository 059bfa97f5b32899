#include "bench/bench_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace nccl_lamport::bench {

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

std::vector<SizeSpec> makeSizeList(size_t minBytes, size_t maxBytes, double factor,
                                   size_t elementSize, std::string* error) {
  std::vector<SizeSpec> sizes;
  auto fail = [&](const std::string& why) {
    if (error != nullptr) *error = why;
    sizes.clear();
    return sizes;
  };
  if (elementSize == 0) return fail("element size is 0");
  if (minBytes == 0) return fail("--min-bytes must be at least 1");
  if (maxBytes < minBytes) return fail("--max-bytes is smaller than --min-bytes");
  if (maxBytes < elementSize) return fail("--max-bytes is smaller than one element");
  if (!(factor > 1.0) || !std::isfinite(factor)) return fail("--step-factor must be greater than 1");
  // Walk in long double so factors like 1.5 do not drift; stop once past maxBytes.
  long double current = static_cast<long double>(minBytes);
  for (int step = 0; current <= static_cast<long double>(maxBytes); ++step) {
    if (step == 100000) return fail("--step-factor is too close to 1");
    const size_t raw = static_cast<size_t>(current);
    const size_t count = std::max<size_t>(1, raw / elementSize);
    const size_t bytes = count * elementSize;  // <= maxBytes: raw <= maxBytes, elementSize too
    if (sizes.empty() || sizes.back().bytes != bytes) {
      if (static_cast<int>(sizes.size()) == kMaxSizes) {
        return fail("more than " + std::to_string(kMaxSizes) +
                    " sizes; raise --step-factor or narrow the range");
      }
      sizes.push_back(SizeSpec{bytes, count});
    }
    current *= static_cast<long double>(factor);
  }
  if (error != nullptr) error->clear();
  return sizes;
}

size_t elementSize(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return 2;
    case DType::kFp16: return 2;
    case DType::kFp32: return 4;
  }
  return 0;
}

ncclDataType_t toNccl(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return ncclBfloat16;
    case DType::kFp16: return ncclFloat16;
    case DType::kFp32: return ncclFloat32;
  }
  return ncclFloat32;
}

ncclRedOp_t toNccl(ReduceOp op) { return op == ReduceOp::kAvg ? ncclAvg : ncclSum; }

const char* name(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
  }
  return "?";
}

const char* name(ReduceOp op) { return op == ReduceOp::kAvg ? "avg" : "sum"; }

const char* name(TimingMode mode) {
  switch (mode) {
    case TimingMode::kEager: return "eager";
    case TimingMode::kGraph: return "graph";
    case TimingMode::kBoth: return "both";
  }
  return "?";
}

bool parseDType(const std::string& text, DType* out) {
  const std::string t = lower(text);
  if (t == "bf16" || t == "bfloat16") {
    *out = DType::kBf16;
  } else if (t == "fp16" || t == "half" || t == "float16" || t == "f16") {
    *out = DType::kFp16;
  } else if (t == "fp32" || t == "float" || t == "float32" || t == "f32") {
    *out = DType::kFp32;
  } else {
    return false;
  }
  return true;
}

bool parseReduceOp(const std::string& text, ReduceOp* out) {
  const std::string t = lower(text);
  if (t == "sum") {
    *out = ReduceOp::kSum;
  } else if (t == "avg") {
    *out = ReduceOp::kAvg;
  } else {
    return false;
  }
  return true;
}

bool parseTimingMode(const std::string& text, TimingMode* out) {
  const std::string t = lower(text);
  if (t == "eager") {
    *out = TimingMode::kEager;
  } else if (t == "graph") {
    *out = TimingMode::kGraph;
  } else if (t == "both") {
    *out = TimingMode::kBoth;
  } else {
    return false;
  }
  return true;
}

std::string shellJoin(const std::vector<std::string>& argv) {
  std::string line;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) line += ' ';
    const std::string& arg = argv[i];
    const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,+@%").find(c) != std::string::npos;
    });
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

}  // namespace nccl_lamport::bench
