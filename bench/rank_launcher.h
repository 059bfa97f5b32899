// Runs a function once per rank, one forked process per rank (the "one process per GPU" launch
// pattern that torchrun and mpirun give real applications), without MPI.
//
// The parent never touches CUDA or NCCL: CUDA state does not survive fork, so every rank
// initialises both itself. Rank 0 creates the ncclUniqueId and publishes it to the others
// through shared memory; ranks also get a shared scratch area to report results to the parent.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace nccl_lamport {

/** What a rank's body sees. */
struct RankContext {
  int rank = 0;
  int nRanks = 1;
  /** Shared between all ranks and the parent; resultBytesPerRank bytes belong to each rank. */
  void* sharedResults = nullptr;
  size_t resultBytesPerRank = 0;
  /**
   * Waits for rank 0's unique id (rank 0 creates it through createId; call it once per rank).
   * Exits the calling process with status 3 if rank 0 failed to create it or died before
   * publishing it.
   */
  std::function<ncclUniqueId()> uniqueId;
  /** This rank's slice of sharedResults. */
  void* myResults() const { return static_cast<char*>(sharedResults) + rank * resultBytesPerRank; }
  const void* resultsOf(int r) const {
    return static_cast<const char*>(sharedResults) + r * resultBytesPerRank;
  }
};

/** Outcome of one rank's process. */
struct RankExit {
  int exitCode = -1;  // the body's return value, or 128 + signal, or -1 if it never ran
  bool timedOut = false;
};

/** Result of a whole launch; the results area stays readable until the object dies. */
class RankLaunch {
 public:
  RankLaunch() = default;
  ~RankLaunch();
  RankLaunch(const RankLaunch&) = delete;
  RankLaunch& operator=(const RankLaunch&) = delete;
  RankLaunch(RankLaunch&& other) noexcept;
  RankLaunch& operator=(RankLaunch&& other) noexcept;

  std::vector<RankExit> exits;
  /** True if every rank returned 0 in time. */
  bool allSucceeded() const;
  /** Rank r's results slice. */
  const void* resultsOf(int r) const;
  /** One line per failed rank, for test failure messages. */
  std::string describeFailures() const;

  void* shared_ = nullptr;
  size_t sharedBytes_ = 0;
  size_t resultBytesPerRank_ = 0;
};

/**
 * Forks nRanks processes; process r runs body(ctx) and exits with its return value. createId is
 * called in rank 0's process to make the unique id (pass pncclGetUniqueId or ncclGetUniqueId).
 * Ranks still alive after timeoutSeconds are killed (SIGKILL) and reported as timed out.
 */
RankLaunch launchRanks(int nRanks, size_t resultBytesPerRank, double timeoutSeconds,
                       const std::function<ncclResult_t(ncclUniqueId*)>& createId,
                       const std::function<int(RankContext&)>& body);

/**
 * Number of CUDA devices, counted in a forked child so the calling process never initialises
 * CUDA (which would make later forks unsafe). 0 when there is no driver or no GPU.
 */
int countCudaDevicesWithoutInit();

}  // namespace nccl_lamport
