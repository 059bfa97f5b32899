// What one communicator's set-up carries from step to step (the protocol is described in
// plugin/comm/workspace_setup.h): the records the ranks exchange, the per-communicator state,
// and the guard that keeps a failing local step from skipping an exchange round. Internal to
// plugin/comm: the rounds (workspace_setup.cc), this rank's workspace and its peers'
// (workspace_mapping.cc) and the verdicts (setup_verdict.cc) all work on one SetupState.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/entry_guard.h"
#include "plugin/comm/comm_registry.h"
#include "plugin/transport/fd_exchange.h"

namespace nccl_lamport {

// Checked by every rank in round 1: a peer running another build of nccl-lamport (or none)
// makes the communicator stay on NCCL rather than misread the record.
constexpr uint32_t kRecordMagic = 0x4c414d50;  // "LAMP"
constexpr uint32_t kRecordVersion = 2;  // 2: twoShotMaxBytes

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

/** The larger of a rank's blocks in the two rounds (bytes): every round's host buffers are sized
 *  for it before round 1, so that nothing is allocated between the rounds. */
constexpr size_t kExchangeBlockMaxBytes =
    sizeof(ExchangeRecord) > sizeof(OkRecord) ? sizeof(ExchangeRecord) : sizeof(OkRecord);
// The device's exchange buffers are sized for an ExchangeRecord (workspace_mapping.cc).
static_assert(sizeof(OkRecord) <= sizeof(ExchangeRecord), "round 2's block must fit round 1's buffers");

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
  // Round 1's all-gather did not complete here (NCCL failed it, or a wait gave up: a peer is
  // gone). This rank then takes no further part: its round 2 would queue behind that all-gather
  // on the same stream and communicator, and round 2 has no deadline. The communicator is
  // reported failed (LamportComm::setupFailed), so the program aborts it.
  bool roundOneIncomplete = false;
  // NCCL's answer to this state's all-gather in the current round (exchange_rounds.cc): kept
  // here, so that issuing a round allocates nothing.
  ncclResult_t gatherResult = ncclSuccess;
  bool gathered = false;  // NCCL took this state's all-gather into the current round's group
  // Host memory every rank's block of a round is read back into (nRanks x kExchangeBlockMaxBytes),
  // allocated at round 1's start: a rank that stopped between the rounds for want of it would
  // leave its peers in round 2, which has no deadline, for ever.
  std::vector<char> roundIn;
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

/** Keeps text() as s's reason unless it has one already (the first failure wins). Never throws:
 *  it runs where a throw would skip an exchange round; without memory for the text none is kept
 *  (the caller's log line, or a later step's reason, says it). */
template <typename Text>
void noteWhy(SetupState& s, Text text) noexcept {
  try {
    if (s.why.empty()) s.why = text();
  } catch (...) {
  }
}

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
    noteWhy(s, [what] { return std::string(what) + " failed (exception)"; });
  }
}

/** False (and the first failure in *why) unless err is cudaSuccess. */
inline bool cudaOk(cudaError_t err, const char* what, std::string* why) {
  if (err == cudaSuccess) return true;
  if (why->empty()) *why = std::string(what) + ": " + cudaGetErrorString(err);
  return false;
}

}  // namespace nccl_lamport
