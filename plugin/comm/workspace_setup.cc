#include "plugin/comm/workspace_setup.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "kernels/lamport_allreduce.h"
#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/comm/comm_teardown.h"
#include "common/config.h"
#include "plugin/comm/cuda_guards.h"
#include "plugin/transport/fd_exchange.h"
#include "common/log.h"
#include "plugin/transport/peer_memory.h"
#include "plugin/loader/real_nccl.h"
#include "plugin/transport/topology.h"
#include "tuner/routing.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport {

namespace {

constexpr uint32_t kRecordMagic = 0x4c414d50;  // "LAMP"
constexpr uint32_t kRecordVersion = 2;  // 2: twoShotMaxBytes
// How long one rank waits for a peer to fetch or serve a file descriptor during set-up.
constexpr int kFdExchangeTimeoutMs = 60000;

/** What each rank publishes in round 1. Fixed layout: it crosses processes. */
struct ExchangeRecord {
  uint32_t magic;
  uint32_t version;
  uint32_t capable;  // 1: this rank can take part (allocation, export and server all worked)
  int32_t smArch;    // compute capability * 10 + minor
  uint64_t hostHash;
  uint64_t processId;
  uint64_t processNonce;
  uint64_t slotBytes;   // the slot size this rank proposes (agreed = min over ranks)
  uint64_t twoShotMaxBytes;  // this rank's two-shot override (knob, else tuning file; 0 = built-in);
                             // agreed = min over ranks, so a rank without it keeps the built-in
  uint64_t allocBytes;  // size of this rank's allocation
  uint64_t handle;      // CUmemGenericAllocationHandle, meaningful inside processId only
  char busId[32];
  char serverName[kFdServerNameBytes];
};

/** Round 2: one word per rank, padded so every rank's block is 16-byte aligned. */
struct OkRecord {
  uint32_t ok;
  uint32_t pad[3];
};

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// Same on every process of one host, different across hosts (hostname + boot id).
uint64_t hostHash() {
  static const uint64_t hash = [] {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    std::ifstream bootId("/proc/sys/kernel/random/boot_id");
    std::stringstream boot;
    boot << bootId.rdbuf();
    return fnv1a(boot.str(), fnv1a(name));
  }();
  return hash;
}

uint64_t processNonce() {
  static const uint64_t nonce = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(getpid());
  }();
  return nonce;
}

/** Bytes of user message one slot may hold so that the whole workspace stays under capBytes. */
size_t maxSlotBytesForCap(int nRanks, size_t capBytes) {
  constexpr size_t kGranularity = size_t{2} << 20;  // VMM granularity on current GPUs
  size_t usable = capBytes >= kGranularity ? capBytes / kGranularity * kGranularity : capBytes;
  if (usable <= kLamportControlBytes) return 0;
  size_t slot = (usable - kLamportControlBytes) / (kLamportBufferCount * static_cast<size_t>(nRanks - 1));
  return slot / kLamportVectorBytes * kLamportVectorBytes;
}

/** Everything one communicator needs while it is being set up. */
struct SetupState {
  ncclComm_t comm = nullptr;
  std::unique_ptr<LamportComm> lc;
  int smArch = 0;
  std::string why;  // first local failure
  ExchangeRecord mine{};
  std::vector<ExchangeRecord> records;
  cudaStream_t stream = nullptr;
  void* sendDev = nullptr;
  void* recvDev = nullptr;
  FdServer server;
  int exportedFd = -1;
  size_t agreedTwoShotOverride = 0;  // min over ranks of ExchangeRecord::twoShotMaxBytes
  bool proceed = false;  // round-1 verdict, identical on every rank
  bool localOk = false;  // this rank mapped every peer and initialised its buffers
  std::thread serverThread;
  bool served = true;    // every peer in another process fetched our descriptor

  ~SetupState() {
    if (serverThread.joinable()) serverThread.join();
    if (exportedFd >= 0) close(exportedFd);
    // Stream-ordered: a cudaFree would synchronise the whole device, and wait for an exchange
    // all-gather that a dead peer never completes. The stream goes once its work is done.
    if (sendDev != nullptr) cudaFreeAsync(sendDev, stream);
    if (recvDev != nullptr) cudaFreeAsync(recvDev, stream);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

/**
 * Runs one local step of s's set-up. A throw (allocation, thread creation) must not skip the
 * exchange rounds that follow, or the peers wait for this rank forever: it ends this rank's part
 * (proceed = false, and before round 1 capable stays 0), which the next round tells every rank.
 */
template <typename Step>
void guardedStep(SetupState& s, const char* what, Step step) noexcept {
  try {
    step();
  } catch (...) {
    resultOfException(what);
    s.proceed = false;
    s.localOk = false;
    s.mine.capable = 0;
    try {
      if (s.why.empty()) s.why = std::string(what) + " failed (exception)";
    } catch (...) {  // no memory for the text either: the log line above says it
    }
  }
}

bool cudaOk(cudaError_t err, const char* what, std::string* why) {
  if (err == cudaSuccess) return true;
  if (why->empty()) *why = std::string(what) + ": " + cudaGetErrorString(err);
  return false;
}

void prepareLocal(SetupState& s, const Config& config) {
  LamportComm& lc = *s.lc;
  s.mine.magic = kRecordMagic;
  s.mine.version = kRecordVersion;
  s.mine.hostHash = hostHash();
  s.mine.processId = static_cast<uint64_t>(getpid());
  s.mine.processNonce = processNonce();

  if (!cudaOk(cudaSetDevice(lc.cudaDev), "cudaSetDevice", &s.why)) return;
  cudaOk(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate", &s.why);
  if (s.stream != nullptr) {
    cudaOk(cudaMallocAsync(&s.sendDev, sizeof(ExchangeRecord), s.stream), "cudaMallocAsync", &s.why);
    cudaOk(cudaMallocAsync(&s.recvDev, sizeof(ExchangeRecord) * lc.nRanks, s.stream), "cudaMallocAsync", &s.why);
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, lc.cudaDev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, lc.cudaDev);
  s.smArch = major * 10 + minor;
  s.mine.smArch = s.smArch;
  GpuIdentity identity{};
  if (localGpuIdentity(lc.cudaDev, &identity)) {
    snprintf(s.mine.busId, sizeof(s.mine.busId), "%s", identity.busId);
  } else if (s.why.empty()) {
    s.why = "cannot read the GPU's PCI bus id";
  }
  if (!s.why.empty()) return;

  if (lc.nRanks > kLamportMaxRanks) {
    s.why = "more ranks than the kernels support (" + std::to_string(kLamportMaxRanks) + ")";
    return;
  }
  std::string why;
  if (!deviceSupportsPeerMemory(lc.cudaDev, PeerHandleType::kPosixFd, &why)) {
    s.why = why;
    return;
  }
  const size_t capSlot = maxSlotBytesForCap(lc.nRanks, config.workspaceMaxBytes);
  // Knobs first, then NCCL_LAMPORT_TUNING_FILE, then the built-in table (tuner/tuning_file.h).
  // Ranks whose files differ still agree: the slot (one-shot) and the two-shot bound are both
  // the minimum over ranks (decideFromRecords).
  const CrossoverOverrides overrides = crossoverOverrides(config.tuningFile, lc.nRanks, s.smArch,
                                                          config.oneShotMaxBytes, config.twoShotMaxBytes);
  s.mine.twoShotMaxBytes = overrides.twoShotMaxBytes;
  const RoutingTable table = makeRoutingTable(lc.nRanks, s.smArch, overrides.oneShotMaxBytes, capSlot);
  const size_t slotBytes = (table.oneShotMaxBytes + kLamportVectorBytes - 1) / kLamportVectorBytes * kLamportVectorBytes;
  if (slotBytes == 0) {
    s.why = "workspace cap NCCL_LAMPORT_WORKSPACE_MAX_BYTES too small for any message";
    return;
  }
  const LamportLayout layout{lc.nRanks, slotBytes};
  if (!lc.local.create(lc.cudaDev, layout.totalBytes(), PeerHandleType::kPosixFd, &why)) {
    s.why = "workspace allocation failed: " + why;
    return;
  }
  s.exportedFd = lc.local.exportFd();
  std::string serverName;
  if (s.exportedFd < 0 || !s.server.open(&serverName)) {
    s.why = "cannot export the workspace to other processes";
    return;
  }
  snprintf(s.mine.serverName, sizeof(s.mine.serverName), "%s", serverName.c_str());
  s.mine.slotBytes = slotBytes;
  s.mine.allocBytes = lc.local.size();
  s.mine.handle = static_cast<uint64_t>(lc.local.handle());
  s.mine.capable = 1;
}

/** One grouped all-gather of `bytes` per rank over every state's communicator. */
/** The grouped all-gather itself: under the control's mutex, skipped once cancelled. */
ncclResult_t issueAllGather(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes,
                            const SetupOptions& options, ExchangeRound round) {
  std::unique_lock<std::mutex> lock;
  if (options.control != nullptr) {
    lock = std::unique_lock<std::mutex>(options.control->ncclMutex);
    if (options.control->cancelled.load()) return ncclInvalidUsage;
  }
  // A rank whose buffers could not even be allocated still has to take part, or its peers hang;
  // NCCL itself is then unusable on this device, so the all-gather fails on every rank anyway.
  ncclResult_t result = REAL_NCCL(ncclGroupStart)();
  std::vector<ncclComm_t> comms;
  for (auto& s : states) {
    if (s->stream == nullptr || s->sendDev == nullptr || s->recvDev == nullptr) continue;
    cudaSetDevice(s->lc->cudaDev);
    ncclResult_t r = REAL_NCCL(ncclAllGather)(s->sendDev, s->recvDev, bytes, ncclUint8, s->comm, s->stream);
    if (r != ncclSuccess && s->why.empty()) s->why = std::string("workspace exchange: ") + ncclErrorText(r);
    comms.push_back(s->comm);
  }
  ncclResult_t endResult = REAL_NCCL(ncclGroupEnd)();
  if (lock.owns_lock()) lock.unlock();
  // Non-blocking communicators may still be enqueueing: the stream is not ready to wait on yet.
  if (endResult == ncclInProgress && options.nonBlocking) endResult = waitUntilEnqueued(comms, options.control, round);
  return result == ncclSuccess ? endResult : result;
}

template <typename Fill, typename Take>
void groupedAllGather(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes, const SetupOptions& options,
                      ExchangeRound round, Fill fill, Take take) {
  for (auto& s : states) {
    if (s->stream == nullptr || s->sendDev == nullptr || s->recvDev == nullptr) continue;
    cudaSetDevice(s->lc->cudaDev);
    std::vector<char> host(bytes, 0);
    guardedStep(*s, "workspace exchange", [&] { fill(*s, host.data()); });
    cudaMemcpyAsync(s->sendDev, host.data(), bytes, cudaMemcpyHostToDevice, s->stream);
  }
  const ncclResult_t result = issueAllGather(states, bytes, options, round);
  for (auto& s : states) {
    if (s->stream == nullptr || s->sendDev == nullptr || s->recvDev == nullptr) {
      if (s->why.empty()) s->why = "no device buffers for the workspace exchange";
      continue;
    }
    cudaSetDevice(s->lc->cudaDev);
    std::vector<char> host(bytes * s->lc->nRanks, 0);
    cudaError_t err = cudaMemcpyAsync(host.data(), s->recvDev, host.size(), cudaMemcpyDeviceToHost, s->stream);
    if (err == cudaSuccess) err = waitStream(s->stream, options.control, round);
    if (result != ncclSuccess || err != cudaSuccess) {
      if (s->why.empty()) {
        s->why = std::string("workspace exchange failed: ") +
                 (result != ncclSuccess ? ncclErrorText(result) : cudaGetErrorString(err));
      }
      s->proceed = false;
      continue;
    }
    guardedStep(*s, "workspace exchange", [&] { take(*s, host.data()); });
  }
}

/** Round-1 verdict from the records alone: identical on every rank. */
void decideFromRecords(SetupState& s) {
  const LamportComm& lc = *s.lc;
  s.proceed = false;
  uint64_t slot = UINT64_MAX;
  uint64_t twoShot = UINT64_MAX;
  for (int r = 0; r < lc.nRanks; ++r) {
    const ExchangeRecord& rec = s.records[r];
    if (rec.magic != kRecordMagic || rec.version != kRecordVersion) {
      s.why = "rank " + std::to_string(r) + " runs another nccl-lamport version or none";
      return;
    }
    if (!rec.capable) {
      if (s.why.empty()) s.why = "rank " + std::to_string(r) + " cannot host a Lamport workspace";
      return;
    }
    if (rec.hostHash != s.records[0].hostHash) {
      s.why = "ranks span several hosts (MNNVL is not supported yet)";
      return;
    }
    slot = std::min<uint64_t>(slot, rec.slotBytes);
    twoShot = std::min<uint64_t>(twoShot, rec.twoShotMaxBytes);
  }
  s.agreedTwoShotOverride = static_cast<size_t>(twoShot);
  s.lc->launchTemplate.layout = LamportLayout{lc.nRanks, static_cast<size_t>(slot)};
  s.proceed = true;
}

bool samePeerProcess(const ExchangeRecord& a, const ExchangeRecord& b) {
  return a.hostHash == b.hostHash && a.processId == b.processId && a.processNonce == b.processNonce;
}

/** Starts serving our descriptor to the peers in other processes. Every communicator of a
 *  set-up serves before any fetches, so two processes that set up several communicators in
 *  different orders never wait on each other's servers. */
void startServing(SetupState& s) {
  const LamportComm& lc = *s.lc;
  int remoteProcessPeers = 0;
  for (int r = 0; r < lc.nRanks; ++r) {
    if (r != lc.rank && !samePeerProcess(s.records[r], s.mine)) ++remoteProcessPeers;
  }
  if (remoteProcessPeers == 0) return;
  s.serverThread = std::thread(
      [&s, remoteProcessPeers] { s.served = s.server.serve(s.exportedFd, remoteProcessPeers, kFdExchangeTimeoutMs); });
}

/** Checks links and maps every peer's workspace. Keeps fetching after a failure, so no peer's
 *  server is left waiting for us. */
void mapPeers(SetupState& s, const Config& config) {
  LamportComm& lc = *s.lc;
  cudaSetDevice(lc.cudaDev);
  bool ok = true;
  lc.peers.resize(lc.nRanks);
  for (int r = 0; r < lc.nRanks; ++r) {
    if (r == lc.rank) continue;
    const ExchangeRecord& peer = s.records[r];
    std::string why;
    if (samePeerProcess(peer, s.mine)) {
      if (!ok) continue;
    } else {
      // Always fetch: the peer's server counts us among its clients.
      int fd = receiveFd(peer.serverName, kFdExchangeTimeoutMs);
      if (fd < 0) {
        if (ok) s.why = "cannot receive rank " + std::to_string(r) + "'s workspace handle";
        ok = false;
        continue;
      }
      if (ok) {
        auto mapping = std::make_unique<PeerMapping>();
        if (mapping->mapFd(fd, peer.allocBytes, lc.cudaDev, &why)) {
          lc.peers[r] = std::move(mapping);
        } else {
          s.why = "cannot map rank " + std::to_string(r) + "'s workspace: " + why;
          ok = false;
        }
      }
      close(fd);
      continue;
    }
    auto mapping = std::make_unique<PeerMapping>();
    if (mapping->mapHandle(static_cast<CUmemGenericAllocationHandle>(peer.handle), peer.allocBytes, lc.cudaDev, &why)) {
      lc.peers[r] = std::move(mapping);
    } else {
      s.why = "cannot map rank " + std::to_string(r) + "'s workspace: " + why;
      ok = false;
    }
  }
  for (int r = 0; r < lc.nRanks && ok; ++r) {
    if (r == lc.rank) continue;
    std::string why;
    if (checkNvlinkP2p(s.mine.busId, s.records[r].busId, &why) != LinkCheck::kNvlinkP2p && config.requireNvlink) {
      s.why = "no NVLink P2P between rank " + std::to_string(lc.rank) + " and rank " + std::to_string(r) + ": " + why;
      ok = false;
    }
  }
  s.localOk = ok;
}

/** Joins the server, then prepares what the kernel needs: flags, kernels, the empty buffers. */
void finishLocal(SetupState& s) {
  LamportComm& lc = *s.lc;
  if (s.serverThread.joinable()) s.serverThread.join();
  bool ok = s.localOk;
  if (ok && !s.served) {
    s.why = "a peer did not fetch this rank's workspace handle";
    ok = false;
  }
  cudaSetDevice(lc.cudaDev);
  if (ok) {
    ok = cudaOk(cudaHostAlloc(reinterpret_cast<void**>(&lc.hostFlags), sizeof(LamportHostFlags),
                              cudaHostAllocMapped | cudaHostAllocPortable),
                "cudaHostAlloc", &s.why);
  }
  if (ok) {
    lc.hostFlags->abort = 0;
    lc.hostFlags->error = 0;
    ok = cudaOk(cudaEventCreateWithFlags(&lc.orderEvent, cudaEventDisableTiming), "cudaEventCreate", &s.why) &&
         cudaOk(cudaEventCreateWithFlags(&lc.doneEvent, cudaEventDisableTiming), "cudaEventCreate", &s.why) &&
         cudaOk(lamportPrepareKernels(lc.nRanks), "loading the Lamport kernels", &s.why) &&
         cudaOk(launchLamportWorkspaceInit(lc.local.ptr(), lc.launchTemplate.layout, s.stream),
                "workspace init", &s.why) &&
         cudaOk(cudaStreamSynchronize(s.stream), "workspace init", &s.why);
  }
  s.localOk = ok;
}

void fillLaunchTemplate(LamportComm& lc, uint64_t timeoutMs) {
  LamportOneShotArgs& args = lc.launchTemplate;
  args.rank = lc.rank;
  for (int r = 0; r < lc.nRanks; ++r) {
    args.peerBases[r] = r == lc.rank ? lc.local.ptr() : lc.peers[r]->ptr();
  }
  void* abortDev = nullptr;
  void* errorDev = nullptr;
  cudaHostGetDevicePointer(&abortDev, const_cast<uint32_t*>(&lc.hostFlags->abort), 0);
  cudaHostGetDevicePointer(&errorDev, const_cast<uint32_t*>(&lc.hostFlags->error), 0);
  args.abortFlag = static_cast<const volatile uint32_t*>(abortDev);
  args.errorFlag = static_cast<uint32_t*>(errorDev);
  args.timeoutNs = timeoutMs * 1000000ull;
  args.variant = globalConfig().baselineKernel ? LamportKernelVariant::kBaseline : LamportKernelVariant::kFast;
}

// Fills in the verdict (eligible or not, the reason, the launch template). Logs nothing: the
// line names the handle, which the set-up inside the tuner's init does not know yet.
void settleVerdict(SetupState& s, bool allOk) {
  LamportComm& lc = *s.lc;
  lc.smArch = s.smArch;
  if (allOk) {
    fillLaunchTemplate(lc, globalConfig().timeoutMs);
    // The agreed slot (minimum over ranks) is the crossover: identical on every rank even if
    // their environments differ, so no two ranks route one call differently.
    lc.table.oneShotMaxBytes = lc.launchTemplate.layout.slotBytes;
    lc.table.twoShotMaxBytes = agreedTwoShotMaxBytes(lc.nRanks, s.smArch, s.agreedTwoShotOverride,
                                                     lc.table.oneShotMaxBytes, lc.launchTemplate.layout.slotBytes);
    lc.eligible = true;
    lc.reason = "Lamport one-shot up to " + std::to_string(lc.table.oneShotMaxBytes) + " bytes";
  } else {
    releaseResources(lc);
    lc.eligible = false;
    lc.reason = s.why.empty() ? std::string("a peer could not set up its workspace") : s.why;
  }
}

void publish(SetupState& s, bool allOk) {
  settleVerdict(s, allOk);
  logCommVerdict(*s.lc);
  CommRegistry::instance().insert(std::move(s.lc));
}

}  // namespace

void logCommVerdict(const LamportComm& lc) {
  if (lc.eligible) {
    LAMPORT_INFO(kSubsysInit,
                 "comm %p rank %d nRanks %d cudaDev %d sm_%d: Lamport one-shot ON for float32/float16/bfloat16 "
                 "sum/avg up to %zu bytes; workspace %zu bytes (3 buffers x %d slots x %zu bytes)",
                 static_cast<void*>(lc.comm), lc.rank, lc.nRanks, lc.cudaDev, lc.smArch, lc.table.oneShotMaxBytes,
                 lc.local.size(), lc.nRanks - 1, lc.launchTemplate.layout.slotBytes);
  } else {
    LAMPORT_INFO(kSubsysInit, "comm %p rank %d nRanks %d cudaDev %d: Lamport OFF, every call goes to NCCL: %s",
                 static_cast<void*>(lc.comm), lc.rank, lc.nRanks, lc.cudaDev, lc.reason.c_str());
  }
}

void registerIneligible(ncclComm_t comm, const char* reason, bool nonBlocking) {
  auto lc = std::make_unique<LamportComm>();
  lc->comm = comm;
  lc->nonBlocking = nonBlocking;
  // Best effort: a non-blocking communicator may not answer yet; the fields are for logs only.
  REAL_NCCL(ncclCommUserRank)(comm, &lc->rank);
  REAL_NCCL(ncclCommCount)(comm, &lc->nRanks);
  REAL_NCCL(ncclCommCuDevice)(comm, &lc->cudaDev);
  lc->reason = reason;
  LAMPORT_INFO(kSubsysInit, "comm %p rank %d nRanks %d: Lamport OFF, every call goes to NCCL: %s",
               static_cast<void*>(comm), lc->rank, lc->nRanks, reason);
  CommRegistry::instance().insert(std::move(lc));
}

void setupWorkspaces(const std::vector<ncclComm_t>& comms, const SetupOptions& options) {
  if (comms.empty()) return;
  const Config& config = globalConfig();
  // Every step below makes a communicator's device current. The caller's thread gets its device
  // back; a set-up thread (options.control) is left as it is, since restoring its never-chosen
  // device 0 would create a context there on a rank of another GPU.
  std::optional<RestoreCurrentDevice> callerDevice;
  if (options.control == nullptr) callerDevice.emplace();
  ScopedRelaxedCapture relaxed;

  std::vector<std::unique_ptr<SetupState>> states;
  std::unique_lock<std::mutex> describing;
  if (options.control != nullptr) {
    describing = std::unique_lock<std::mutex>(options.control->ncclMutex);
    if (options.control->cancelled.load()) return;
  }
  for (ncclComm_t comm : comms) {
    if (comm == nullptr) continue;
    auto s = std::make_unique<SetupState>();
    s->comm = comm;
    s->lc = std::make_unique<LamportComm>();
    s->lc->comm = comm;
    s->lc->nonBlocking = options.nonBlocking;
    if (REAL_NCCL(ncclCommUserRank)(comm, &s->lc->rank) != ncclSuccess ||
        REAL_NCCL(ncclCommCount)(comm, &s->lc->nRanks) != ncclSuccess ||
        REAL_NCCL(ncclCommCuDevice)(comm, &s->lc->cudaDev) != ncclSuccess) {
      registerIneligible(comm, "NCCL could not describe the communicator", options.nonBlocking);
      continue;
    }
    if (s->lc->nRanks < 2) {
      registerIneligible(comm, "single-rank communicator", options.nonBlocking);
      continue;
    }
    states.push_back(std::move(s));
  }

  if (describing.owns_lock()) describing.unlock();
  for (auto& s : states) guardedStep(*s, "workspace allocation", [&] { prepareLocal(*s, config); });

  groupedAllGather(
      states, sizeof(ExchangeRecord), options, ExchangeRound::kFirst, [](SetupState& s, char* out) { memcpy(out, &s.mine, sizeof(ExchangeRecord)); },
      [](SetupState& s, const char* in) {
        s.records.resize(s.lc->nRanks);
        memcpy(s.records.data(), in, sizeof(ExchangeRecord) * s.lc->nRanks);
        decideFromRecords(s);
      });

  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "serving the workspace handle", [&] { startServing(*s); });
  }
  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "mapping the peers", [&] { mapPeers(*s, config); });
  }
  for (auto& s : states) {
    if (s->proceed) guardedStep(*s, "preparing the kernels", [&] { finishLocal(*s); });
  }

  groupedAllGather(
      states, sizeof(OkRecord), options, ExchangeRound::kSecond,
      [](SetupState& s, char* out) {
        OkRecord rec{};
        rec.ok = s.proceed && s.localOk ? 1 : 0;
        memcpy(out, &rec, sizeof(rec));
      },
      [](SetupState& s, const char* in) {
        // The verdict from the words alone, identical on every rank: nothing here may throw
        // (guardedStep would turn a throw into a rank-local "no"), the message is best effort.
        bool all = s.proceed;
        int firstNo = -1;
        for (int r = 0; r < s.lc->nRanks; ++r) {
          OkRecord rec;
          memcpy(&rec, in + r * sizeof(OkRecord), sizeof(rec));
          if (!rec.ok) {
            all = false;
            if (firstNo < 0) firstNo = r;
          }
        }
        s.localOk = all;
        try {
          if (firstNo >= 0 && s.why.empty()) s.why = "rank " + std::to_string(firstNo) + " could not map its peers";
        } catch (...) {
        }
      });

  // Under the control's mutex, so a cancel either comes first (nothing is registered) or after
  // (the canceller's releaseComm removes what was).
  std::unique_lock<std::mutex> publishing;
  if (options.control != nullptr) publishing = std::unique_lock<std::mutex>(options.control->ncclMutex);
  const bool cancelled = options.control != nullptr && options.control->cancelled.load();
  for (auto& s : states) {
    cudaSetDevice(s->lc->cudaDev);
    if (cancelled) {
      // Aborted or destroyed meanwhile: the handle may already be reused by a new communicator.
      releaseResources(*s->lc);
      continue;
    }
    publish(*s, s->proceed && s->localOk);
  }
  states.clear();
}

std::unique_ptr<LamportComm> setupWorkspaceOverExchange(int nRanks, int cudaDev, SetupExchange& exchange) {
  const Config& config = globalConfig();
  RestoreCurrentDevice callerDevice;
  auto s = std::make_unique<SetupState>();
  s->lc = std::make_unique<LamportComm>();
  s->lc->nRanks = nRanks;
  s->lc->cudaDev = cudaDev;
  if (nRanks < 2) {
    s->lc->reason = "single-rank communicator";
    return std::move(s->lc);
  }
  prepareLocal(*s, config);
  // Round 1: every rank's record, in the exchange's order; our place in it is our rank.
  std::vector<uint8_t> all;
  int index = -1;
  std::string why;
  if (exchange.allGather(&s->mine, sizeof(ExchangeRecord), &all, &index, &why) &&
      all.size() == sizeof(ExchangeRecord) * static_cast<size_t>(nRanks) && index >= 0 && index < nRanks) {
    s->lc->rank = index;
    s->records.resize(nRanks);
    memcpy(s->records.data(), all.data(), all.size());
    decideFromRecords(*s);
  } else {
    s->why = why.empty() ? std::string("the exchange of workspace records failed") : why;
  }
  if (s->proceed) {
    startServing(*s);
    mapPeers(*s, config);
    finishLocal(*s);
    // Round 2: one ok word per rank (every rank that got here takes part).
    OkRecord mine{};
    mine.ok = s->localOk ? 1 : 0;
    bool allOk = exchange.allGather(&mine, sizeof(mine), &all, &index, &why) &&
                 all.size() == sizeof(OkRecord) * static_cast<size_t>(nRanks);
    if (!allOk && s->why.empty()) s->why = why;
    for (int r = 0; allOk && r < nRanks; ++r) {
      OkRecord rec;
      memcpy(&rec, all.data() + r * sizeof(OkRecord), sizeof(rec));
      if (!rec.ok) {
        allOk = false;
        if (s->why.empty()) s->why = "a peer could not map its peers";
      }
    }
    s->localOk = allOk;
  }
  cudaSetDevice(cudaDev);
  settleVerdict(*s, s->proceed && s->localOk);
  return std::move(s->lc);
}

}  // namespace nccl_lamport
