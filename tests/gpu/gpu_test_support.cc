#include "tests/gpu/gpu_test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "tests/gpu/shared_gpu.h"

namespace nccl_lamport {
namespace gputest {

void setTestEnvironment() {
  setenv("NCCL_LAMPORT_ONESHOT_MAX_BYTES", "256K", 1);
  setenv("NCCL_LAMPORT_TIMEOUT_MS", "60000", 1);
  setenv("NCCL_NVLS_ENABLE", "0", 0);
}

namespace {

struct DtypeTraits {
  size_t size;
  int mantissaBits, minExponent;
  uint32_t nan, inf, sign;
};

const DtypeTraits* traits(ncclDataType_t dtype) {
  static const DtypeTraits fp32{4, 23, -126, 0x7fc00000u, 0x7f800000u, 0x80000000u};
  static const DtypeTraits fp16{2, 10, -14, 0x7e00u, 0x7c00u, 0x8000u};
  static const DtypeTraits bf16{2, 7, -126, 0x7fc0u, 0x7f80u, 0x8000u};
  switch (dtype) {
    case ncclFloat32: return &fp32;
    case ncclFloat16: return &fp16;
    case ncclBfloat16: return &bf16;
    default: return nullptr;
  }
}

void storeBits(ncclDataType_t dtype, uint8_t* out, size_t i, uint32_t bits) {
  if (elementSize(dtype) == 4) {
    memcpy(out + 4 * i, &bits, 4);
  } else {
    const uint16_t half = static_cast<uint16_t>(bits);
    memcpy(out + 2 * i, &half, 2);
  }
}

uint32_t bitsOf(ncclDataType_t dtype, double value) {
  const float f = static_cast<float>(value);
  uint32_t bits = 0;
  if (dtype == ncclFloat32) memcpy(&bits, &f, 4);
  if (dtype == ncclFloat16) bits = floatToHalfBits(f);
  if (dtype == ncclBfloat16) bits = floatToBf16Bits(f);
  return bits;
}

bool allOnes(const uint8_t* data, size_t i, size_t elem) {
  for (size_t b = 0; b < elem; ++b) {
    if (data[i * elem + b] != 0xFF) return false;
  }
  return true;
}

}  // namespace

std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// ---------------------------------------------------------------- datatypes and host values

size_t elementSize(ncclDataType_t dtype) { return traits(dtype) ? traits(dtype)->size : 0; }

const char* dtypeName(ncclDataType_t dtype) {
  return dtype == ncclFloat32 ? "fp32" : dtype == ncclFloat16 ? "fp16" : dtype == ncclBfloat16 ? "bf16" : "other";
}

const char* opName(ncclRedOp_t op) { return op == ncclSum ? "sum" : op == ncclAvg ? "avg" : "other"; }

uint16_t floatToHalfBits(float value) {
  uint32_t x;
  memcpy(&x, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  const int exponent = static_cast<int>(a >> 23) - 127;
  const uint32_t full = (a & 0x7fffffu) | 0x800000u;
  if (exponent >= -14) {
    uint32_t h = (static_cast<uint32_t>(exponent + 15) << 10) | ((a & 0x7fffffu) >> 13);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  if (exponent < -25) return sign;
  const int shift = -(exponent + 1);  // value = full * 2^(exponent - 23) = k * 2^-24
  uint32_t k = full >> shift;
  const uint32_t rest = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (k & 1u))) ++k;
  return sign | static_cast<uint16_t>(k);
}

float halfBitsToFloat(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa ? NAN : INFINITY;
  } else {
    v = std::ldexp(mantissa | 0x400, exponent - 25);
  }
  return static_cast<float>((bits & 0x8000) ? -v : v);
}

uint16_t floatToBf16Bits(float value) {
  uint32_t x;
  memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16BitsToFloat(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

double loadValue(ncclDataType_t dtype, const uint8_t* data, size_t i) {
  if (dtype == ncclFloat32) {
    float f;
    memcpy(&f, data + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, data + 2 * i, 2);
  return dtype == ncclFloat16 ? halfBitsToFloat(h) : bf16BitsToFloat(h);
}

double roundToDtype(ncclDataType_t dtype, double value) {
  uint8_t buf[4];
  storeBits(dtype, buf, 0, bitsOf(dtype, value));
  return loadValue(dtype, buf, 0);
}

double ulpOf(ncclDataType_t dtype, double m) {
  const DtypeTraits* t = traits(dtype);
  const int e = (m > 0 && std::isfinite(m)) ? std::max(std::ilogb(m), t->minExponent) : t->minExponent;
  return std::ldexp(1.0, e - t->mantissaBits);
}

double minNormalOf(ncclDataType_t dtype) { return std::ldexp(1.0, traits(dtype)->minExponent); }

uint64_t fnv1a64(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001b3ull;
  return h;
}

uint64_t mixSeed(uint64_t a, uint64_t b) {
  Rng rng{a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull)};
  rng.next();
  return rng.next();
}

// ---------------------------------------------------------------- failures

void Failures::add(const char* fmt, ...) {
  char buf[1536];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(mutex_);
  ++count_;
  if (shown_ < 30) {
    ++shown_;
    text_ += buf;
    text_ += '\n';
  }
  mirrorLocked();
}

std::string Failures::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_ > shown_ ? text_ + format("... and %d more failures\n", count_ - shown_) : text_;
}

void Failures::mirrorTo(char* buf, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  mirror_ = buf;
  mirrorBytes_ = bytes;
  mirrorLocked();
}

void Failures::mirrorLocked() {
  if (mirror_ == nullptr || mirrorBytes_ == 0) return;
  std::string all = count_ > shown_ ? text_ + format("... and %d more failures\n", count_ - shown_) : text_;
  snprintf(mirror_, mirrorBytes_, "%s", all.c_str());
}

// ---------------------------------------------------------------- cross-rank comparison

std::string firstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return format("sizes differ (%zu vs %zu bytes)", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return format("first differing byte %zu: 0x%02x vs 0x%02x", i, a[i], b[i]);
  }
  return "";
}

// ---------------------------------------------------------------- harness

void Harness::begin() {
  active = ncclLamportIsActive() != 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    RankSlot& s = slots[i];
    s.index = static_cast<int>(i);
    s.expectLamport = s.expectNccl = 0;
    if (ncclLamportGetCommInfo(s.comm, &s.base) != ncclSuccess) fail(s, "ncclLamportGetCommInfo failed");
  }
}

std::string Harness::requireEligible() {
  if (!active) {
    failures->add(tunerActivation() ? "ncclLamportIsActive() is 0: NCCL_TUNER_PLUGIN did not hook NCCL's entry points "
                                      "in this process (its INFO lines say why)"
                                    : "ncclLamportIsActive() is 0: the interposer is not active in this process");
    return "";
  }
  std::string reason;
  for (RankSlot& s : slots) {
    if (!s.base.known) fail(s, "communicator unknown to nccl-lamport (ncclLamportCommInfo.known == 0)");
    if (!s.base.eligible && reason.empty()) reason = s.base.reason[0] ? s.base.reason : "(no reason given)";
  }
  if (reason.empty()) return "";
  if (sharedGpuMode()) {  // the mode exists to run these paths: ineligible is never right there
    failures->add("communicator not eligible in shared-GPU mode (NCCL_LAMPORT_TEST_SHARED_GPU=1): %s", reason.c_str());
    return "";
  }
  const int n = slots.empty() ? 0 : slots[0].nRanks;
  const char* requireNvlink = getenv("NCCL_LAMPORT_REQUIRE_NVLINK");
  const bool anyLink = requireNvlink != nullptr && strcmp(requireNvlink, "0") == 0;
  bool linked = true;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      int access = 0, atomics = 0;
      if (a == b) continue;
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, a, b);
      cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b);
      linked = linked && access == 1 && (atomics == 1 || anyLink);
    }
  }
  if (!linked) {
    return "communicator not eligible (" + reason + ") and GPUs 0.." + std::to_string(n - 1) +
           " lack NVLink P2P between some pair, so that is right; nothing to test here";
  }
  failures->add("communicator not eligible although every GPU pair has NVLink P2P: %s", reason.c_str());
  return "";
}

ncclLamportPath_t Harness::expectedPath(const RankSlot& slot, size_t count, ncclDataType_t dtype,
                                        ncclRedOp_t op) const {
  const size_t elem = elementSize(dtype);
  if (!active || !slot.base.eligible || slot.nRanks < 2 || elem == 0 || count == 0) return ncclLamportPathNccl;
  if (op != ncclSum && op != ncclAvg) return ncclLamportPathNccl;
  return count <= slot.base.oneShotMaxBytes / elem ? ncclLamportPathOneShot : ncclLamportPathNccl;
}

ncclResult_t Harness::allReduce(RankSlot& slot, const void* send, void* recv, size_t count,
                                ncclDataType_t dtype, ncclRedOp_t op) {
  const ncclLamportPath_t expected = expectedPath(slot, count, dtype, op);
  ncclLamportPath_t path = ncclLamportPathNccl;
  const ncclResult_t q = ncclLamportGetAllReducePath(slot.comm, count, dtype, op, &path);
  if (q != ncclSuccess || path != expected) {
    fail(slot, format("ncclLamportGetAllReducePath(n=%zu, %s, %s) gave rc %d path %d, expected path %d",
                      count, dtypeName(dtype), opName(op), q, path, expected));
  }
  ++(expected == ncclLamportPathOneShot ? slot.expectLamport : slot.expectNccl);
  return ncclAllReduce(send, recv, count, dtype, op, slot.comm, slot.stream);
}

bool Harness::step(bool reference, const std::function<ncclResult_t(RankSlot&)>& fn, const char* what) {
  bool ok = true;
  const bool grouped = grouping == Grouping::kGrouped;
  if (grouped) {
    const ncclResult_t rc = reference ? pncclGroupStart() : ncclGroupStart();
    if (rc != ncclSuccess) failures->add("%s: GroupStart returned %d", what, rc);
  }
  int current = -1;
  for (RankSlot& s : slots) {
    if (wrongCurrentDevice && slots.size() > 1) {
      current = slots[(s.index + 1) % slots.size()].device;
      cudaSetDevice(current);
    }
    const ncclResult_t rc = fn(s);
    if (rc != ncclSuccess) {
      fail(s, format("%s: %s returned %d (%s)", what, reference ? "NCCL's own allreduce (reference)" : "ncclAllReduce",
                     rc, ncclGetErrorString(rc)));
      ok = false;
    }
    int now = current;
    if (!reference && current >= 0 && cudaGetDevice(&now) == cudaSuccess && now != current) {
      fail(s, format("%s: the call changed the current device from %d to %d", what, current, now));
    }
  }
  if (grouped) {
    const ncclResult_t rc = reference ? pncclGroupEnd() : ncclGroupEnd();
    if (rc != ncclSuccess) {
      failures->add("%s: GroupEnd returned %d (%s)", what, rc, ncclGetErrorString(rc));
      ok = false;
    }
    int now = current;
    if (!reference && current >= 0 && cudaGetDevice(&now) == cudaSuccess && now != current) {
      failures->add("%s: GroupEnd changed the current device from %d to %d", what, current, now);
    }
  }
  return ok;
}

bool Harness::referenceStep(const std::function<ncclResult_t(RankSlot&, ReferencePart)>& fn, const char* what) {
  if (!tunerActivation()) return step(true, [&](RankSlot& s) { return fn(s, ReferencePart::kWhole); }, what);
  const bool reduced = step(true, [&](RankSlot& s) { return fn(s, ReferencePart::kReduce); }, what);
  return step(true, [&](RankSlot& s) { return fn(s, ReferencePart::kBroadcast); }, what) && reduced;
}

bool Harness::syncAll(const char* what) {
  bool ok = true;
  for (RankSlot& s : slots) {
    DeviceGuard guard(s.device);
    const cudaError_t err = cudaStreamSynchronize(s.stream);
    if (err != cudaSuccess) {
      fail(s, format("%s: cudaStreamSynchronize: %s", what, cudaGetErrorString(err)));
      ok = false;
    }
  }
  return ok;
}

void Harness::checkNoAsyncError(const char* what) {
  for (RankSlot& s : slots) {
    ncclResult_t asyncError = ncclSuccess;
    const ncclResult_t rc = s.comm ? ncclCommGetAsyncError(s.comm, &asyncError) : ncclSuccess;
    if (rc != ncclSuccess || asyncError != ncclSuccess) {
      fail(s, format("%s: ncclCommGetAsyncError rc %d asyncError %d (%s)", what, rc, asyncError,
                     ncclGetErrorString(asyncError)));
    }
  }
}

void Harness::checkCounters(const char* what) {
  for (RankSlot& s : slots) {
    ncclLamportCommInfo_t now{};
    if (s.comm == nullptr || ncclLamportGetCommInfo(s.comm, &now) != ncclSuccess) continue;
    const uint64_t lamport = now.lamportCalls - s.base.lamportCalls, nccl = now.ncclCalls - s.base.ncclCalls;
    if (!active && now.lamportCalls != 0) fail(s, format("%s: lamportCalls %llu with the plugin inactive", what,
                                                      static_cast<unsigned long long>(now.lamportCalls)));
    if (active && (lamport != s.expectLamport || nccl != s.expectNccl)) {
      fail(s, format("%s: counters grew by lamportCalls %llu ncclCalls %llu, expected %llu and %llu", what,
                     static_cast<unsigned long long>(lamport), static_cast<unsigned long long>(nccl),
                     static_cast<unsigned long long>(s.expectLamport),
                     static_cast<unsigned long long>(s.expectNccl)));
    }
  }
}

void Harness::fail(const RankSlot& slot, const std::string& text) {
  failures->add("rank %d: %s", slot.rank, text.c_str());
}

// ---------------------------------------------------------------- inputs and the checked call

std::string CallSpec::label() const {
  return format("%s %s n=%zu %s off=%zu/%zu%s", dtypeName(dtype), opName(op), count,
                inPlace ? "in-place" : "out-of-place", inPlace ? recvOffset : sendOffset, recvOffset,
                input == InputKind::kSpecial ? format(" special+%u", specialShift).c_str() : "");
}

void generateInput(const CallSpec& spec, uint64_t seed, int rank, int nRanks, std::vector<uint8_t>* out) {
  const DtypeTraits* t = traits(spec.dtype);
  out->assign(spec.count * t->size, 0);
  Rng rng{mixSeed(seed, static_cast<uint64_t>(rank) + 1)};
  const double scale = std::ldexp(1.0, static_cast<int>(seed % 9) - 4);  // same on every rank
  const uint32_t maxK = std::min<uint32_t>((1u << t->mantissaBits) - 1, 1000);
  const uint32_t big = bitsOf(spec.dtype, spec.dtype == ncclFloat16 ? 30000.0 : 1e38);
  for (size_t i = 0; i < spec.count; ++i) {
    uint32_t bits = bitsOf(spec.dtype, (rng.uniform() * 2 - 1) * scale);
    if (spec.input == InputKind::kSpecial) {
      const int a = static_cast<int>((i / 16) % nRanks), b = (a + 1) % nRanks;
      switch ((i + spec.specialShift) % 16) {
        case 0: bits = 0; break;                                        // +0 everywhere
        case 1: bits = t->sign; break;                                  // -0 everywhere (sentinel)
        case 2: if (rank == a) bits = t->sign; break;                   // one -0
        case 3: if (rank == a) bits = t->nan; break;                    // NaN -> NaN
        case 4: if (rank == a) bits = t->inf; break;                    // +Inf
        case 5: if (rank == a) bits = t->inf | t->sign; break;          // -Inf
        case 6: if (rank == a) bits = t->inf; if (rank == b) bits = t->inf | t->sign; break;  // NaN
        case 7: bits = 1; break;                                        // smallest subnormal
        case 8: bits = t->sign | 1; break;                              // its negative
        case 9: bits = static_cast<uint32_t>(1 + rng.next() % maxK) | ((rng.next() & 1) ? t->sign : 0); break;
        case 10: bits = (rank % 2 == 0) ? t->sign : 0; break;           // mixed zeros
        case 11: bits = (rank == a) ? (t->sign | 1) : t->sign; break;   // -subnormal among -0
        case 12: if (rank == a) bits = big; break;                      // large magnitude
        default: break;                                                 // random
      }
    }
    storeBits(spec.dtype, out->data(), i, bits);
  }
}

CheckedCall::CheckedCall(const CallSpec& spec, const RankSlot& slot)
    : spec_(spec), rank_(slot.rank), nRanks_(slot.nRanks), device_(slot.device), comm_(slot.comm),
      stream_(slot.stream), elem_(elementSize(spec.dtype)), bytes_(spec.count * elementSize(spec.dtype)) {
  sendAlloc_ = 512 + bytes_ + spec.sendOffset * elem_;
  recvAlloc_ = 512 + bytes_ + spec.recvOffset * elem_;
  DeviceGuard guard(device_);
  cudaError_t err = cudaMalloc(&recv_, recvAlloc_);
  if (err == cudaSuccess) err = cudaMalloc(&refOut_, recvAlloc_);
  if (err == cudaSuccess) err = cudaMalloc(&send_, sendAlloc_);
  if (err == cudaSuccess) err = cudaMalloc(&refIn_, sendAlloc_);
  if (err != cudaSuccess) setupError_ = std::string("cudaMalloc: ") + cudaGetErrorString(err);
}

CheckedCall::~CheckedCall() {
  DeviceGuard guard(device_);
  for (char* p : {send_, recv_, refIn_, refOut_}) {
    if (p != nullptr) cudaFree(p);
  }
}

std::string CheckedCall::label() const { return spec_.label() + format(" seed=%llx", static_cast<unsigned long long>(seed_)); }

void CheckedCall::stage(uint64_t seed) {
  seed_ = seed;
  generateInput(spec_, seed, rank_, nRanks_, &input_);
  ref_.assign(spec_.count, 0.0);
  sumAbs_.assign(spec_.count, 0.0);
  std::vector<uint8_t> other;
  for (int r = 0; r < nRanks_; ++r) {
    if (r != rank_) generateInput(spec_, seed, r, nRanks_, &other);
    const std::vector<uint8_t>& in = r == rank_ ? input_ : other;
    for (size_t i = 0; i < spec_.count; ++i) {
      const double v = loadValue(spec_.dtype, in.data(), i);
      ref_[i] += v;
      sumAbs_[i] += std::fabs(v);
    }
  }
  if (spec_.op == ncclAvg) {
    for (double& v : ref_) v /= nRanks_;
  }
  if (!setupError_.empty()) return;
  DeviceGuard guard(device_);
  const size_t inOffset = spec_.inPlace ? spec_.recvOffset : spec_.sendOffset;
  std::vector<uint8_t> image(256 + inOffset * elem_ + bytes_ + 256, 0xFF);
  memcpy(image.data() + 256 + inOffset * elem_, input_.data(), bytes_);
  if (spec_.inPlace) {  // both outputs start as the input, guards poisoned
    cudaMemcpyAsync(recv_, image.data(), image.size(), cudaMemcpyHostToDevice, stream_);
    cudaMemcpyAsync(refOut_, image.data(), image.size(), cudaMemcpyHostToDevice, stream_);
  } else {
    cudaMemcpyAsync(send_, image.data(), image.size(), cudaMemcpyHostToDevice, stream_);
    cudaMemcpyAsync(refIn_, image.data(), image.size(), cudaMemcpyHostToDevice, stream_);
    cudaMemsetAsync(recv_, 0xFF, recvAlloc_, stream_);
    cudaMemsetAsync(refOut_, 0xFF, recvAlloc_, stream_);
  }
}

ncclResult_t CheckedCall::issue(Harness& h, RankSlot& slot) {
  expectLamport = h.expectedPath(slot, spec_.count, spec_.dtype, spec_.op) == ncclLamportPathOneShot;
  char* out = region(recv_, spec_.recvOffset);
  return h.allReduce(slot, spec_.inPlace ? out : region(send_, spec_.sendOffset), out, spec_.count,
                     spec_.dtype, spec_.op);
}

ncclResult_t CheckedCall::issueReference(ReferencePart part) {
  char* out = region(refOut_, spec_.recvOffset);
  return ncclOwnAllReduce(spec_.inPlace ? out : region(refIn_, spec_.sendOffset), out, spec_.count, spec_.dtype,
                          spec_.op, comm_, stream_, part);
}

std::string CheckedCall::compare(const uint8_t* got, const uint8_t* nccl, Against against) const {
  size_t wrong = 0, first = 0;
  double firstTol = 0;
  const double n = nRanks_;
  for (size_t i = 0; i < spec_.count; ++i) {
    const double g = loadValue(spec_.dtype, got, i), r = ref_[i];
    const double s = spec_.op == ncclAvg ? sumAbs_[i] / n : sumAbs_[i];
    double tol = ulpOf(spec_.dtype, std::fabs(r)) + n * 0x1.0p-24 * s;  // ours vs fp64
    const double ncclOwn = n * ulpOf(spec_.dtype, s) + n * minNormalOf(spec_.dtype);  // NCCL rounds per step
    if (against == Against::kNcclVsFp64) tol += ncclOwn;
    if (against == Against::kOursVsNccl) tol = 2 * tol + ncclOwn;
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(g) && !allOnes(got, i, elem_);  // all-ones = the poison, never written
    } else if (std::isinf(roundToDtype(spec_.dtype, r))) {
      ok = g == roundToDtype(spec_.dtype, r);
    } else {
      const double target = against == Against::kOursVsNccl ? loadValue(spec_.dtype, nccl, i) : r;
      ok = std::isfinite(g) && std::fabs(g - target) <= tol;
    }
    if (!ok && wrong++ == 0) {
      first = i;
      firstTol = tol;
    }
  }
  if (wrong == 0) return "";
  uint32_t bits = 0;
  memcpy(&bits, got + first * elem_, elem_);
  const char* what = against == Against::kOursVsFp64   ? "vs fp64 reference"
                     : against == Against::kOursVsNccl ? "vs NCCL's own result (ncclOwnAllReduce)"
                     : got == result_.data()           ? "vs fp64 reference, NCCL's bound (the call went to NCCL)"
                                                       : "NCCL itself vs fp64 (harness or NCCL problem)";
  return format("%s: %zu of %zu elements wrong, first [%zu]: got %.9g (0x%x) expected %.9g%s%.9g tol %.3g; ", what,
                wrong, spec_.count, first, loadValue(spec_.dtype, got, first), bits, ref_[first],
                nccl ? " NCCL " : "", nccl ? loadValue(spec_.dtype, nccl, first) : 0.0, firstTol);
}

std::string CheckedCall::verify(bool withReference) {
  result_.clear();
  if (!setupError_.empty()) return setupError_;
  DeviceGuard guard(device_);
  std::vector<uint8_t> all(recvAlloc_), reference(recvAlloc_), input(bytes_);
  const size_t start = 256 + spec_.recvOffset * elem_;
  cudaError_t err = cudaMemcpy(all.data(), recv_, recvAlloc_, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && withReference) err = cudaMemcpy(reference.data(), refOut_, recvAlloc_, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess && !spec_.inPlace) {
    err = cudaMemcpy(input.data(), region(send_, spec_.sendOffset), bytes_, cudaMemcpyDeviceToHost);
  }
  if (err != cudaSuccess) return std::string("download: ") + cudaGetErrorString(err);
  result_.assign(all.begin() + start, all.begin() + start + bytes_);
  std::string problems;
  for (size_t b = 0; b < recvAlloc_; ++b) {
    if ((b < start || b >= start + bytes_) && all[b] != 0xFF) {
      problems += format("wrote outside recvbuff: byte %lld from its start is 0x%02x; ",
                         static_cast<long long>(b) - static_cast<long long>(start), all[b]);
      break;
    }
  }
  if (!spec_.inPlace && input != input_) problems += "sendbuff was modified by an out-of-place call; ";
  // A call routed to NCCL returns NCCL's result, which rounds every step in the dtype: judged
  // with NCCL's bound (at 2 ranks that is one rounding and fits ours; at 4 and more it does not).
  problems += compare(result_.data(), nullptr, expectLamport ? Against::kOursVsFp64 : Against::kNcclVsFp64);
  if (withReference) {
    problems += compare(reference.data() + start, nullptr, Against::kNcclVsFp64);
    problems += compare(result_.data(), reference.data() + start, Against::kOursVsNccl);
  }
  return problems;
}

}  // namespace gputest
}  // namespace nccl_lamport

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  nccl_lamport::gputest::setTestEnvironment();
  return RUN_ALL_TESTS();
}
