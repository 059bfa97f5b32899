#include "plugin/comm/setup_verdict.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "kernels/lamport_allreduce.h"
#include "plugin/comm/comm_teardown.h"
#include "plugin/comm/nccl_settings.h"
#include "plugin/comm/workspace_setup.h"
#include "tuner/routing.h"

namespace nccl_lamport {

namespace {

void fillLaunchTemplate(LamportComm& lc, uint64_t timeoutMs) {
  LamportAllReduceArgs& args = lc.launchTemplate;
  args.rank = lc.lamportRank;
  for (int r = 0; r < lc.nRanks; ++r) {
    args.peerBases[r] = r == lc.lamportRank ? lc.local.ptr() : lc.peers[r]->ptr();
  }
  void* abortDev = nullptr;
  void* errorDev = nullptr;
  cudaHostGetDevicePointer(&abortDev, const_cast<uint32_t*>(&lc.hostFlags->abort), 0);
  cudaHostGetDevicePointer(&errorDev, const_cast<uint32_t*>(&lc.hostFlags->error), 0);
  args.abortFlag = static_cast<const volatile uint32_t*>(abortDev);
  args.errorFlag = static_cast<uint32_t*>(errorDev);
  args.timeoutNs = timeoutMs * 1000000ull;
  args.variant = globalConfig().baselineKernel ? LamportKernelVariant::kBaseline : LamportKernelVariant::kFast;
  args.maxBlocks = lc.maxCtas;  // NCCL's block limit, plugin/comm/cta_cap.h (0: the launcher's own bound)
  args.remoteSyncDomain = processUsesRemoteSyncDomain() ? 1 : 0;  // where NCCL's kernels run
}

}  // namespace

std::string ctaCapNote(int maxCtas) {
  return maxCtas > 0 ? ", at most " + std::to_string(maxCtas) + " blocks per launch (NCCL's block limit)" : "";
}

bool allRanksOk(const char* words, int nRanks, int* firstNo) noexcept {
  *firstNo = -1;
  for (int r = 0; r < nRanks; ++r) {
    OkRecord rec;
    memcpy(&rec, words + static_cast<size_t>(r) * sizeof(OkRecord), sizeof(rec));
    if (!rec.ok) {
      *firstNo = r;
      return false;
    }
  }
  return true;
}

std::string peerNotOkReason(int firstNo) noexcept {
  try {
    return "rank " + std::to_string(firstNo) + " could not map its peers";
  } catch (...) {
    return std::string();
  }
}

std::string twoShotNote(const RoutingTable& table, int nRanks) {
  if (nRanks < kTwoShotMinRanks || table.twoShotMaxBytes <= table.oneShotMaxBytes) return "";
  return ", two-shot up to " + std::to_string(table.twoShotMaxBytes) + " bytes";
}

std::string eligibleReason(const LamportComm& lc) {
  return "Lamport one-shot up to " + std::to_string(lc.table.oneShotMaxBytes) + " bytes" +
         twoShotNote(lc.table, lc.nRanks) + ctaCapNote(lc.maxCtas);
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
    lc.reason = eligibleReason(lc);
  } else {
    // A failed exchange may have left its all-gather stuck on the device, and freeing the
    // workspace (unmapping) would wait for it, with the communicator still "in progress" for the
    // program: its tear-down frees it, after NCCL's abort (releaseCommEntry).
    if (!lc.setupFailed) releaseResources(lc);
    lc.eligible = false;
    lc.reason = s.why.empty() ? std::string("a peer could not set up its workspace") : s.why;
  }
}

void logCommVerdict(const LamportComm& lc) {
  if (lc.eligible) {
    LAMPORT_INFO(kSubsysInit,
                 "comm %p rank %d nRanks %d cudaDev %d sm_%d: Lamport one-shot ON for float32/float16/bfloat16 "
                 "sum/avg up to %zu bytes%s; workspace %zu bytes (3 buffers x %d slots x %zu bytes)%s",
                 static_cast<void*>(lc.comm), lc.reportedRank(), lc.nRanks, lc.cudaDev, lc.smArch, lc.table.oneShotMaxBytes,
                 twoShotNote(lc.table, lc.nRanks).c_str(), lc.local.size(), lc.nRanks - 1,
                 lc.launchTemplate.layout.slotBytes, ctaCapNote(lc.maxCtas).c_str());
  } else {
    LAMPORT_INFO(kSubsysInit, "comm %p rank %d nRanks %d cudaDev %d: Lamport OFF, every call goes to NCCL: %s",
                 static_cast<void*>(lc.comm), lc.reportedRank(), lc.nRanks, lc.cudaDev, lc.reason.c_str());
  }
}

}  // namespace nccl_lamport
