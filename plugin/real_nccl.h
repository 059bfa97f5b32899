// The real NCCL functions, found at run time (SPEC 4.1): we never link libnccl, so the NCCL that
// runs is the one the application loaded.
//
// Each entry is resolved on first use, in this order: dlsym(RTLD_NEXT, "pncclX"), dlsym(RTLD_DEFAULT,
// "pncclX"), the already-loaded "libnccl.so.2" (dlopen RTLD_NOLOAD: PyTorch loads NCCL into a local
// scope where only this finds it), then NCCL_LAMPORT_NCCL_PATH. A library without the profiling
// aliases (NCCL < 2.16.2) is used through its plain "ncclX" names, looked up by handle only, so
// we never find our own wrappers.
#pragma once

#include <nccl.h>

namespace nccl_lamport {

/** Returns the address of the real NCCL function `name` (plain name, e.g. "ncclAllReduce"), or
 *  null if the loaded NCCL does not have it. Thread-safe; the first call may dlopen. */
void* resolveRealNccl(const char* name);


/** NCCL's text for a result code, through the real ncclGetErrorString when there is one. */
const char* ncclErrorText(ncclResult_t result);

}  // namespace nccl_lamport

// Resolves once per call site (a function-local static), then costs one load.
#define REAL_NCCL(fname)                                                                      \
  ([]() -> decltype(&::fname) {                                                               \
    static decltype(&::fname) cached =                                                        \
        reinterpret_cast<decltype(&::fname)>(::nccl_lamport::resolveRealNccl(#fname));        \
    return cached;                                                                            \
  }())
