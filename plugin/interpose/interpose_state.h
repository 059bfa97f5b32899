// Process and thread state of the interposer that several wrappers share.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "tuner/routing.h"

namespace nccl_lamport {

/** True unless NCCL_LAMPORT_ENABLE=0 (read once per process). */
bool interposerEnabled();

struct LamportComm;

/** The path ncclAllReduce takes for these arguments on lc (null: unknown comm -> NCCL). */
AllReducePath pathFor(const LamportComm* lc, size_t count, ncclDataType_t datatype, ncclRedOp_t op);

/** ncclGroupStart/End nesting depth of the calling thread, as our wrappers saw it. */
int groupDepth();

}  // namespace nccl_lamport
