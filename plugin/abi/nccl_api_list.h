// The NCCL 2.28 public API that libnccl-lamport.so forwards unchanged to the real NCCL, as an
// X-macro: X(return type, name, (parameters), (arguments)).
//
// Together with the wrapped functions (plugin/abi/wrapped_api_list.h, defined in
// plugin/interpose/interpose_*.cc) this is every function of nccl.h that has a
// pnccl twin, so a program that dlopens us in NCCL's place and looks any of them up by handle
// finds it (tests/check_shared_object.sh compares the export list with nccl.h). The
// signatures are copied from nccl.h; the compiler checks each definition against the header's
// declaration, so a mismatch does not build. The other exports of libnccl.so.2 (the device API's
// host functions of nccl_device/*.h: ncclDevCommCreate, ncclTeam*, ...) are forwarded without
// their signatures by plugin/abi/opaque_forward.S (list: plugin/abi/opaque_api_list.h), and so is
// ncclResetDebugInit, which the nccl.h of NCCL 2.30 declares only under NCCL's own build flag
// (NCCL_OS_LINUX; elsewhere it is an empty macro), so that no declaration of it is needed here.
#pragma once

#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0)
#error "nccl-lamport forwards the NCCL 2.28 API and needs nccl.h from NCCL 2.28 or later"
#endif

// clang-format off
#define NCCL_LAMPORT_FORWARDED_API(X)                                                                          \
  X(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size), (ptr, size))                                        \
  X(ncclResult_t, ncclMemFree, (void* ptr), (ptr))                                                             \
  X(ncclResult_t, ncclGetVersion, (int* version), (version))                                                   \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* uniqueId), (uniqueId))                                       \
  X(const char*, ncclGetErrorString, (ncclResult_t result), (result))                                          \
  X(const char*, ncclGetLastError, (ncclComm_t comm), (comm))                                                  \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count), (comm, count))                           \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device), (comm, device))                      \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank), (comm, rank))                          \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle),           \
    (comm, buff, size, handle))                                                                                \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle), (comm, handle))                   \
  X(ncclResult_t, ncclCommWindowRegister, (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,        \
    int winFlags), (comm, buff, size, win, winFlags))                                                          \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), (comm, win))                  \
  X(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,           \
    ncclScalarResidence_t residence, ncclComm_t comm), (op, scalar, datatype, residence, comm))                \
  X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm))                             \
  X(ncclResult_t, ncclReduce, (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,    \
    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),                                           \
    (sendbuff, recvbuff, count, datatype, op, root, comm, stream))                                             \
  X(ncclResult_t, ncclBcast, (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,    \
    cudaStream_t stream), (buff, count, datatype, root, comm, stream))                                         \
  X(ncclResult_t, ncclBroadcast, (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, \
    int root, ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
  X(ncclResult_t, ncclReduceScatter, (const void* sendbuff, void* recvbuff, size_t recvcount,                  \
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                            \
    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))                                               \
  X(ncclResult_t, ncclAllGather, (const void* sendbuff, void* recvbuff, size_t sendcount,                      \
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),                                            \
    (sendbuff, recvbuff, sendcount, datatype, comm, stream))                                                   \
  X(ncclResult_t, ncclAlltoAll, (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,  \
    ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, count, datatype, comm, stream))                \
  X(ncclResult_t, ncclGather, (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,    \
    int root, ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
  X(ncclResult_t, ncclScatter, (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,   \
    int root, ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream)) \
  X(ncclResult_t, ncclSend, (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,            \
    ncclComm_t comm, cudaStream_t stream), (sendbuff, count, datatype, peer, comm, stream))                    \
  X(ncclResult_t, ncclRecv, (void* recvbuff, size_t count, ncclDataType_t datatype, int peer,                  \
    ncclComm_t comm, cudaStream_t stream), (recvbuff, count, datatype, peer, comm, stream))
// clang-format on
