// The NVTX range of an allreduce we take (see allreduce_nvtx.h).
#include "plugin/interpose/allreduce_nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include <cerrno>
#include <cstdlib>

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
  // NCCL_PARAM(NvtxDisable, ..., 0): empty or out of range keeps the default (on).
  if (value == nullptr || *value == '\0') return false;
  errno = 0;
  const long long disable = strtoll(value, nullptr, 0);
  return errno == 0 && disable != 0;
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
