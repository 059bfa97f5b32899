// The set-up's bounded waits (plugin/comm/setup_control.h): polling NCCL until its communicators
// are enqueued or ready, and a CUDA query until it completes, round 1 within
// NCCL_LAMPORT_TIMEOUT_MS, round 2 until a cancel.
#include "plugin/comm/setup_control.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/config.h"
#include "plugin/loader/real_nccl.h"

namespace nccl_lamport {

namespace {

/** Sleeps a little longer each time, up to 5 ms: readiness takes from microseconds to seconds. */
struct Backoff {
  std::chrono::microseconds delay{50};
  void wait() {
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::microseconds>(delay * 2, std::chrono::milliseconds(5));
  }
};

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

/** Round 1's deadline (NCCL_LAMPORT_TIMEOUT_MS from now, saturated: a "never" value must not wrap
 *  into the past); none for round 2 (plugin/comm/setup_control.h, ExchangeRound). */
Deadline deadlineFor(ExchangeRound round) {
  if (round == ExchangeRound::kSecond) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::time_point::max() - now);
  const uint64_t ms = std::min<uint64_t>(globalConfig().timeoutMs, static_cast<uint64_t>(room.count()));
  return now + std::chrono::milliseconds(ms);
}

bool past(const Deadline& deadline) { return deadline && std::chrono::steady_clock::now() > *deadline; }

/** Polls the real ncclCommGetAsyncError of commAt(i) for i < count (null: skipped) until
 *  `ready(state)` holds for all of them. Returns ncclSuccess, the first state that is neither ready
 *  nor in progress, ncclInvalidUsage once cancelled, or ncclRemoteError once `deadline` has passed.
 *  settled: count flags, all 0, where a communicator found ready is marked and not asked again (a
 *  later error of it is its own round's to see); null: every pass asks all of them, and nothing is
 *  allocated (waitUntilEnqueued runs between the exchange rounds: exchange_rounds.cc). */
template <typename Ready>
ncclResult_t pollComms(size_t count, absl::FunctionRef<ncclComm_t(size_t)> commAt, SetupControl* control,
                       Ready ready, const Deadline& deadline, char* settled = nullptr) {
  Backoff backoff;
  for (;;) {
    size_t remaining = 0;
    {
      std::unique_lock<std::mutex> lock;
      if (control != nullptr) {
        lock = std::unique_lock<std::mutex>(control->ncclMutex);
        if (control->cancelled.load()) return ncclInvalidUsage;
      }
      for (size_t i = 0; i < count; ++i) {
        const ncclComm_t comm = commAt(i);
        // A communicator stopped meanwhile (aborted, revoked) is NCCL's alone from now on.
        if (comm == nullptr || (settled != nullptr && settled[i]) || (control != nullptr && control->stopped(comm))) {
          continue;
        }
        ncclResult_t state = ncclInProgress;
        ncclResult_t result = REAL_NCCL(ncclCommGetAsyncError)(comm, &state);
        if (result != ncclSuccess) return result;
        if (ready(state)) {
          if (settled != nullptr) settled[i] = 1;
          continue;
        }
        if (state != ncclInProgress) return state;
        ++remaining;
      }
    }
    if (remaining == 0) return ncclSuccess;
    if (past(deadline)) return ncclRemoteError;
    backoff.wait();
  }
}

}  // namespace

ncclResult_t waitUntilEnqueued(size_t count, absl::FunctionRef<ncclComm_t(size_t i)> commAt, SetupControl* control,
                               ExchangeRound round) {
  return pollComms(
      count, commAt, control, [](ncclResult_t state) { return state != ncclInProgress; }, deadlineFor(round));
}

cudaError_t waitForQuery(const std::function<cudaError_t()>& query, SetupControl* control, ExchangeRound round,
                         ncclComm_t comm) {
  // Round 1 is bounded like a Lamport kernel's wait: a peer that never joins the exchange must
  // not keep this communicator "in progress" forever. Round 2 only stops when this communicator
  // is stopped (or the whole set-up cancelled): a sibling's abort does not end it.
  const Deadline deadline = deadlineFor(round);
  Backoff backoff;
  for (;;) {
    cudaError_t err = query();
    if (err != cudaErrorNotReady) return err;
    if ((control != nullptr && control->stopped(comm)) || past(deadline)) return cudaErrorNotReady;
    backoff.wait();
  }
}

cudaError_t waitStream(cudaStream_t stream, SetupControl* control, ExchangeRound round, ncclComm_t comm) {
  if (control == nullptr) return cudaStreamSynchronize(stream);
  return waitForQuery([stream] { return cudaStreamQuery(stream); }, control, round, comm);
}

ncclResult_t waitUntilNcclReady(const std::vector<ncclComm_t>& comms, SetupControl* control) {
  // Before round 1, so the flags may be allocated: a communicator found ready keeps that answer,
  // as NCCL's own readiness is what every rank waits for here.
  std::vector<char> settled(comms.size(), 0);
  return pollComms(
      comms.size(), [&comms](size_t i) { return comms[i]; }, control,
      [](ncclResult_t state) { return state == ncclSuccess; }, std::nullopt, settled.data());
}

}  // namespace nccl_lamport
