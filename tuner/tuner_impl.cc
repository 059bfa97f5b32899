#include "tuner/tuner_impl.h"

#include <new>

#include "common/log.h"
#include "tuner/load_mode.h"

namespace nccl_lamport {

namespace {

constexpr uint64_t kTunerLogSubsys = kSubsysTuning | kSubsysInit;

// Names the communicator by what the tuner knows: NCCL's commId (v5+), else our context's
// address; never as "comm 0x...", which the other lines use for the ncclComm_t handle.
void logTopology(const TunerContext& context) {
  const TunerCommInfo& comm = context.comm;
  if (comm.hasCommId && comm.hasNvlDomains) {
    LAMPORT_INFO(kTunerLogSubsys,
                 "tuner: commId 0x%016llx nRanks %zu nNodes %zu nvlDomains %d ranks/domain %d..%d "
                 "(tuner ABI v%d); NCCL's algorithm choice left unchanged",
                 static_cast<unsigned long long>(comm.commId), comm.nRanks, comm.nNodes,
                 comm.nvlDomains.nDomains, comm.nvlDomains.minRanksPerDomain,
                 comm.nvlDomains.maxRanksPerDomain, comm.abiVersion);
  } else if (comm.hasCommId) {
    LAMPORT_INFO(kTunerLogSubsys,
                 "tuner: commId 0x%016llx nRanks %zu nNodes %zu nvlDomains ? (tuner ABI v%d); "
                 "NCCL's algorithm choice left unchanged",
                 static_cast<unsigned long long>(comm.commId), comm.nRanks, comm.nNodes,
                 comm.abiVersion);
  } else {
    // Tuner ABI v2..v4 carry no communicator id and no NVLink-domain summary.
    LAMPORT_INFO(kTunerLogSubsys,
                 "tuner: communicator of tuner context %p nRanks %zu nNodes %zu (tuner ABI v%d: no comm id or NVLink "
                 "domains); NCCL's algorithm choice left unchanged",
                 static_cast<const void*>(&context), comm.nRanks, comm.nNodes, comm.abiVersion);
  }
}

}  // namespace

ncclResult_t tunerInit(const TunerCommInfo& comm, NcclDebugLogger logger, void** context) noexcept {
  return tunerInitFromNccl(comm, logger, context, nullptr);
}

ncclResult_t tunerInitFromNccl(const TunerCommInfo& comm, NcclDebugLogger logger, void** context,
                               const void* callerInNccl) noexcept {
  if (context == nullptr) return ncclSuccess;
  *context = nullptr;
  try {
    if (logger != nullptr) setNcclLogger(logger);
    decideLoadModeOnce(comm, callerInNccl);
    TunerContext* created = new (std::nothrow) TunerContext{comm, callerInNccl != nullptr ? context : nullptr};
    if (created == nullptr) {
      LAMPORT_WARN("tuner: out of host memory for a %zu-byte context; NCCL tunes this "
                   "communicator alone", sizeof(TunerContext));
      return ncclSuccess;
    }
    *context = created;  // owned by NCCL from here on, whatever logging does
    logTopology(*created);
    // Tuner activation: every communicator's set-up runs here, the first one's included.
    if (created->ncclSlot != nullptr && tunerActivationCommInit != nullptr) {
      tunerActivationCommInit(comm, created->ncclSlot, callerInNccl);
    }
  } catch (...) {
    // Nothing may cross the C ABI. *context is either null or a complete context.
  }
  return ncclSuccess;
}

ncclResult_t tunerGetCollInfo(void* context, int collType, size_t nBytes, int numPipeOps,
                              float* costTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels) noexcept {
  // nChannels: never written by us (0 from NCCL means "NCCL decides"); a displaced tuner may.
  if (context == nullptr) return ncclSuccess;
  try {
    const TunerContext& ctx = *static_cast<const TunerContext*>(context);
    CostTable table(costTable, numAlgo, numProto);
    if (!table.empty()) editCollCosts(ctx, collType, nBytes, table);
    // The displaced tuner decides what we left to NCCL (today: everything).
    chainedGetCollInfo(ctx.chained, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, regBuff, nChannels);
    LAMPORT_TRACE(kSubsysTuning, "tuner: coll %d nBytes %zu numPipeOps %d regBuff %d: costs as NCCL set them",
                  collType, nBytes, numPipeOps, regBuff);
  } catch (...) {
  }
  return ncclSuccess;
}

ncclResult_t tunerGetCollInfoV2(void* context, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                                int numPipeOps, int* algorithm, int* protocol, int* nChannels) noexcept {
  if (context == nullptr) return ncclSuccess;
  // Ours first, as under every version; without a cost table it leaves NCCL's choice as it is.
  tunerGetCollInfo(context, collType, nBytes, numPipeOps, nullptr, 0, 0, 0, nChannels);
  try {
    chainedGetCollInfoV2(static_cast<const TunerContext*>(context)->chained, collType, nBytes, collNetSupport,
                         nvlsSupport, numPipeOps, algorithm, protocol, nChannels);
  } catch (...) {
    // The displaced tuner threw: nothing may cross the C ABI (this is noexcept).
  }
  return ncclSuccess;
}

ncclResult_t tunerFinalize(void* context) noexcept {
  auto* ctx = static_cast<TunerContext*>(context);
  if (ctx != nullptr && ctx->ncclSlot != nullptr && tunerActivationCommFinalize != nullptr) {
    tunerActivationCommFinalize(ctx->ncclSlot);
  }
  if (ctx != nullptr) {
    try {
      chainedFinalize(ctx->chained);
    } catch (...) {
      // The displaced tuner's finalize threw: nothing may cross the C ABI (this is noexcept).
    }
  }
  delete ctx;
  return ncclSuccess;
}

void editCollCosts(const TunerContext& context, int collType, size_t nBytes, CostTable& table) {
  // No edits yet: the Lamport path runs beside NCCL (in the interposer), not through NCCL's
  // algorithms, so NCCL's own model stays the best judge of its choices. A later rule (e.g.
  // steering NCCL away from a protocol that contends with our kernels) goes here and writes
  // only through table.setCost(), which refuses entries NCCL marked -1.
  (void)context;
  (void)collType;
  (void)nBytes;
  (void)table;
}

}  // namespace nccl_lamport
