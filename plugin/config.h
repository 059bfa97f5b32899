// Every NCCL_LAMPORT_* knob, in one table, parsed once per process.
//
// The parser takes the environment as a function so tests never call setenv. A bad value is a
// WARN naming the variable and the value, and the default is kept: a typo never crashes a job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nccl_lamport {

/** The parsed knobs. Units are in the names: bytes, milliseconds. */
struct Config {
  /** NCCL_LAMPORT_ENABLE: 0 turns every wrapper into a plain pass-through to NCCL. */
  bool enable = true;
  /** NCCL_LAMPORT_ONESHOT_MAX_BYTES: largest message (bytes) taken by the one-shot kernel;
   *  0 = the built-in table for the communicator's nRanks (tuner/routing.cc; one table for every
   *  GPU architecture until others are measured). */
  size_t oneShotMaxBytes = 0;
  /** NCCL_LAMPORT_TWOSHOT_MAX_BYTES: at 4 or more ranks, messages above the one-shot crossover and
   *  up to this many bytes take the two-shot kernel; clamped to what the workspace slot holds
   *  (nRanks / 2 slots); 0 = the built-in table (tuner/routing.cc: off until measured). */
  size_t twoShotMaxBytes = 0;
  /** NCCL_LAMPORT_WORKSPACE_MAX_BYTES: cap on one rank's Lamport workspace per communicator. */
  size_t workspaceMaxBytes = size_t{64} << 20;
  /** NCCL_LAMPORT_TIMEOUT_MS: how long a kernel waits for its peers before it gives up and the
   *  communicator reports an error (default 10 minutes, PyTorch's watchdog default). */
  uint64_t timeoutMs = 600000;
  /** NCCL_LAMPORT_NCCL_PATH: the NCCL library to load when none is loaded in the process; when
   *  set, the only one tried (plugin/real_nccl.h). */
  std::string ncclPath;
  /** NCCL_LAMPORT_REQUIRE_NVLINK: 0 accepts any P2P-capable pair (for PCIe testing only). */
  bool requireNvlink = true;
  /** NCCL_LAMPORT_KERNEL: "fast" (default) or "baseline", the one-shot kernel of 2026-12-01 (A/B
   *  timing only: its full-residency grid can deadlock communicators used in opposite orders). */
  bool baselineKernel = false;
};

/** One knob's documentation, for the README check and --help style listings. */
struct KnobInfo {
  const char* variable;     // full environment variable name
  const char* defaultText;  // default as written in the README
  const char* unit;         // "bool", "bytes", "ms", "path"
};

/** The knobs this build understands. */
const std::vector<KnobInfo>& knobTable();

using EnvLookup = std::function<const char*(const char*)>;

/** Parses the knobs from env (a getenv-like function). Never throws; bad values WARN. */
Config parseConfig(const EnvLookup& env);

/** Parses "123", "64K", "8M", "1G" (binary units). False on anything else or overflow. */
bool parseByteSize(const char* text, size_t* out);

/** Parses a boolean knob: 1/true/yes or 0/false/no (case-insensitive words). False on anything
 *  else. */
bool parseBool(const char* text, bool* out);

/** Parses an unsigned decimal integer. False on anything else or overflow. */
bool parseUnsigned(const char* text, uint64_t* out);

/** The process-wide configuration, read from the real environment on first use. */
const Config& globalConfig();

}  // namespace nccl_lamport
