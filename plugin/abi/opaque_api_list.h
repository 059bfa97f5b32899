/* NCCL exports that libnccl-lamport.so forwards through signature-agnostic trampolines
 * (plugin/abi/opaque_forward.S, resolver in plugin/abi/opaque_forward.cc), as an X-macro:
 * X(index, name, fallback).
 *
 * Why not plugin/abi/nccl_api_list.h, which has typed forwarders checked against nccl.h:
 *  - indices 0-11: the device API's host functions (the nccl_device/ headers) and one internal
 *    export. Some are declared with C++ types only (ncclTeam passed and returned by value,
 *    references in the inline overloads), ncclResetDebugInitInternal is declared nowhere, and
 *    the set changes between NCCL releases. A program linked against the real libnccl.so.2
 *    (PyTorch: ncclDevCommDestroy) fails to load under LD_AUDIT unless we export every function
 *    it exports.
 *  - 12-41: the functions NCCL 2.29 and 2.30 added, which the 2.28 headers this object is built
 *    against do not declare. Each returns an ncclResult_t (ncclParamDumpAll nothing), so the
 *    error fallback suits them all. Without them a program built against a newer NCCL (PyTorch
 *    with 2.29.7: ncclCommSuspend) would not load when our object stands in for libnccl.so.2.
 *  - 42: ncclResetDebugInit (void). NCCL 2.30's nccl.h declares it only under NCCL's own build
 *    flag (NCCL_OS_LINUX; elsewhere an empty macro), so a typed forwarder would not build
 *    against those headers.
 * All are forwarded by a tail jump that never looks at the arguments.
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
  X(11, ncclTeamWorld, NCCL_LAMPORT_OPAQUE_ZERO)                        \
  X(12, ncclCommGetUniqueId, NCCL_LAMPORT_OPAQUE_ERROR)                 \
  X(13, ncclCommGrow, NCCL_LAMPORT_OPAQUE_ERROR)                        \
  X(14, ncclCommMemStats, NCCL_LAMPORT_OPAQUE_ERROR)                    \
  X(15, ncclCommQueryProperties, NCCL_LAMPORT_OPAQUE_ERROR)             \
  X(16, ncclCommResume, NCCL_LAMPORT_OPAQUE_ERROR)                      \
  X(17, ncclCommSuspend, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(18, ncclGetLsaDevicePointer, NCCL_LAMPORT_OPAQUE_ERROR)             \
  X(19, ncclGetLsaMultimemDevicePointer, NCCL_LAMPORT_OPAQUE_ERROR)     \
  X(20, ncclGetMultimemDevicePointer, NCCL_LAMPORT_OPAQUE_ERROR)        \
  X(21, ncclGetPeerDevicePointer, NCCL_LAMPORT_OPAQUE_ERROR)            \
  X(22, ncclGinInboxA2ACreateRequirement, NCCL_LAMPORT_OPAQUE_ERROR)    \
  X(23, ncclGinOutboxCreateRequirement, NCCL_LAMPORT_OPAQUE_ERROR)      \
  X(24, ncclParamBind, NCCL_LAMPORT_OPAQUE_ERROR)                       \
  X(25, ncclParamDumpAll, NCCL_LAMPORT_OPAQUE_ERROR)                    \
  X(26, ncclParamGet, NCCL_LAMPORT_OPAQUE_ERROR)                        \
  X(27, ncclParamGetAllParameterKeys, NCCL_LAMPORT_OPAQUE_ERROR)        \
  X(28, ncclParamGetI16, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(29, ncclParamGetI32, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(30, ncclParamGetI64, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(31, ncclParamGetI8, NCCL_LAMPORT_OPAQUE_ERROR)                      \
  X(32, ncclParamGetParameter, NCCL_LAMPORT_OPAQUE_ERROR)               \
  X(33, ncclParamGetStr, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(34, ncclParamGetU16, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(35, ncclParamGetU32, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(36, ncclParamGetU64, NCCL_LAMPORT_OPAQUE_ERROR)                     \
  X(37, ncclParamGetU8, NCCL_LAMPORT_OPAQUE_ERROR)                      \
  X(38, ncclPutSignal, NCCL_LAMPORT_OPAQUE_ERROR)                       \
  X(39, ncclSignal, NCCL_LAMPORT_OPAQUE_ERROR)                          \
  X(40, ncclWaitSignal, NCCL_LAMPORT_OPAQUE_ERROR)                      \
  X(41, ncclWinGetUserPtr, NCCL_LAMPORT_OPAQUE_ERROR)                   \
  X(42, ncclResetDebugInit, NCCL_LAMPORT_OPAQUE_ZERO)

#define NCCL_LAMPORT_OPAQUE_COUNT 43

#endif /* NCCL_LAMPORT_OPAQUE_API_LIST_H_ */
