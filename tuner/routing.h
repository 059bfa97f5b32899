// The routing policy: per (nRanks, GPU arch, datatype, op, bytes), Lamport one-shot, Lamport
// two-shot or NCCL.
//
// One object serves both the interposer (which path an allreduce takes) and the tuner. Every
// input is identical on every rank of a communicator (docs/design.md, "Routing"): never
// pointers, streams, capture state or timing, so no two ranks can take different paths and hang.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

#include "kernels/lamport_types.h"

namespace nccl_lamport {


/** Where an allreduce runs. */
enum class AllReducePath { kNccl = 0, kLamportOneShot = 1, kLamportTwoShot = 2 };

/** Crossovers for one communicator, in bytes of the user's message (count * element size). */
struct RoutingTable {
  size_t oneShotMaxBytes = 0;  // messages of 1..oneShotMaxBytes bytes go to the one-shot kernel
  size_t twoShotMaxBytes = 0;  // messages above oneShotMaxBytes and up to this go to the two-shot
                               // kernel (0 = none); only where nRanks >= kTwoShotMinRanks
};

/** Fewest ranks the two-shot kernel is routed to: at 2 ranks it moves the same bytes as the
 *  one-shot plus one more hop, so it never wins. */
constexpr int kTwoShotMinRanks = 4;

/**
 * Built-in one-shot crossover for nRanks GPUs of compute capability smArch (e.g. 90), in bytes.
 * Measured values come from docs/crossover-h200.md; unmeasured (nRanks, arch) pairs get a
 * conservative estimate from the research digest (TensorRT-LLM / vLLM thresholds).
 */
size_t defaultOneShotMaxBytes(int nRanks, int smArch);

/**
 * Bytes of message each block of a launch capped by NCCL's block limit (plugin/comm/cta_cap.h) may carry
 * below the one-shot crossover: 256 data threads x 4 vectors of 16 bytes, what one thread
 * carries in a 2 MB call at 2 ranks on H200, where the residency share already caps the grid
 * (docs/results-loopback-1xh200.md, "2 MB at 2 ranks"). Each further vector per thread adds about
 * 0.7 us there, so larger messages go to NCCL instead of queueing on fewer blocks.
 */
constexpr size_t kCappedOneShotBytesPerBlock = size_t{256} * 4 * 16;

/** The one-shot crossover under a cap of maxCtas (> 0) blocks per launch, in bytes. */
constexpr size_t cappedOneShotMaxBytes(int maxCtas) {
  return static_cast<size_t>(maxCtas) * kCappedOneShotBytesPerBlock;
}

/**
 * The table for a communicator: the built-in default, replaced by overrideOneShotMaxBytes when
 * non-zero, then clamped to what the workspace can hold (maxBytesByWorkspace).
 */
RoutingTable makeRoutingTable(int nRanks, int smArch, size_t overrideOneShotMaxBytes,
                              size_t maxBytesByWorkspace);

/**
 * Built-in two-shot crossover (bytes) for nRanks GPUs of arch smArch: 0 (no two-shot) until it is
 * measured on a multi-GPU machine and committed in docs/, as every built-in crossover is;
 * NCCL_LAMPORT_TWOSHOT_MAX_BYTES turns it on. Always 0 below kTwoShotMinRanks.
 */
size_t defaultTwoShotMaxBytes(int nRanks, int smArch);

/**
 * Largest message whose two-shot chunks fit a workspace slot of slotBytes at nRanks: the kernel
 * keeps a scatter and a gather chunk of ceil(vectors / nRanks) vectors in every slot
 * (kernels/lamport_twoshot.cuh), so 2 * ceil(bytes / 16 / nRanks) * 16 <= slotBytes.
 */
size_t twoShotCapacityBytes(int nRanks, size_t slotBytes);

/**
 * The two-shot bound of a communicator whose agreed slot is slotBytes: the override (or the
 * built-in default when 0) clamped to twoShotCapacityBytes; 0 below kTwoShotMinRanks or when it
 * does not exceed oneShotMaxBytes. Every input is identical on every rank.
 */
size_t agreedTwoShotMaxBytes(int nRanks, int smArch, size_t overrideTwoShotMaxBytes, size_t oneShotMaxBytes,
                             size_t slotBytes);

/** The kernels' datatype for an NCCL datatype: true and *out for float32, float16 and bfloat16,
 *  false (out untouched) for any other. The one mapping from NCCL's datatypes to the kernels'. */
bool lamportDataTypeOf(ncclDataType_t datatype, LamportDataType* out);

/** Element size of a datatype the Lamport kernels support (float32/16, bfloat16), else 0. */
size_t lamportElementSize(ncclDataType_t datatype);

/** True for ops the Lamport kernels implement (sum, avg). */
bool lamportSupportsOp(ncclRedOp_t op);

/**
 * The path for one allreduce. commEligible: the communicator's agreed state (every rank mapped
 * its workspace). Up to table.oneShotMaxBytes: one-shot; above, up to table.twoShotMaxBytes and
 * with nRanks >= kTwoShotMinRanks: two-shot. Unsupported datatype/op, custom ops, nRanks == 1,
 * count == 0, or bytes above the table: NCCL.
 */
AllReducePath routeAllReduce(const RoutingTable& table, bool commEligible, int nRanks,
                             ncclDataType_t datatype, ncclRedOp_t op, size_t count);

}  // namespace nccl_lamport
