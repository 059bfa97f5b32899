// Which GPUs of this host talk over NVLink with P2P access (docs/design.md, "Workspace"). Uses
// NVML, loaded with dlopen at run time (no DT_NEEDED), because NVML sees every GPU whatever
// CUDA_VISIBLE_DEVICES says; falls back to CUDA's P2P attributes when NVML cannot be loaded.
#pragma once

#include <string>

namespace nccl_lamport {

/** Identity of a GPU that is the same in every process of the host. */
struct GpuIdentity {
  char busId[32];  // PCI bus id as "0000:1a:00.0" (lower case; normalizeBusId's form)
};

/** Fills *id for CUDA device cudaDev of this process. False on a CUDA error. */
bool localGpuIdentity(int cudaDev, GpuIdentity* id);

/**
 * Parses a PCI bus id as CUDA, NVML or sysfs print it and writes the canonical form used in
 * GpuIdentity::busId: lower-case hex "dddd:bb:dd.f" (domain at least 4 digits, wider only when
 * the domain needs it). Accepted inputs, any case, surrounding blanks ignored:
 *   "0000:1A:00.0" (CUDA), "00000000:1A:00.0" (NVML busId), "1a:00.0" (no domain: 0),
 *   "0:1a:0" (no function: 0). So CUDA's and NVML's spellings of one GPU compare equal.
 * False (and *out cleared) for anything else or out-of-range fields (bus > 0xff, device > 0x1f,
 * function > 7, domain > 0xffffffff). Pure function; no CUDA, no NVML.
 */
bool normalizeBusId(const std::string& in, std::string* out);

enum class LinkCheck { kNvlinkP2p, kNotNvlink, kUnknown };

/**
 * Whether the GPUs at busIdA and busIdB (both on this host) are joined by NVLink and can do P2P
 * reads and writes. *why gets a short reason for anything but kNvlinkP2p. Thread-safe.
 */
LinkCheck checkNvlinkP2p(const std::string& busIdA, const std::string& busIdB, std::string* why);

}  // namespace nccl_lamport
