#include "plugin/comm/workspace_mapping.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "kernels/lamport_allreduce.h"
#include "plugin/comm/nccl_settings.h"
#include "plugin/transport/fd_exchange.h"
#include "plugin/transport/peer_memory.h"
#include "plugin/transport/topology.h"
#include "tuner/routing.h"
#include "tuner/tuning_file.h"

namespace nccl_lamport {

namespace {

uint64_t fnv1a(std::string_view text, uint64_t hash = 1469598103934665603ull) {
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
    // Read without allocating: a stream whose buffer could not be allocated would swallow the
    // bad_alloc and cache a hash without the boot id for the whole process (every later
    // communicator would then look as if it spanned several hosts).
    char boot[128] = {0};
    const int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    size_t length = 0;
    if (fd >= 0) {
      ssize_t got = 0;
      while (length < sizeof(boot) - 1 && (got = read(fd, boot + length, sizeof(boot) - 1 - length)) > 0) {
        length += static_cast<size_t>(got);
      }
      close(fd);
    }
    return fnv1a(std::string_view(boot, length), fnv1a(name));
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

}  // namespace

size_t maxSlotBytesForCap(int nRanks, size_t capBytes) {
  constexpr size_t kGranularity = size_t{2} << 20;  // VMM granularity on current GPUs
  size_t usable = capBytes >= kGranularity ? capBytes / kGranularity * kGranularity : capBytes;
  if (usable <= kLamportControlBytes) return 0;
  size_t slot = (usable - kLamportControlBytes) / (kLamportBufferCount * static_cast<size_t>(nRanks - 1));
  // Also what the kernels take: a larger slot would be allocated, then refused by every launch.
  slot = std::min(slot, kLamportMaxSlotBytes);
  return slot / kLamportVectorBytes * kLamportVectorBytes;
}

int fdExchangeTimeoutMs(const Config& config) {
  // The ranks meet here as they do in tuner activation's rendezvous, inside NCCL's init: the same
  // bound, not a minute per peer.
  return static_cast<int>(std::min<uint64_t>(config.rendezvousTimeoutMs, INT_MAX));
}

size_t proposedSlotBytes(int nRanks, int smArch, size_t oneShotOverride, size_t workspaceCapBytes, int maxCtas) {
  size_t capSlot = maxSlotBytesForCap(nRanks, workspaceCapBytes);
  if (maxCtas > 0) capSlot = std::min(capSlot, cappedOneShotMaxBytes(maxCtas));
  const RoutingTable table = makeRoutingTable(nRanks, smArch, oneShotOverride, capSlot);
  return (table.oneShotMaxBytes + kLamportVectorBytes - 1) / kLamportVectorBytes * kLamportVectorBytes;
}

namespace {

bool samePeerProcess(const ExchangeRecord& a, const ExchangeRecord& b) {
  return a.hostHash == b.hostHash && a.processId == b.processId && a.processNonce == b.processNonce;
}

}  // namespace

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

  // Not capable, but still part of the exchange (its stream and buffers are ready above): every
  // rank's verdict then keeps the communicator on NCCL.
  if (std::string off = processNcclSettingsOffReason(); !off.empty()) {
    s.why = off;
    return;
  }
  if (lc.nRanks > kLamportMaxRanks) {
    s.why = "more ranks than the kernels support (" + std::to_string(kLamportMaxRanks) + ")";
    return;
  }
  std::string why;
  if (!deviceSupportsPeerMemory(lc.cudaDev, PeerHandleType::kPosixFd, &why)) {
    s.why = why;
    return;
  }
  // Knobs first, then NCCL_LAMPORT_TUNING_FILE, then the built-in table (tuner/tuning_file.h).
  // Ranks whose files differ still agree: the slot (one-shot) and the two-shot bound are both
  // the minimum over ranks (decideFromRecords).
  const CrossoverOverrides overrides = crossoverOverrides(config.tuningFile, lc.nRanks, s.smArch,
                                                          config.oneShotMaxBytes, config.twoShotMaxBytes);
  s.mine.twoShotMaxBytes = overrides.twoShotMaxBytes;
  const size_t slotBytes =
      proposedSlotBytes(lc.nRanks, s.smArch, overrides.oneShotMaxBytes, config.workspaceMaxBytes, lc.maxCtas);
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

/** Starts serving our descriptor to the peers in other processes. Every communicator of a
 *  set-up serves before any fetches, so two processes that set up several communicators in
 *  different orders never wait on each other's servers. */
void startServing(SetupState& s, const Config& config) {
  const LamportComm& lc = *s.lc;
  int remoteProcessPeers = 0;
  for (int r = 0; r < lc.nRanks; ++r) {
    if (r != lc.lamportRank && !samePeerProcess(s.records[r], s.mine)) ++remoteProcessPeers;
  }
  if (remoteProcessPeers == 0) return;
  const int timeoutMs = fdExchangeTimeoutMs(config);
  s.serverThread = std::thread(
      [&s, remoteProcessPeers, timeoutMs] { s.served = s.server.serve(s.exportedFd, remoteProcessPeers, timeoutMs); });
}

/** Checks links and maps every peer's workspace. Keeps fetching after a failure, so no peer's
 *  server is left waiting for us. */
void mapPeers(SetupState& s, const Config& config) {
  LamportComm& lc = *s.lc;
  cudaSetDevice(lc.cudaDev);
  bool ok = true;
  lc.peers.resize(lc.nRanks);
  for (int r = 0; r < lc.nRanks; ++r) {
    if (r == lc.lamportRank) continue;
    const ExchangeRecord& peer = s.records[r];
    std::string why;
    if (samePeerProcess(peer, s.mine)) {
      if (!ok) continue;
    } else {
      // Always fetch: the peer's server counts us among its clients.
      // The peer's server listened before round 1: a refused connection means it is gone.
      int fd = receiveFd(peer.serverName, fdExchangeTimeoutMs(config), FdServerState::kListening);
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
    if (r == lc.lamportRank) continue;
    std::string why;
    if (checkNvlinkP2p(s.mine.busId, s.records[r].busId, &why) != LinkCheck::kNvlinkP2p && config.requireNvlink) {
      s.why = "no NVLink P2P between rank " + std::to_string(lc.lamportRank) + " and rank " + std::to_string(r) + ": " + why;
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

}  // namespace nccl_lamport
