// The block (CTA) cap NCCL gives a communicator's kernels (config.maxCTAs, NCCL_MAX_CTAS over
// every config, NCCL_MAX_NCHANNELS / NCCL_MAX_NRINGS, at most 64), applied to our launches too:
// users set it to keep SMs free for work that runs beside the collectives (overlapped GEMMs;
// vLLM's expert-parallel load balancer sets NCCL_MAX_CTAS). A Lamport grid spread over every SM,
// waiting on its peers, would take that room back.
//
// The cap is known where the communicator is created (the init and split wrappers) and needed
// where its set-up runs (plugin/comm/workspace_setup.cc), possibly on another thread and, for a
// split child that NCCL writes later, before its handle exists: so it is noted under the handle,
// or under the child's slot (the caller's ncclComm_t*) until the handle is read from it.
#pragma once

#include <nccl.h>

namespace nccl_lamport {

/** Blocks per launch from a config: its maxCTAs where the config has the field (NCCL 2.17+) and
 *  sets it to a positive value, else 0 (no cap). nullptr: 0. */
int ctaCapFromConfig(const ncclConfig_t* config);

/** NCCL_MAX_CTAS as NCCL 2.28 reads it (src/init.cc envConfigOverride: an integer in base 0, only a
 *  positive value counts, and it replaces every config's maxCTAs), or 0. value: the variable's
 *  text, nullptr when unset. */
int ctaCapFromEnvironment(const char* value);

/** NCCL's largest channel count (MAXCHANNELS, NCCL 2.28 src/include/device.h): no kernel of its
 *  runs more blocks. */
constexpr int kNcclMaxChannels = 64;

/** The user's channel bound as ncclMaxNchannels reads it (NCCL 2.28 src/graph/connect.cc):
 *  NCCL_MAX_NCHANNELS, else the older NCCL_MAX_NRINGS, each an integer in base 0 (text that is
 *  no number reads as 0; -2, NCCL's "not set", and out-of-range values count as unset), clamped
 *  to [1, kNcclMaxChannels]; 0 when neither is set. NCCL's further bound from
 *  NCCL_WORK_ARGS_BYTES is not followed. */
int channelCapFromEnvironment(const char* maxNchannels, const char* maxNrings);

/** What NCCL 2.28 caps a communicator's kernels at, in blocks (0: no cap): maxCtasVariable
 *  (NCCL_MAX_CTAS, > 0) replaces configCap (src/init.cc envConfigOverride), a cap above
 *  kNcclMaxChannels is clamped to it, and channelCap (> 0) bounds it too (connect.cc: the
 *  channels are min(ncclMaxNchannels(), config.maxCTAs)). */
int combinedCtaCap(int configCap, int maxCtasVariable, int channelCap);

/** combinedCtaCap for a communicator whose config (or parent) gives `configCap` (0: none) and this
 *  process's NCCL_MAX_CTAS, NCCL_MAX_NCHANNELS and NCCL_MAX_NRINGS (read once, as NCCL's
 *  parameters are). Applying it twice gives the same cap. */
int effectiveCtaCap(int configCap);

/** Notes `cap` (blocks, 0: none) for the communicator known by `key`: its handle, or the slot a
 *  split child will be written to. Replaces an earlier note under the same key. */
void noteCtaCap(const void* key, int cap);

/** The note under `key`, left in place, or 0. */
int peekCtaCap(const void* key);

/** Moves the note under `slot` to `comm` (the handle NCCL wrote there); none: nothing. */
void moveCtaCap(const void* slot, ncclComm_t comm);

/** Removes and returns the note under `key`, or 0. */
int takeCtaCap(const void* key);

}  // namespace nccl_lamport
