// CUDA driver entry points for virtual memory management, obtained through the runtime's
// cudaGetDriverEntryPointByVersion so the object has no DT_NEEDED on libcuda
// (docs/loading.md, "Run-time dependencies").
#pragma once

#include <cuda.h>

namespace nccl_lamport {

/** The driver functions we use; every pointer is non-null when driverApi() returns non-null. */
struct DriverApi {
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                        unsigned long long);
  CUresult (*memRelease)(CUmemGenericAllocationHandle);
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*memAddressFree)(CUdeviceptr, size_t);
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*memUnmap)(CUdeviceptr, size_t);
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*memGetAllocationGranularity)(size_t*, const CUmemAllocationProp*,
                                          CUmemAllocationGranularity_flags);
  CUresult (*memExportToShareableHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                         unsigned long long);
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
  CUresult (*deviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*getErrorString)(CUresult, const char**);
  /** The device of the calling thread's current context (tuner activation: the context NCCL's
   *  init thread made current, whichever CUDA runtime instance made it). */
  CUresult (*ctxGetDevice)(CUdevice*);
};

/** The table, resolved once (thread-safe); null if the driver lacks any of them (WARN once). */
const DriverApi* driverApi();

/** Text for a driver error code, for log lines. */
const char* driverErrorString(CUresult result);

}  // namespace nccl_lamport
