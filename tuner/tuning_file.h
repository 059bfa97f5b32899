// The tuning file: crossovers measured on one machine by `nccl-lamport-bench --tune FILE`, read
// by the routing when NCCL_LAMPORT_TUNING_FILE names it. Format: docs/tuning-file.md.
//
// Precedence for each crossover (docs/tuning-file.md): NCCL_LAMPORT_ONESHOT_MAX_BYTES /
// NCCL_LAMPORT_TWOSHOT_MAX_BYTES when set (non-zero), else the tuning file's value when the file
// is for this (nRanks, smArch), else the built-in table of tuner/routing.cc. A missing or bad
// file, or one measured for another nRanks or GPU arch, is a WARN and the built-in table.
#pragma once

#include <cstddef>
#include <string>

namespace nccl_lamport {

/** What one --tune run measured. Sizes in bytes of the user's message; 0 = no Lamport path wins
 *  (one-shot) or no two-shot (two-shot). */
struct TuningEntry {
  int nRanks = 0;
  int smArch = 0;                // compute capability * 10 + minor, e.g. 90
  size_t oneShotMaxBytes = 0;
  size_t twoShotMaxBytes = 0;
  std::string ncclVersion;       // informational: the NCCL it was measured against ("2.28.9")
  std::string date;              // informational: ISO 8601 UTC
  std::string command;           // informational: the bench command line
};

/** Current format version (the "version" member; other versions are rejected). */
constexpr int kTuningFileVersion = 1;

/** Largest tuning file read, in bytes. --tune writes about 250; a larger file is refused (WARN)
 *  rather than read whole into every rank's memory. */
constexpr size_t kTuningFileMaxBytes = size_t{64} << 10;

/** Parses the file's text. False with *error (one line) on bad JSON, a missing or mistyped
 *  routing member (version, nRanks, smArch, oneShotMaxBytes, twoShotMaxBytes), a negative or
 *  fractional size, or another version; the informational strings are optional (missing or not a
 *  string: empty). Never throws. */
bool parseTuningFile(const std::string& text, TuningEntry* out, std::string* error);

/** The file's text for an entry (pretty-printed JSON, trailing newline). */
std::string formatTuningFile(const TuningEntry& entry);

/** Crossover overrides for a communicator, before the workspace clamp; 0 = built-in table. */
struct CrossoverOverrides {
  size_t oneShotMaxBytes = 0;
  size_t twoShotMaxBytes = 0;
};

/**
 * The overrides for (nRanks, smArch): the knob values (envOneShot, envTwoShot) where non-zero,
 * else the tuning file's where tuningPath names a good file for this (nRanks, smArch). An empty
 * path reads nothing. A problem with the file (also: not a regular file, or larger than
 * kTuningFileMaxBytes; a FIFO is never waited on) is a WARN (NCCL_DEBUG=WARN) naming the path and
 * what is wrong, and the built-in table.
 */
CrossoverOverrides crossoverOverrides(const std::string& tuningPath, int nRanks, int smArch,
                                      size_t envOneShot, size_t envTwoShot);

}  // namespace nccl_lamport
