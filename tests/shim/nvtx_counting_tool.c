/* A stand-in NVTX tool (loaded by NVTX through NVTX_INJECTION64_PATH, as Nsight Systems is): it
 * counts the ranges opened in domain "NCCL" with the registered message "ncclAllReduce", and the
 * ranges of that domain still open. Read through stubNvtxAllReduceRanges / stubNvtxOpenRanges
 * (dlopen the same path with RTLD_NOLOAD). Only the four callbacks the plugin's range uses are
 * filled in; NVTX leaves every other one a no-op. */
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

struct nvtxDomainRegistration_st {
  char name[64];
};
struct nvtxStringRegistration_st {
  char text[64];
};

static int gAllReduceRanges;
static int gOpenRanges;

static int isNccl(nvtxDomainHandle_t domain) { return domain != NULL && strcmp(domain->name, "NCCL") == 0; }

static nvtxDomainHandle_t NVTX_API domainCreate(const char* name) {
  nvtxDomainHandle_t domain = calloc(1, sizeof(*domain));
  if (domain != NULL) strncpy(domain->name, name, sizeof(domain->name) - 1);
  return domain;
}

static nvtxStringHandle_t NVTX_API registerString(nvtxDomainHandle_t domain, const char* text) {
  (void)domain;
  nvtxStringHandle_t string = calloc(1, sizeof(*string));
  if (string != NULL) strncpy(string->text, text, sizeof(string->text) - 1);
  return string;
}

static int NVTX_API rangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  if (!isNccl(domain)) return 0;
  ++gOpenRanges;
  if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED && attributes->message.registered != NULL &&
      strcmp(attributes->message.registered->text, "ncclAllReduce") == 0) {
    ++gAllReduceRanges;
  }
  return gOpenRanges - 1;
}

static int NVTX_API rangePop(nvtxDomainHandle_t domain) {
  if (isNccl(domain)) --gOpenRanges;
  return gOpenRanges;
}

__attribute__((visibility("default"))) int stubNvtxAllReduceRanges(void) { return gAllReduceRanges; }
__attribute__((visibility("default"))) int stubNvtxOpenRanges(void) { return gOpenRanges; }

__attribute__((visibility("default"))) int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
  const NvtxExportTableCallbacks* callbacks = (const NvtxExportTableCallbacks*)getExportTable(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (callbacks == NULL || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA) {
    return 0;
  }
  *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domainCreate;
  *table[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)registerString;
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)rangePushEx;
  *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)rangePop;
  return 1;
}
