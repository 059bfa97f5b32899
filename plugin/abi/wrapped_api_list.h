// The NCCL functions libnccl-lamport.so wraps instead of forwarding (plugin/interpose/*.cc:
// ncclAllReduce, the communicator lifecycle and the group calls), as an X-macro: X(name).
// Tuner activation hooks exactly these entries of the loaded NCCL (plugin/hooks), and the
// loader hands their original code (the trampolines) to the wrappers (plugin/loader/real_nccl.cc).
#pragma once

// clang-format off
#define NCCL_LAMPORT_WRAPPED_API(X)                                                                 \
  X(ncclAllReduce) X(ncclCommInitRank) X(ncclCommInitRankConfig) X(ncclCommInitRankScalable)        \
  X(ncclCommInitAll) X(ncclCommSplit) X(ncclCommShrink) X(ncclCommFinalize) X(ncclCommDestroy)      \
  X(ncclCommAbort) X(ncclCommRevoke) X(ncclCommGetAsyncError) X(ncclGroupStart) X(ncclGroupEnd)     \
  X(ncclGroupSimulateEnd)
// clang-format on

/** One wrapped function's name as a string literal followed by a comma, for an array of names. */
#define NCCL_LAMPORT_WRAPPED_NAME(name) #name,
