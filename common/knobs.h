// The knob table: one line per NCCL_LAMPORT_* variable. The Config struct and its defaults
// (common/config.h), the parser (common/config.cc), knobTable() (the README check in
// tests/unit/test_readme_knobs.cc and any listing) all expand this one list; a knob added here is
// parsed, defaulted and required in the README's knob table with nothing else to edit.
//
// NCCL_LAMPORT_KNOB(field, kind, variable, defaultValue, defaultText, unit, minimum, maximum, doc)
//   field         the Config member
//   kind          how the text is parsed (KnobKind): Switch and Bool take the spellings of
//                 common/bool_knob.h; Bytes takes "65536", "64K", "64KiB", "64KB", "8M", "1G" (binary units;
//                 common/byte_size.h, shared with nccl-lamport-bench); Ms a
//                 decimal number of milliseconds; Path any string (empty: unset)
//   defaultValue  the Config default, in the field's type
//   defaultText   the default as the README's "default" cell starts (in backquotes there)
//   unit          the README's "unit" cell starts with it
//   minimum       (Bytes, Ms) smaller values are rejected: WARN, default kept
//   maximum       (Bytes, Ms) larger values are clamped to it: WARN naming the maximum
//   doc           one line for listings
// An unknown value of a Switch turns the feature off and is always printed (see config.h); of any
// other kind it keeps the default, with a WARN shown as NCCL shows its own (NCCL_DEBUG=WARN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace nccl_lamport {

/** Largest NCCL_LAMPORT_TIMEOUT_MS: 30 days. Larger values (say UINT64_MAX meant as "never")
 *  would overflow the set-up's steady_clock deadline and the kernel's nanosecond budget
 *  (timeoutMs * 10^6 must fit an int64 of nanoseconds added to a clock reading), so they are
 *  clamped to this with a WARN. */
constexpr uint64_t kMaxTimeoutMs = uint64_t{30} * 24 * 3600 * 1000;

constexpr uint64_t kNoKnobMaximum = std::numeric_limits<uint64_t>::max();

}  // namespace nccl_lamport

// clang-format off
#define NCCL_LAMPORT_KNOBS(NCCL_LAMPORT_KNOB)                                                          \
  NCCL_LAMPORT_KNOB(enable, Switch, "NCCL_LAMPORT_ENABLE", true, "1", "bool", 0, 0,                   \
      "0/false/no/off: every wrapper is a plain pass-through to NCCL (A/B runs); unknown values: off") \
  NCCL_LAMPORT_KNOB(oneShotMaxBytes, Bytes, "NCCL_LAMPORT_ONESHOT_MAX_BYTES", 0, "0", "bytes", 0,     \
      ::nccl_lamport::kNoKnobMaximum,                                                                 \
      "largest message taken by the one-shot kernel; 0: the built-in table per nRanks")              \
  NCCL_LAMPORT_KNOB(twoShotMaxBytes, Bytes, "NCCL_LAMPORT_TWOSHOT_MAX_BYTES", 0, "0", "bytes", 0,     \
      ::nccl_lamport::kNoKnobMaximum,                                                                 \
      "at 4+ ranks, largest message taken by the two-shot kernel; 0: the built-in table (off)")       \
  NCCL_LAMPORT_KNOB(tuningFile, Path, "NCCL_LAMPORT_TUNING_FILE", "", "unset", "path", 0, 0,          \
      "crossovers written by nccl-lamport-bench --tune (docs/tuning-file.md); knobs above win")       \
  NCCL_LAMPORT_KNOB(workspaceMaxBytes, Bytes, "NCCL_LAMPORT_WORKSPACE_MAX_BYTES", size_t{64} << 20,   \
      "64M", "bytes", 1, ::nccl_lamport::kNoKnobMaximum,                                              \
      "cap on one rank's Lamport workspace per communicator")                                         \
  NCCL_LAMPORT_KNOB(timeoutMs, Ms, "NCCL_LAMPORT_TIMEOUT_MS", 600000, "600000", "ms", 1,              \
      ::nccl_lamport::kMaxTimeoutMs,                                                                  \
      "how long a kernel or the set-up waits for peers before giving up (max 30 days)")               \
  NCCL_LAMPORT_KNOB(ncclPath, Path, "NCCL_LAMPORT_NCCL_PATH", "", "unset", "path", 0, 0,               \
      "the NCCL library to load when none is loaded; when set, the only one tried")                   \
  NCCL_LAMPORT_KNOB(auditDebug, Bool, "NCCL_LAMPORT_AUDIT_DEBUG", false, "0", "bool", 0, 0,            \
      "the LD_AUDIT module prints each decision about an NCCL library to stderr")                    \
  NCCL_LAMPORT_KNOB(requireNvlink, Bool, "NCCL_LAMPORT_REQUIRE_NVLINK", true, "1", "bool", 0, 0,       \
      "0: the NVLink check is skipped; any pair whose workspaces map is accepted (testing only)")    \
  NCCL_LAMPORT_KNOB(tunerHooks, Bool, "NCCL_LAMPORT_TUNER_HOOKS", true, "1", "bool", 0, 0,            \
      "a process that loaded us only as NCCL's tuner (NCCL 2.28+) hooks NCCL's entry points; 0: tuner only")\
  NCCL_LAMPORT_KNOB(rendezvousTimeoutMs, Ms, "NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS", 10000, "10000",    \
      "ms", 1, ::nccl_lamport::kMaxTimeoutMs,                                                         \
      "how long a communicator's ranks wait for each other in the tuner's init (tuner activation), "  \
      "and for each peer's workspace handle in any set-up")                                           \
  NCCL_LAMPORT_KNOB(baselineKernel, Bool, "NCCL_LAMPORT_BASELINE_KERNEL", false, "0", "bool", 0, 0,    \
      "on: the one-shot kernel of 2026-12-01 instead of the default one (A/B timing only)")          \
  NCCL_LAMPORT_KNOB(testSharedGpu, Bool, "NCCL_LAMPORT_TEST_SHARED_GPU", false, "0", "bool", 0, 0,     \
      "testing only: ranks share one GPU, each under its own NCCL_HOSTID; tuner activation then also "  \
      "sets up communicators NCCL reports as multi-node")
// clang-format on
