#include "plugin/transport/peer_memory.h"

#include <cstdint>

#include "plugin/transport/cuda_driver.h"
#include "common/log.h"

namespace nccl_lamport {

namespace {

CUmemAllocationHandleType driverHandleType(PeerHandleType type) {
  return type == PeerHandleType::kFabric ? CU_MEM_HANDLE_TYPE_FABRIC
                                         : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

CUmemAllocationProp allocationProp(int cudaDev, PeerHandleType type) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cudaDev;
  prop.requestedHandleTypes = driverHandleType(type);
  return prop;
}

bool check(CUresult result, const char* what, std::string* why) {
  if (result == CUDA_SUCCESS) return true;
  if (why != nullptr) *why = std::string(what) + ": " + driverErrorString(result);
  return false;
}

// Reserves VA for `size` bytes, maps `handle` there and grants cudaDev read-write access.
bool mapAt(const DriverApi& api, CUmemGenericAllocationHandle handle, size_t size, int cudaDev,
           CUdeviceptr* va, std::string* why) {
  if (!check(api.memAddressReserve(va, size, 0, 0, 0), "cuMemAddressReserve", why)) return false;
  if (!check(api.memMap(*va, size, 0, handle, 0), "cuMemMap", why)) {
    api.memAddressFree(*va, size);
    *va = 0;
    return false;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cudaDev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (!check(api.memSetAccess(*va, size, &access, 1), "cuMemSetAccess", why)) {
    api.memUnmap(*va, size);
    api.memAddressFree(*va, size);
    *va = 0;
    return false;
  }
  return true;
}

}  // namespace

bool deviceSupportsPeerMemory(int cudaDev, PeerHandleType type, std::string* why) {
  const DriverApi* api = driverApi();
  if (api == nullptr) {
    *why = "CUDA driver lacks the VMM entry points";
    return false;
  }
  int vmm = 0;
  if (!check(api->deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cudaDev),
             "cuDeviceGetAttribute(VMM)", why)) {
    return false;
  }
  if (vmm == 0) {
    *why = "device does not support CUDA virtual memory management";
    return false;
  }
  const CUdevice_attribute handleAttr = type == PeerHandleType::kFabric
                                            ? CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
                                            : CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED;
  int supported = 0;
  if (!check(api->deviceGetAttribute(&supported, handleAttr, cudaDev), "cuDeviceGetAttribute(handle type)", why)) {
    return false;
  }
  if (supported == 0) {
    *why = type == PeerHandleType::kFabric ? "device cannot export FABRIC handles"
                                           : "device cannot export POSIX file descriptor handles";
    return false;
  }
  return true;
}

LocalAllocation::~LocalAllocation() { release(); }

bool LocalAllocation::create(int cudaDev, size_t bytes, PeerHandleType type, std::string* why) {
  const DriverApi* api = driverApi();
  if (api == nullptr) {
    *why = "CUDA driver lacks the VMM entry points";
    return false;
  }
  const CUmemAllocationProp prop = allocationProp(cudaDev, type);
  size_t granularity = 0;
  if (!check(api->memGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
             "cuMemGetAllocationGranularity", why)) {
    return false;
  }
  size_ = (bytes + granularity - 1) / granularity * granularity;
  if (!check(api->memCreate(&handle_, size_, &prop, 0), "cuMemCreate", why)) {
    handle_ = 0;
    size_ = 0;
    return false;
  }
  if (!mapAt(*api, handle_, size_, cudaDev, &va_, why)) {
    api->memRelease(handle_);
    handle_ = 0;
    size_ = 0;
    return false;
  }
  mapped_ = true;
  return true;
}

int LocalAllocation::exportFd() const {
  const DriverApi* api = driverApi();
  if (api == nullptr || !mapped_) return -1;
  int fd = -1;
  CUresult result = api->memExportToShareableHandle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (result != CUDA_SUCCESS) {
    LAMPORT_WARN("cuMemExportToShareableHandle failed: %s", driverErrorString(result));
    return -1;
  }
  return fd;
}

void LocalAllocation::release() {
  const DriverApi* api = driverApi();
  if (api == nullptr) return;
  if (mapped_) {
    api->memUnmap(va_, size_);
    api->memAddressFree(va_, size_);
    mapped_ = false;
  }
  if (handle_ != 0) {
    api->memRelease(handle_);
    handle_ = 0;
  }
  va_ = 0;
  size_ = 0;
}

PeerMapping::~PeerMapping() { release(); }

bool PeerMapping::mapHandle(CUmemGenericAllocationHandle handle, size_t size, int cudaDev, std::string* why) {
  const DriverApi* api = driverApi();
  if (api == nullptr) {
    *why = "CUDA driver lacks the VMM entry points";
    return false;
  }
  if (!mapAt(*api, handle, size, cudaDev, &va_, why)) return false;
  size_ = size;
  mapped_ = true;
  return true;
}

bool PeerMapping::mapFd(int fd, size_t size, int cudaDev, std::string* why) {
  const DriverApi* api = driverApi();
  if (api == nullptr) {
    *why = "CUDA driver lacks the VMM entry points";
    return false;
  }
  CUmemGenericAllocationHandle handle = 0;
  if (!check(api->memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             "cuMemImportFromShareableHandle", why)) {
    return false;
  }
  const bool ok = mapAt(*api, handle, size, cudaDev, &va_, why);
  // The mapping holds the memory; our reference to the imported handle is no longer needed.
  api->memRelease(handle);
  if (!ok) return false;
  size_ = size;
  mapped_ = true;
  return true;
}

void PeerMapping::release() {
  const DriverApi* api = driverApi();
  if (api == nullptr || !mapped_) return;
  api->memUnmap(va_, size_);
  api->memAddressFree(va_, size_);
  mapped_ = false;
  va_ = 0;
  size_ = 0;
}

}  // namespace nccl_lamport
