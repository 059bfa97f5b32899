// Internal to kernels/: the kernel selectors the launcher (lamport_oneshot.cu) uses across
// translation units, so each kernel family is instantiated in its own file.
#pragma once

#include "kernels/lamport_allreduce.h"

namespace nccl_lamport {

/** Any Lamport allreduce kernel: one argument, the launch args, by value. */
using LamportKernelFn = void (*)(const LamportOneShotArgs);

/** The two-shot kernel for (datatype, op, nRanks); null for an unknown datatype or op. */
LamportKernelFn selectTwoShotKernel(LamportDataType datatype, LamportReduceOp op, int nRanks);

}  // namespace nccl_lamport
