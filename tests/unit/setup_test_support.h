// What the CPU tests of the workspace set-up share (tests/unit/test_setup_*.cc and
// test_tuner_bind.cc, one binary, shim_setup_waits): the stand-in NCCL's communicators
// (tests/shim/lifecycle_fake_nccl.c, linked, so its pnccl* are in the global scope), a guard that turns a wait that never ends into a test
// failure, and the process's knobs (NCCL_LAMPORT_TIMEOUT_MS=100,
// NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS=1000), set before anything reads them.
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "plugin/loader/real_nccl.h"

// From the stand-in NCCL (tests/shim/lifecycle_fake_nccl.h, a C header): the communicator is busy
// (ncclCommGetAsyncError answers ncclInProgress) for the next `ms` milliseconds (0: no longer); a
// hook called on every thread but the main one at each NCCL call on a communicator and at each
// ncclGroupEnd (comm null), or none.
extern "C" void fakeCommBusyFor(ncclComm_t comm, int ms);
extern "C" void fakeSetHelperCallHook(void (*hook)(const char* function, ncclComm_t comm));

namespace setup_test {

using Clock = std::chrono::steady_clock;
/** NCCL_LAMPORT_TIMEOUT_MS of these tests. */
constexpr uint64_t kTimeoutMs = 100;
/** NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS of these tests: how long a tuner-init set-up waits for the
 *  peer that never comes. */
constexpr uint64_t kRendezvousTimeoutMs = 1000;

// Before anything reads the configuration (once per process).
[[maybe_unused]] inline const bool kEnvironmentSet = [] {
  setenv("NCCL_LAMPORT_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
  setenv("NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS", std::to_string(kRendezvousTimeoutMs).c_str(), 1);
  return true;
}();

/** A non-blocking communicator of the stand-in NCCL, ready readyMs after now (null on failure). */
inline ncclComm_t fakeComm(long readyMs) {
  setenv("FAKE_READY_MS", std::to_string(readyMs).c_str(), 1);
  const auto init = reinterpret_cast<decltype(&ncclCommInitRankConfig)>(
      nccl_lamport::resolveRealNccl("ncclCommInitRankConfig"));
  if (init == nullptr) return nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t comm = nullptr;
  return init(&comm, 2, id, 0, &config) == ncclInProgress ? comm : nullptr;
}

/** Runs f on a thread of its own; its result if it returned within `limit` (a wait that never
 *  ends is left behind, detached, so the test reports instead of hanging). */
template <typename T, typename F>
std::optional<T> within(std::chrono::milliseconds limit, F f) {
  auto done = std::make_shared<std::promise<T>>();
  std::future<T> result = done->get_future();
  std::thread([done, f] { done->set_value(f()); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace setup_test
