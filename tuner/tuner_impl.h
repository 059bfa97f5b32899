// The tuner, written once. tuner_plugin.cc adapts each NCCL tuner ABI version (v2..v7) onto
// these functions; nothing here knows which version called it beyond the recorded number.
//
// Contract with NCCL: init and getCollInfo never return an error (an error there fails
// the user's communicator or collective), nChannels is never written, cost entries NCCL marked
// -1 are never touched, every entry point is thread-safe, and no state outlives finalize except
// a few trivially-destructible process-wide flags (tuner/load_mode.h), so NCCL may dlclose and
// reload the object.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

#include "common/log.h"
#include "tuner/chained_tuner.h"

namespace nccl_lamport {

/** NVLink domains of a communicator, as NCCL reports them to v5+ tuners. */
struct NvlDomainSummary {
  int nDomains = 0;
  int minRanksPerDomain = 0;
  int maxRanksPerDomain = 0;
};

/** What NCCL tells the tuner about one communicator at init. */
struct TunerCommInfo {
  int abiVersion = 0;       // the tuner ABI version NCCL loaded (2..7)
  bool hasCommId = false;   // v5+: NCCL passes its commHash (same on every rank)
  uint64_t commId = 0;
  size_t nRanks = 0;
  size_t nNodes = 0;
  bool hasNvlDomains = false;  // v5+, when NCCL passed a non-null pointer
  NvlDomainSummary nvlDomains;
};

/** Our per-communicator state, handed to NCCL as the opaque tuner context. Immutable after
 *  init, so getCollInfo reads it from any thread without a lock. */
struct TunerContext {
  TunerCommInfo comm;
  /** Where NCCL keeps this context (&comm->tunerContext): tuner activation's key for the
   *  communicator's set-up (plugin/comm/tuner_setup.h); null when not from NCCL. */
  const void* ncclSlot = nullptr;
  /** The tuner ours displaced, initialised for this communicator (abiVersion 0: none), called
   *  through its own ABI (tuner/chained_tuner.h). It answers after us, for everything we leave
   *  to NCCL. */
  ChainedTuner chained;
};

/**
 * A view of NCCL's cost table: float[numAlgo][numProto], estimated microseconds per algorithm
 * and protocol; -1 marks a combination NCCL will not use. NCCL picks the smallest entry >= 0.
 */
class CostTable {
 public:
  CostTable(float* entries, int numAlgo, int numProto)
      : entries_(entries), numAlgo_(entries ? numAlgo : 0), numProto_(entries ? numProto : 0) {
    if (numAlgo_ < 0 || numProto_ < 0) numAlgo_ = numProto_ = 0;
  }

  [[nodiscard]] int numAlgo() const { return numAlgo_; }
  [[nodiscard]] int numProto() const { return numProto_; }
  [[nodiscard]] bool empty() const { return numAlgo_ == 0 || numProto_ == 0; }

  /** True if NCCL offers (algo, proto) for this call, i.e. its entry is not -1. */
  [[nodiscard]] bool isCandidate(int algo, int proto) const {
    return inRange(algo, proto) && entries_[algo * numProto_ + proto] >= 0.0f;
  }

  /** The entry's cost, or -1 when out of range. */
  [[nodiscard]] float cost(int algo, int proto) const {
    return inRange(algo, proto) ? entries_[algo * numProto_ + proto] : -1.0f;
  }

  /** Sets a candidate entry's cost (a negative value is refused). Returns false and leaves the
   *  table alone for a -1 entry, out-of-range indices or a negative cost. */
  bool setCost(int algo, int proto, float microseconds) {
    if (!isCandidate(algo, proto) || !(microseconds >= 0.0f)) return false;
    entries_[algo * numProto_ + proto] = microseconds;
    return true;
  }

 private:
  [[nodiscard]] bool inRange(int algo, int proto) const {
    return algo >= 0 && algo < numAlgo_ && proto >= 0 && proto < numProto_;
  }

  float* entries_;
  int numAlgo_;
  int numProto_;
};

/**
 * Creates the context for one communicator in *context (null when anything fails: NCCL then
 * calls the other entry points with a null context, which are no-ops). Routes our log lines
 * through logger (when non-null) and logs the communicator's topology once at INFO. In a
 * process that loaded us only as NCCL's tuner (no interposer wrapper ran and LD_PRELOAD does
 * not name us) it tells the user once per process how to turn the Lamport path on, and keeps
 * the object loaded so a reload by NCCL does not repeat that. No CUDA calls. Always returns
 * ncclSuccess.
 */
ncclResult_t tunerInit(const TunerCommInfo& comm, NcclDebugLogger logger, void** context) noexcept;

/** tunerInit for a call from NCCL, with an address inside the NCCL that called (the init's
 *  return address): in a tuner-only process on tuner ABI v5+ (NCCL 2.28+), with
 *  NCCL_LAMPORT_ENABLE and NCCL_LAMPORT_TUNER_HOOKS on, the first one installs tuner
 *  activation's entry hooks in that NCCL (plugin/hooks/tuner_activation.h). */
ncclResult_t tunerInitFromNccl(const TunerCommInfo& comm, NcclDebugLogger logger, void** context,
                               const void* callerInNccl) noexcept;

/** Defined only in the shared object (plugin/hooks/tuner_activation.cc), hence weak: with the
 *  hooks in, sets up the communicator whose context NCCL keeps at ncclSlot / forgets it.
 *  callerInNccl: an address in the NCCL that called the init (only the hooked NCCL's
 *  communicators are set up: another NCCL in the process never reaches a wrapper). */
__attribute__((weak)) void tunerActivationCommInit(const TunerCommInfo& comm, const void* ncclSlot,
                                                   const void* callerInNccl);
__attribute__((weak)) void tunerActivationCommFinalize(const void* ncclSlot);

/**
 * One collective's tuning query. costTable may be null (tuner ABI v2 has none); nChannels is
 * never written. Always returns ncclSuccess; a null context is a no-op.
 */
ncclResult_t tunerGetCollInfo(void* context, int collType, size_t nBytes, int numPipeOps,
                              float* costTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels) noexcept;

/**
 * One tuning query of tuner ABI v2 (NCCL 2.21): NCCL's choice comes in through algorithm and
 * protocol (both "undefined") and nChannels (0). Ours makes no choice there (it has no cost
 * table to edit, and leaves nChannels alone), so a chained v2 tuner then gets the call with
 * NCCL's own pointers and its choice stands. Always returns ncclSuccess; a null context is a
 * no-op.
 */
ncclResult_t tunerGetCollInfoV2(void* context, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                                int numPipeOps, int* algorithm, int* protocol, int* nChannels) noexcept;

/** Frees the context created by tunerInit (null: no-op). Always returns ncclSuccess. */
ncclResult_t tunerFinalize(void* context) noexcept;

/**
 * THE hook for cost edits: the only function allowed to change NCCL's cost table, and only
 * through CostTable::setCost (so entries NCCL marked -1 stay -1). In this version it edits
 * nothing: every cost stays as NCCL computed it, so NCCL's own choice is unchanged.
 */
void editCollCosts(const TunerContext& context, int collType, size_t nBytes, CostTable& table);

}  // namespace nccl_lamport
