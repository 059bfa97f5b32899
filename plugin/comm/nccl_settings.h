// NCCL's own settings that keep a communicator on NCCL, read the way NCCL reads them:
//  - its peer-to-peer switches: the Lamport path is P2P over NVLink, so a user who turns NCCL's
//    P2P off (typically because P2P is broken or forbidden on the machine) gets no peer mappings
//    from us either;
//  - an allreduce algorithm or protocol the user chose: whoever names NCCL's algorithm (SGLang's
//    deterministic inference sets NCCL_ALGO=allreduce:tree, vLLM's batch-invariant mode
//    NCCL_ALGO and NCCL_PROTO=Simple) relies on NCCL's order of summation at every size, which a
//    Lamport kernel below the crossover would change.
// Such a rank takes part in the set-up as not capable, so every rank keeps the communicator on NCCL.
// Also here: the one reader of NCCL's integer parameters that the plugin's readings of NCCL's
// variables share (block limits, NVTX, pointer checks).
#pragma once

#include <string>

namespace nccl_lamport {

/** NCCL's reading of one of its integer parameters (NCCL_PARAM, ncclLoadParam in NCCL 2.28's
 *  src/misc/param.cc): false when `text` (the variable's value, nullptr when unset) is empty or
 *  out of range, which leaves NCCL's default; else true with strtoll's value in base 0 in *value
 *  (0 for text that is no number). */
bool ncclIntegerParameter(const char* text, long long* value);

/** NCCL_COMM_BLOCKING as NCCL 2.28 applies it (src/init.cc: NCCL_PARAM CommBlocking, used only
 *  when 0 or 1): 0 or 1 when `text` (nullptr when unset) overrides every config's blocking, -1
 *  when it does not. Text that is no number reads as 0, as in NCCL. */
int ncclCommBlockingOverride(const char* text);

/** Whether NCCL_MEM_SYNC_DOMAIN (`value`, nullptr when unset) puts NCCL's kernels in CUDA's remote
 *  memory-sync domain, where our launches then go too (LamportAllReduceArgs::remoteSyncDomain). NCCL
 *  2.28 (src/enqueue.cc) reads it as an integer parameter, default 1 (cudaLaunchMemSyncDomainRemote),
 *  and passes it to CUDA on sm_90+ unchecked: 0 is the default domain. Any other value counts as
 *  remote here. */
bool ncclUsesRemoteSyncDomain(const char* value);

/** ncclUsesRemoteSyncDomain for this process's NCCL_MEM_SYNC_DOMAIN, read at the first call and
 *  kept, as NCCL keeps its parameters. */
bool processUsesRemoteSyncDomain();

/**
 * Why NCCL's settings rule out P2P between NVLink peers, or "" when they allow it.
 * p2pDisable, p2pLevel: the values of NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (nullptr: unset).
 * Follows ncclGetLevel in NCCL 2.28's src/graph/paths.cc:
 *  - NCCL_P2P_DISABLE, parsed as an integer in base 0, equal to 1 means level LOC and wins over
 *    NCCL_P2P_LEVEL; any other value leaves NCCL_P2P_LEVEL in charge;
 *  - NCCL_P2P_LEVEL is a path name compared case-sensitively ("LOC", "NVL", "PIX", ...) or, when
 *    it starts with a digit, an old-style number (0 = LOC).
 * Only LOC rules NVLink out: every other level is at least NVL, the path type of two GPUs joined
 * by NVLink (directly or through NVSwitch), the only peers the Lamport path maps.
 */
std::string ncclP2pOffReason(const char* p2pDisable, const char* p2pLevel);

/**
 * Why `value` of NCCL_ALGO or NCCL_PROTO (named by `variable`; nullptr: unset) chooses allreduce's
 * algorithms or protocols, or "" when it leaves them to NCCL. Follows parseList in NCCL 2.28's
 * src/graph/tuning.cc: ';'-separated entries, each "list" (the first only: every function) or
 * "function:list" (function compared case-insensitively); the last entry that applies to
 * AllReduce decides, and it chooses when its list names elements ("tree", "Simple,LL"), not when
 * it only excludes them ("^NVLS"). Values NCCL rejects fail NCCL's init anyway; only an entry
 * without a function after the first gives "" here. NCCL before 2.24 has no "function:" entries.
 */
std::string ncclAllReduceChoiceReason(const char* variable, const char* value);

/** The first reason above for this process's environment, or "". NCCL_P2P_* are read at the first
 *  call and kept, as NCCL keeps the P2P level it reads at its first topology query; NCCL_ALGO and
 *  NCCL_PROTO at every call, as NCCL reads them at every communicator's init. NCCL puts
 *  nccl.conf's values into the environment before any communicator exists, so they count;
 *  values that NCCL's environment plugin (NCCL_ENV_PLUGIN) supplies are not seen. */
std::string processNcclSettingsOffReason();

}  // namespace nccl_lamport
