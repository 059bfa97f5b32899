// The routing policy: per (nRanks, GPU arch, datatype, op, bytes), Lamport one-shot or NCCL.
//
// One object serves both the interposer (which path an allreduce takes) and the tuner. Every
// input is identical on every rank of a communicator (SPEC 4.6): never pointers, streams, capture
// state or timing, so no two ranks can take different paths and hang.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace nccl_lamport {

enum class LamportDataType : int;  // kernels/lamport_allreduce.h

/** Where an allreduce runs. */
enum class AllReducePath { kNccl = 0, kLamportOneShot = 1 };

/** Crossovers for one communicator, in bytes of the user's message (count * element size). */
struct RoutingTable {
  size_t oneShotMaxBytes = 0;  // messages of 1..oneShotMaxBytes bytes go to the one-shot kernel
};

/**
 * Built-in one-shot crossover for nRanks GPUs of compute capability smArch (e.g. 90), in bytes.
 * Measured values come from docs/crossover-h200.md; unmeasured (nRanks, arch) pairs get a
 * conservative estimate from the research digest (TensorRT-LLM / vLLM thresholds).
 */
size_t defaultOneShotMaxBytes(int nRanks, int smArch);

/**
 * The table for a communicator: the built-in default, replaced by overrideOneShotMaxBytes when
 * non-zero, then clamped to what the workspace can hold (maxBytesByWorkspace).
 */
RoutingTable makeRoutingTable(int nRanks, int smArch, size_t overrideOneShotMaxBytes,
                              size_t maxBytesByWorkspace);

/** The kernels' datatype for an NCCL datatype: true and *out for float32, float16 and bfloat16,
 *  false (out untouched) for any other. The one mapping from NCCL's datatypes to the kernels'. */
bool lamportDataTypeOf(ncclDataType_t datatype, LamportDataType* out);

/** Element size of a datatype the Lamport kernels support (float32/16, bfloat16), else 0. */
size_t lamportElementSize(ncclDataType_t datatype);

/** True for ops the Lamport kernels implement (sum, avg). */
bool lamportSupportsOp(ncclRedOp_t op);

/**
 * The path for one allreduce. commEligible: the communicator's agreed state (every rank mapped
 * its workspace). Unsupported datatype/op, custom ops, nRanks == 1, count == 0, or bytes above
 * the table: NCCL.
 */
AllReducePath routeAllReduce(const RoutingTable& table, bool commEligible, int nRanks,
                             ncclDataType_t datatype, ncclRedOp_t op, size_t count);

}  // namespace nccl_lamport
