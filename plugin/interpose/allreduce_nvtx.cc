// The NVTX range of an allreduce we take (see allreduce_nvtx.h).
#include "plugin/interpose/allreduce_nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include <cstdlib>

#include "plugin/comm/nccl_settings.h"  // ncclIntegerParameter

namespace nccl_lamport {

namespace {

/** NCCL's domain and the registered name of its range; created at the first range. */
struct NcclNvtxNames {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("NCCL");
  nvtxStringHandle_t allReduce = nvtxDomainRegisterStringA(domain, "ncclAllReduce");
};

const NcclNvtxNames& names() {
  static const NcclNvtxNames instance;
  return instance;
}

}  // namespace

bool nvtxDisabledBy(const char* value) {
  long long disable = 0;  // NCCL_PARAM(NvtxDisable, ..., 0): not set keeps the default (on)
  return ncclIntegerParameter(value, &disable) && disable != 0;
}

AllReduceNvtxRange::AllReduceNvtxRange() {
  static const bool disabled = nvtxDisabledBy(getenv("NCCL_NVTX_DISABLE"));
  if (disabled) return;
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = names().allReduce;
  nvtxDomainRangePushEx(names().domain, &attributes);
  open_ = true;
}

AllReduceNvtxRange::~AllReduceNvtxRange() {
  if (open_) nvtxDomainRangePop(names().domain);
}

}  // namespace nccl_lamport
