// Process and thread state of the interposer that several wrappers share.
#pragma once

#include <nccl.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <thread>

#include "tuner/routing.h"

namespace nccl_lamport {

/** True unless NCCL_LAMPORT_ENABLE=0 (read once per process). */
bool interposerEnabled();

struct LamportComm;

/** The path ncclAllReduce takes for these arguments on lc (null: unknown comm -> NCCL). */
AllReducePath pathFor(const LamportComm* lc, size_t count, ncclDataType_t datatype, ncclRedOp_t op);

/** ncclGroupStart/End nesting depth of the calling thread, as our wrappers saw it. */
int groupDepth();

/** A wrapper's answer when the real NCCL has no function `name` (no NCCL loaded, or too old):
 *  WARNs and returns ncclSystemError. */
ncclResult_t realNcclMissing(const char* name);

/**
 * Whether NCCL checks collective buffers (NCCL_CHECK_POINTERS=1, or NCCL_CHECK_MODE=DEBUG_LOCAL or
 * DEBUG_GLOBAL, any case), given those two variables' values (null: unset). The allreduce wrapper
 * then sends a call with a buffer NCCL would refuse to NCCL, for NCCL's error.
 */
bool ncclChecksPointers(const char* checkPointers, const char* checkMode);

/**
 * Whether a launch on `stream` from `thread` needs no ordering after the communicator's last
 * launch (on lastStream, from lastThread): the same stream. cudaStreamPerThread is the same
 * stream only on the same thread.
 */
bool sameStreamAsLastCall(cudaStream_t lastStream, std::thread::id lastThread, cudaStream_t stream,
                          std::thread::id thread);

/**
 * The outermost ncclGroupEnd, before NCCL's: launches, in call order, the Lamport allreduces this
 * thread took inside the group. Returns the first error (ncclInvalidArgument for a communicator
 * destroyed inside the group, else launchLamport's); the other calls still launch.
 */
ncclResult_t launchGroupedAllReduces() noexcept;

/**
 * The outermost ncclGroupSimulateEnd, before NCCL's: hands this thread's grouped Lamport calls to
 * the real ncclAllReduce (NCCL's group is still open), so NCCL estimates them and nothing runs
 * (NCCL 2.28 src/group.cc launches no work for a simulated group). Returns the first error.
 */
ncclResult_t simulateGroupedAllReduces() noexcept;

}  // namespace nccl_lamport
