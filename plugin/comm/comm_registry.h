// Per-communicator state and the process-wide map from ncclComm_t to it.
//
// Lookups happen on every allreduce, so the map is read under a shared lock and the state a call
// needs (eligibility, routing table, launch template) is written once, before the communicator is
// published as ready, and never changed afterwards.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/lamport_allreduce.h"
#include "plugin/transport/peer_memory.h"
#include "tuner/routing.h"

namespace nccl_lamport {

/** Host-mapped words the kernel and the host share (abort request in, error report out). */
struct LamportHostFlags {
  volatile uint32_t abort;  // host writes non-zero on ncclCommAbort / destroy of a stuck comm
  volatile uint32_t error;  // kernel writes a LamportError when it gives up
};

struct LamportComm {
  ncclComm_t comm = nullptr;
  /** This rank's place in the workspace exchange ("Lamport slot" in logs): the index the kernels
   *  (LamportAllReduceArgs::rank) and the peer mapping use. NCCL's rank under LD_PRELOAD; under
   *  tuner activation the rendezvous order (host, pid), the same on every rank but not
   *  necessarily NCCL's numbering. */
  int lamportRank = -1;
  /** NCCL's rank of this communicator (ncclCommUserRank), -1 until known. */
  int ncclRank = -1;
  /** NCCL's commHash, where tuner activation's set-up learnt it (else 0): names the communicator
   *  in logs while its handle is not known (comm null: destroyed before its first call). */
  uint64_t commId = 0;
  /** The rank users see, in logs and ncclLamportGetCommInfo: NCCL's where known, else lamportRank. */
  int reportedRank() const { return ncclRank >= 0 ? ncclRank : lamportRank; }
  int nRanks = 0;
  int cudaDev = -1;
  /** Compute capability * 10 + minor of cudaDev (0 when the set-up never read it); for logs. */
  int smArch = 0;
  /** True once every rank agreed and mapped the workspace; set before publication, then fixed. */
  bool eligible = false;
  /** The set-up's exchange never completed on this rank (a peer gone or stuck past
   *  NCCL_LAMPORT_TIMEOUT_MS, or NCCL failed it): not eligible, and the communicator reports
   *  ncclRemoteError so that the program aborts it. Set before publication, then fixed. */
  bool setupFailed = false;
  /** Created non-blocking (config.blocking = 0, NCCL_COMM_BLOCKING=0, or NCCL answered its init
   *  with ncclInProgress); a split or shrink without a config inherits it, as in NCCL. */
  bool nonBlocking = false;
  /** Most blocks one launch of ours may take (NCCL's block limit: config.maxCTAs, NCCL_MAX_CTAS,
   *  NCCL_MAX_NCHANNELS; 0: no cap beyond the residency share), set before the set-up's first
   *  step (plugin/comm/cta_cap.h); a split or shrink without a config inherits it, as in NCCL. */
  int maxCtas = 0;
  std::string reason = "not set up yet";
  RoutingTable table;
  /** Filled at set-up; per call only buffers, count, datatype and op change. */
  LamportAllReduceArgs launchTemplate{};

  LocalAllocation local;
  std::vector<std::unique_ptr<PeerMapping>> peers;
  LamportHostFlags* hostFlags = nullptr;  // cudaHostAlloc'd, mapped; null if not eligible

  /** Set by ncclCommFinalize and ncclCommRevoke: from then on every call goes to NCCL (and gets
   *  NCCL's answer). */
  std::atomic<bool> routesToNccl{false};
  /** Set by ncclCommRevoke: NCCL now owns the error state; ours (an interrupted kernel) is moot. */
  std::atomic<bool> revoked{false};
  /** Set while NCCL frees comm's handle (inside our ncclCommAbort / ncclCommDestroy) and after:
   *  this entry is then a leftover that the wrapper takes out when NCCL returns, and a
   *  communicator NCCL creates at the same address meanwhile (another thread's) is a newcomer
   *  that needs its own entry (plugin/comm/pending_children.cc). */
  std::atomic<bool> handleFreeing{false};
  /** A placeholder of a non-blocking communicator whose set-up has not finished
   *  (plugin/comm/deferred_setup.h); the published entry replaces it. */
  std::atomic<bool> setupPending{false};
  /** Where the last call we launched went, under orderMutex: NCCL serialises a communicator's
   *  operations whatever their streams, and two Lamport rounds of one communicator must never
   *  overlap (plugin/interpose/interpose_allreduce.cc, orderAfterPreviousCall). */
  std::mutex orderMutex;
  cudaStream_t lastStream = nullptr;
  bool hasLastStream = false;
  /** The thread of the last launch: cudaStreamPerThread is another stream on every thread. */
  std::thread::id lastThread;
  /** Capture id of the last launch (cudaStreamGetCaptureInfo), 0 if it was not captured. */
  unsigned long long lastCaptureId = 0;
  /** Recorded on the launch stream after every uncaptured launch: orders a call on another stream
   *  after it, and tells tear-down when this communicator's own kernels are done. */
  cudaEvent_t doneEvent = nullptr;
  /** Recorded on the last call's stream when a capture moves to another stream of itself. */
  cudaEvent_t orderEvent = nullptr;
  std::atomic<bool> streamWarned{false};
  /** A launch was captured into a graph (replayed anywhere, any time), or could not be ordered
   *  after the previous one: doneEvent alone cannot tell tear-down that our work is done. */
  std::atomic<bool> untrackedCalls{false};

  std::atomic<uint64_t> lamportCalls{0};
  std::atomic<uint64_t> ncclCalls{0};
  std::atomic<bool> errorReported{false};
};

/**
 * ncclSuccess, or the error a Lamport kernel of lc reported (ncclRemoteError: it stopped waiting
 * for its peers after NCCL_LAMPORT_TIMEOUT_MS, or on abort), or ncclRemoteError for a
 * communicator whose set-up failed (LamportComm::setupFailed). WARNs once per communicator.
 */
ncclResult_t lamportAsyncError(LamportComm& lc);

/**
 * What our ncclCommGetAsyncError reports for a communicator whose real one returned ncclSuccess
 * with *asyncError = ncclState. lc: our entry (null if none). NCCL's own error stands; on
 * ncclSuccess, lamportAsyncError(lc). A failed set-up (setupFailed) reports ncclRemoteError to the
 * program also while NCCL says ncclInProgress: the set-up's own all-gather, which a gone peer
 * never completes, can keep NCCL busy for ever. NCCL's internal calls (calledByNccl) get NCCL's
 * ncclInProgress; a revoked communicator's state is NCCL's alone.
 */
ncclResult_t asyncErrorToReport(LamportComm* lc, ncclResult_t ncclState, bool calledByNccl);

/** Process-wide registry. All methods are thread-safe. */
class CommRegistry {
 public:
  static CommRegistry& instance();

  /** Adds (or replaces) the entry for lc->comm (a std::unique_ptr converts). */
  void insert(std::shared_ptr<LamportComm> lc);
  /** The entry for comm or null. Shared: a destroy or abort on another thread (PyTorch's
   *  watchdog) cannot free it under a caller that is still using it. */
  std::shared_ptr<LamportComm> find(ncclComm_t comm) const;
  /** Takes the entry out (null if none). */
  std::shared_ptr<LamportComm> remove(ncclComm_t comm);
  /** Takes comm's entry out only if it is still `expected` (a communicator created meanwhile at
   *  the same address keeps its own). */
  void removeIfSame(ncclComm_t comm, const std::shared_ptr<LamportComm>& expected);
  /** Number of entries (tests, leak checks). */
  size_t size() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<ncclComm_t, std::shared_ptr<LamportComm>> comms_;
};

}  // namespace nccl_lamport
