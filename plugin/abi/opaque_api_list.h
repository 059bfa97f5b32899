/* NCCL exports that libnccl-lamport.so forwards through signature-agnostic trampolines
 * (plugin/abi/opaque_forward.S, resolver in plugin/abi/opaque_forward.cc), as an X-macro:
 * X(index, name, fallback).
 *
 * Why not plugin/abi/nccl_api_list.h: these are the device API's host functions (the nccl_device/
 * headers) and one internal export. Some are declared with C++ types only (ncclTeam passed and
 * returned by value, references in the inline overloads), ncclResetDebugInitInternal is declared
 * nowhere, and the set changes between NCCL releases. A program linked against the real
 * libnccl.so.2 (PyTorch: ncclDevCommDestroy) fails to load under LD_AUDIT unless we export every
 * function it exports, so these are forwarded by a tail jump that never looks at the arguments.
 *
 * index:    position in the list, 0, 1, 2, ... in order (the assembly needs it as a literal;
 *           opaque_forward.cc checks the order at compile time).
 * fallback: what a call returns when the real NCCL lacks the function (after one WARN):
 *           NCCL_LAMPORT_OPAQUE_ERROR  ncclSystemError (2) in the return register;
 *           NCCL_LAMPORT_OPAQUE_ZERO   0 in the two integer return registers: an int 0, or an
 *                                      all-zero ncclTeam (nRanks = rank = stride = 0).
 * tests/check_shared_object.sh fails when the real NCCL exports a function missing here or in
 * plugin/abi/nccl_api_list.h / the wrappers; add it here (and to plugin/abi/exports.map).
 *
 * Only C preprocessor lines and C comments: the assembly file includes this header too. */
#ifndef NCCL_LAMPORT_OPAQUE_API_LIST_H_
#define NCCL_LAMPORT_OPAQUE_API_LIST_H_

#define NCCL_LAMPORT_OPAQUE_API(X)                                      \
  X(0, ncclDevCommCreate, NCCL_LAMPORT_OPAQUE_ERROR)                    \
  X(1, ncclDevCommDestroy, NCCL_LAMPORT_OPAQUE_ERROR)                   \
  X(2, ncclGinBarrierCreateRequirement, NCCL_LAMPORT_OPAQUE_ERROR)      \
  X(3, ncclLLA2ACalcSlots, NCCL_LAMPORT_OPAQUE_ZERO)                    \
  X(4, ncclLLA2ACreateRequirement, NCCL_LAMPORT_OPAQUE_ERROR)           \
  X(5, ncclLsaBarrierCreateRequirement, NCCL_LAMPORT_OPAQUE_ERROR)      \
  X(6, ncclResetDebugInitInternal, NCCL_LAMPORT_OPAQUE_ZERO)            \
  X(7, ncclTeamLsa, NCCL_LAMPORT_OPAQUE_ZERO)                           \
  X(8, ncclTeamRail, NCCL_LAMPORT_OPAQUE_ZERO)                          \
  X(9, ncclTeamRankToLsa, NCCL_LAMPORT_OPAQUE_ZERO)                     \
  X(10, ncclTeamRankToWorld, NCCL_LAMPORT_OPAQUE_ZERO)                  \
  X(11, ncclTeamWorld, NCCL_LAMPORT_OPAQUE_ZERO)

#define NCCL_LAMPORT_OPAQUE_COUNT 12

#endif /* NCCL_LAMPORT_OPAQUE_API_LIST_H_ */
