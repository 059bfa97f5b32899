// NVLink / P2P topology queries (see topology.h).
//
// NVML is loaded with dlopen at the first query and never unloaded; we declare the handful of
// NVML types and functions we use ourselves (no nvml.h at build time, no DT_NEEDED). The values
// below are NVML's ABI (nvml.h, "nvmlGpuP2PCapsIndex_t", "nvmlGpuP2PStatus_t", "nvmlReturn_t").
#include "plugin/transport/topology.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "common/log.h"

namespace nccl_lamport {

namespace {

// ---- NVML ABI (our own declarations) ------------------------------------------------------
struct NvmlDeviceOpaque;
typedef NvmlDeviceOpaque* NvmlDevice;  // nvmlDevice_t: pointer to an opaque struct
typedef int NvmlReturn;                // nvmlReturn_t (C enum, int-sized)

constexpr NvmlReturn kNvmlSuccess = 0;  // NVML_SUCCESS
constexpr NvmlReturn kNvmlErrorNotFound = 6;  // NVML_ERROR_NOT_FOUND

// nvmlGpuP2PCapsIndex_t
constexpr int kNvmlP2pCapsRead = 0;    // NVML_P2P_CAPS_INDEX_READ
constexpr int kNvmlP2pCapsWrite = 1;   // NVML_P2P_CAPS_INDEX_WRITE
constexpr int kNvmlP2pCapsNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK

// nvmlGpuP2PStatus_t
constexpr int kNvmlP2pStatusOk = 0;  // NVML_P2P_STATUS_OK

typedef NvmlReturn (*NvmlInitFn)(void);                                       // nvmlInit_v2
typedef NvmlReturn (*NvmlGetHandleByBusIdFn)(const char*, NvmlDevice*);     // ..ByPciBusId_v2
typedef NvmlReturn (*NvmlGetP2pStatusFn)(NvmlDevice, NvmlDevice, int, int*);  // ..GetP2PStatus

struct Nvml {
  bool usable = false;
  std::string failure;  // why it is not usable
  NvmlGetHandleByBusIdFn getHandle = nullptr;
  NvmlGetP2pStatusFn getP2pStatus = nullptr;
};

Nvml loadNvml() {
  Nvml nvml;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    nvml.failure = err != nullptr ? err : "cannot load libnvidia-ml.so.1";
    return nvml;
  }
  // Never dlclose: the handles stay valid for the life of the process.
  auto init = reinterpret_cast<NvmlInitFn>(dlsym(lib, "nvmlInit_v2"));
  nvml.getHandle =
      reinterpret_cast<NvmlGetHandleByBusIdFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  nvml.getP2pStatus = reinterpret_cast<NvmlGetP2pStatusFn>(dlsym(lib, "nvmlDeviceGetP2PStatus"));
  if (init == nullptr || nvml.getHandle == nullptr || nvml.getP2pStatus == nullptr) {
    nvml.failure = "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or "
                   "nvmlDeviceGetP2PStatus";
    return nvml;
  }
  NvmlReturn rc = init();
  if (rc != kNvmlSuccess) {
    nvml.failure = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
    return nvml;
  }
  nvml.usable = true;
  return nvml;
}

// Published once loaded, with no lock held across dlopen/nvmlInit (a function-local static's guard
// would be: a library constructor reaching this under the loader's lock then waits for the guard
// while its holder waits for the loader's lock). Threads racing on the first use each load; the
// first to publish wins, the others' copies are dropped (dlopen and nvmlInit are reference-counted).
std::atomic<const Nvml*> gNvml{nullptr};

const Nvml& nvmlLibrary() {
  if (const Nvml* published = gNvml.load(std::memory_order_acquire)) return *published;
  const Nvml* loaded = new Nvml(loadNvml());  // never freed once published: no exit-time order
  const Nvml* expected = nullptr;
  if (!gNvml.compare_exchange_strong(expected, loaded, std::memory_order_acq_rel)) {
    delete loaded;
    return *expected;
  }
  if (loaded->usable) {
    LAMPORT_INFO(kSubsysInit, "NVML loaded for NVLink topology queries");
  } else {
    LAMPORT_INFO(kSubsysInit, "NVML unavailable (%s); using CUDA P2P attributes", loaded->failure.c_str());
  }
  return *loaded;
}

// ---- helpers -----------------------------------------------------------------------------

/** Parses 1..maxDigits hex digits at s[*pos]; advances *pos. */
bool parseHex(const std::string& s, size_t* pos, int maxDigits, unsigned long long* value) {
  size_t start = *pos;
  unsigned long long v = 0;
  while (*pos < s.size() && std::isxdigit(static_cast<unsigned char>(s[*pos]))) {
    if (static_cast<int>(*pos - start) >= maxDigits) return false;
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[*pos])));
    v = v * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++*pos;
  }
  if (*pos == start) return false;
  *value = v;
  return true;
}

struct LinkResult {
  LinkCheck check;
  std::string why;
};

std::string describeNvmlP2p(int status) {
  switch (status) {
    case 1: return "chipset not supported";
    case 2: return "GPU not supported";
    case 3: return "IOH topology not supported";
    case 4: return "disabled by regkey";
    case 5: return "not supported";
    default: return "status " + std::to_string(status);
  }
}

LinkResult checkWithNvml(const Nvml& nvml, const std::string& a, const std::string& b) {
  NvmlDevice devA = nullptr;
  NvmlDevice devB = nullptr;
  NvmlReturn rc = nvml.getHandle(a.c_str(), &devA);
  if (rc == kNvmlSuccess) rc = nvml.getHandle(b.c_str(), &devB);
  if (rc != kNvmlSuccess) {
    return {LinkCheck::kUnknown,
            std::string(rc == kNvmlErrorNotFound ? "GPU not visible to NVML"
                                                 : "nvmlDeviceGetHandleByPciBusId_v2 failed") +
                " (NVML error " + std::to_string(rc) + ")"};
  }
  struct Cap {
    int index;
    const char* name;
  };
  static const Cap kCaps[] = {{kNvmlP2pCapsNvlink, "NVLink"},
                              {kNvmlP2pCapsRead, "P2P read"},
                              {kNvmlP2pCapsWrite, "P2P write"}};
  // Both directions: a link that works one way only is no use to us.
  NvmlDevice pairs[2][2] = {{devA, devB}, {devB, devA}};
  for (const Cap& cap : kCaps) {
    for (auto& pair : pairs) {
      int status = -1;
      rc = nvml.getP2pStatus(pair[0], pair[1], cap.index, &status);
      if (rc != kNvmlSuccess) {
        return {LinkCheck::kUnknown, std::string("nvmlDeviceGetP2PStatus(") + cap.name +
                                         ") failed (NVML error " + std::to_string(rc) + ")"};
      }
      if (status != kNvmlP2pStatusOk) {
        return {LinkCheck::kNotNvlink,
                std::string("no ") + cap.name + " (" + describeNvmlP2p(status) + ")"};
      }
    }
  }
  return {LinkCheck::kNvlinkP2p, std::string()};
}

std::string cudaFailure(const char* what, cudaError_t err) {
  return std::string(what) + " failed: " + cudaGetErrorString(err);
}

LinkResult checkWithCuda(const std::string& nvmlFailure, const std::string& a,
                         const std::string& b) {
  int devA = -1;
  int devB = -1;
  cudaError_t err = cudaDeviceGetByPCIBusId(&devA, a.c_str());
  if (err == cudaSuccess) err = cudaDeviceGetByPCIBusId(&devB, b.c_str());
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // do not leave a sticky-looking error for the application
    return {LinkCheck::kUnknown, "NVML unavailable (" + nvmlFailure +
                                     ") and a GPU is not visible to CUDA in this process"};
  }
  int ab = 0;
  int ba = 0;
  err = cudaDeviceCanAccessPeer(&ab, devA, devB);
  if (err == cudaSuccess) err = cudaDeviceCanAccessPeer(&ba, devB, devA);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return {LinkCheck::kUnknown, cudaFailure("cudaDeviceCanAccessPeer", err)};
  }
  if (!ab || !ba) return {LinkCheck::kNotNvlink, "no CUDA P2P access between the GPUs"};
  int atomicsAb = 0;
  int atomicsBa = 0;
  err = cudaDeviceGetP2PAttribute(&atomicsAb, cudaDevP2PAttrNativeAtomicSupported, devA, devB);
  if (err == cudaSuccess) {
    err = cudaDeviceGetP2PAttribute(&atomicsBa, cudaDevP2PAttrNativeAtomicSupported, devB, devA);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return {LinkCheck::kUnknown, cudaFailure("cudaDeviceGetP2PAttribute", err)};
  }
  // Native P2P atomics are an NVLink feature on NVIDIA data-center GPUs (PCIe P2P lacks them).
  if (atomicsAb != 1 || atomicsBa != 1) {
    return {LinkCheck::kNotNvlink, "P2P without native atomics (PCIe, not NVLink)"};
  }
  return {LinkCheck::kNvlinkP2p, std::string()};
}

std::mutex gCacheMutex;
std::map<std::pair<std::string, std::string>, LinkResult>& linkCache() {
  static auto* cache = new std::map<std::pair<std::string, std::string>, LinkResult>();
  return *cache;  // leaked on purpose: no destructor ordering issues at exit
}

}  // namespace

bool normalizeBusId(const std::string& in, std::string* out) {
  if (out == nullptr) return false;
  out->clear();
  size_t begin = 0;
  size_t end = in.size();
  // Fixed-size buffers (GpuIdentity, NVML's char arrays) may carry trailing NULs.
  while (end > begin && (in[end - 1] == '\0' || std::isspace(static_cast<unsigned char>(in[end - 1]))))
    --end;
  while (begin < end && std::isspace(static_cast<unsigned char>(in[begin]))) ++begin;
  std::string s = in.substr(begin, end - begin);

  // Split into up to three ':'-separated fields; the last may carry ".function".
  unsigned long long fields[3];
  int nFields = 0;
  size_t pos = 0;
  for (;;) {
    if (nFields == 3) return false;
    if (!parseHex(s, &pos, 8, &fields[nFields])) return false;
    ++nFields;
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      continue;
    }
    break;
  }
  unsigned long long function = 0;
  bool hasFunction = false;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    if (!parseHex(s, &pos, 1, &function)) return false;
    hasFunction = true;
  }
  if (pos != s.size()) return false;

  unsigned long long domain = 0, bus = 0, device = 0;
  if (nFields == 3) {  // domain:bus:device[.function]
    domain = fields[0];
    bus = fields[1];
    device = fields[2];
  } else if (nFields == 2 && hasFunction) {  // bus:device.function
    bus = fields[0];
    device = fields[1];
  } else {
    return false;
  }
  if (domain > 0xffffffffull || bus > 0xff || device > 0x1f || function > 7) return false;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%04llx:%02llx:%02llx.%llx", domain, bus, device, function);
  *out = buf;
  return true;
}

bool localGpuIdentity(int cudaDev, GpuIdentity* id) {
  if (id == nullptr) return false;
  std::memset(id, 0, sizeof(*id));
  char raw[64] = {0};
  cudaError_t err = cudaDeviceGetPCIBusId(raw, sizeof(raw), cudaDev);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    LAMPORT_WARN("cudaDeviceGetPCIBusId(%d) failed: %s", cudaDev, cudaGetErrorString(err));
    return false;
  }
  std::string normalized;
  if (!normalizeBusId(raw, &normalized) || normalized.size() >= sizeof(id->busId)) {
    LAMPORT_WARN("unexpected PCI bus id \"%s\" for CUDA device %d", raw, cudaDev);
    return false;
  }
  std::memcpy(id->busId, normalized.c_str(), normalized.size() + 1);
  return true;
}

LinkCheck checkNvlinkP2p(const std::string& busIdA, const std::string& busIdB, std::string* why) {
  std::string scratch;
  std::string& reason = why != nullptr ? *why : scratch;
  reason.clear();
  std::string a, b;
  if (!normalizeBusId(busIdA, &a) || !normalizeBusId(busIdB, &b)) {
    reason = "malformed PCI bus id (\"" + busIdA + "\", \"" + busIdB + "\")";
    return LinkCheck::kUnknown;
  }
  if (a == b) {
    reason = "same GPU";
    return LinkCheck::kNotNvlink;
  }
  // Both directions are checked, so the answer is symmetric: one cache entry per unordered pair.
  std::pair<std::string, std::string> key = a < b ? std::make_pair(a, b) : std::make_pair(b, a);
  {
    std::lock_guard<std::mutex> lock(gCacheMutex);
    auto it = linkCache().find(key);
    if (it != linkCache().end()) {
      reason = it->second.why;
      return it->second.check;
    }
  }
  // Queried outside the lock: NVML/CUDA calls may be slow. Two threads racing on the same new
  // pair both query, and the first result stored wins (both see the same answer afterwards).
  const Nvml& nvml = nvmlLibrary();
  LinkResult result = nvml.usable ? checkWithNvml(nvml, key.first, key.second)
                                  : checkWithCuda(nvml.failure, key.first, key.second);
  {
    std::lock_guard<std::mutex> lock(gCacheMutex);
    result = linkCache().emplace(key, result).first->second;
  }
  const char* verdict = result.check == LinkCheck::kNvlinkP2p  ? "NVLink P2P"
                        : result.check == LinkCheck::kNotNvlink ? "not NVLink"
                                                                : "unknown";
  LAMPORT_INFO(kSubsysInit, "GPUs %s and %s: %s%s%s", key.first.c_str(),
               key.second.c_str(), verdict, result.why.empty() ? "" : ": ", result.why.c_str());
  reason = result.why;
  return result.check;
}

}  // namespace nccl_lamport
