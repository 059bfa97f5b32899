#include "plugin/transport/cuda_driver.h"

#include <cuda_runtime_api.h>

#include "common/log.h"

namespace nccl_lamport {

namespace {

// 12.0 is the oldest driver ABI whose VMM entry points we rely on.
constexpr unsigned int kDriverAbiVersion = 12000;

template <typename Fn>
bool load(const char* symbol, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, kDriverAbiVersion, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == nullptr) {
    LAMPORT_WARN("CUDA driver entry point %s unavailable (%s)", symbol, cudaGetErrorString(err));
    return false;
  }
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

}  // namespace

const DriverApi* driverApi() {
  static const DriverApi* api = []() -> const DriverApi* {
    static DriverApi table{};
    bool ok = load("cuMemCreate", &table.memCreate) && load("cuMemRelease", &table.memRelease) &&
              load("cuMemAddressReserve", &table.memAddressReserve) &&
              load("cuMemAddressFree", &table.memAddressFree) && load("cuMemMap", &table.memMap) &&
              load("cuMemUnmap", &table.memUnmap) && load("cuMemSetAccess", &table.memSetAccess) &&
              load("cuMemGetAllocationGranularity", &table.memGetAllocationGranularity) &&
              load("cuMemExportToShareableHandle", &table.memExportToShareableHandle) &&
              load("cuMemImportFromShareableHandle", &table.memImportFromShareableHandle) &&
              load("cuDeviceGetAttribute", &table.deviceGetAttribute) &&
              load("cuGetErrorString", &table.getErrorString) && load("cuCtxGetDevice", &table.ctxGetDevice);
    return ok ? &table : nullptr;
  }();
  return api;
}

const char* driverErrorString(CUresult result) {
  const char* text = nullptr;
  const DriverApi* api = driverApi();
  if (api != nullptr && api->getErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) return text;
  return "unknown CUDA driver error";
}

}  // namespace nccl_lamport
