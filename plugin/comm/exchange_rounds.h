// One all-gather round of the set-up exchange over NCCL (plugin/comm/workspace_setup.h describes
// the protocol): every state's record is copied to its device, one grouped pncclAllGather runs
// over all of the batch's communicators, and every rank's block is read back.
//
// The device side of a rank's part (copies and the stream wait) is behind RoundDevice, so that the
// order of the waits and what a round does after one gave up can be checked without a GPU
// (tests/unit/test_setup_rounds.cc).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "plugin/comm/setup_control.h"
#include "plugin/comm/setup_state.h"

namespace nccl_lamport {

/** The device side of one rank's part in an exchange round, per communicator. */
class RoundDevice {
 public:
  virtual ~RoundDevice() = default;
  /** s has a stream and both exchange buffers; without them it cannot take part in a round. */
  virtual bool hasBuffers(const SetupState& s) = 0;
  /** Queues the copy of `bytes` from host memory into s's send buffer, on s's stream. */
  virtual cudaError_t upload(SetupState& s, const void* host, size_t bytes) = 0;
  /** Waits until everything queued on s's stream is done: cudaSuccess, the stream's error, or
   *  cudaErrorNotReady once the round's wait gave up (round 1's deadline, or a cancel). */
  virtual cudaError_t waitIdle(SetupState& s, SetupControl* control, ExchangeRound round) = 0;
  /** Copies `bytes` of s's receive buffer into host memory and returns once they are there.
   *  Called only once waitIdle succeeded. */
  virtual cudaError_t download(SetupState& s, void* host, size_t bytes) = 0;
};

/** The product's RoundDevice: the CUDA runtime on s's stream and buffers. */
RoundDevice& cudaRoundDevice();

/** Writes this rank's `bytes`-byte block of a round for s. */
using RoundFill = std::function<void(SetupState& s, char* out)>;
/** Reads every rank's block (nRanks blocks of the round's size, in rank order) for s. */
using RoundTake = std::function<void(SetupState& s, const char* in)>;

/**
 * Runs one round over every state that has buffers, all communicators in one grouped all-gather
 * of `bytes` per rank (at most kExchangeBlockMaxBytes). A throw from fill or take ends that
 * state's part (guardedStep); so does a failure of round 1's read-back allocation, the round's
 * only one, made before its all-gather: between the rounds nothing is allocated that could keep
 * a rank out of round 2.
 * A state whose round did not complete gets proceed = false and its reason in why; after round 1
 * also roundOneIncomplete, which leaves it out of round 2 (SetupState).
 * The device side is options.device, or cudaRoundDevice() when that is null.
 */
void exchangeRound(std::vector<std::unique_ptr<SetupState>>& states, size_t bytes, const SetupOptions& options,
                   ExchangeRound round, const RoundFill& fill, const RoundTake& take);

}  // namespace nccl_lamport
