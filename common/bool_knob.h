/* The one parser of boolean knobs (every knob of kind Switch or Bool in common/knobs.h). Plain C,
 * header only: the LD_AUDIT module (plugin/loader/ld_audit.c) runs in the loader's audit
 * namespace with libc only and cannot link common/, yet must read its switch exactly as the
 * plugin does. */
#ifndef NCCL_LAMPORT_COMMON_BOOL_KNOB_H_
#define NCCL_LAMPORT_COMMON_BOOL_KNOB_H_

#include <strings.h>

/* Accepts the spellings users type, in any case: 1/true/yes/on and 0/false/no/off. Returns 1 and
 * sets *value (0 or 1) when text is one of them; returns 0 and leaves *value alone otherwise
 * (null, empty, anything else: the caller decides what an unknown value means). */
static inline int lamportParseBool(const char* text, int* value) {
  static const char* const kOn[] = {"1", "true", "yes", "on"};
  static const char* const kOff[] = {"0", "false", "no", "off"};
  unsigned i;
  if (text == 0) return 0;
  for (i = 0; i < sizeof(kOn) / sizeof(kOn[0]); ++i) {
    if (strcasecmp(text, kOn[i]) == 0) {
      *value = 1;
      return 1;
    }
    if (strcasecmp(text, kOff[i]) == 0) {
      *value = 0;
      return 1;
    }
  }
  return 0;
}

#endif /* NCCL_LAMPORT_COMMON_BOOL_KNOB_H_ */
