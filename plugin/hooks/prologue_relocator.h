// Copies the first instructions of a function into a trampoline so that the original function
// can still be called after its entry has been overwritten by a jump (tuner activation).
//
// x86-64 only (capstone decodes instruction boundaries and operands). The copy is rewritten where
// an instruction depends on its own address: RIP-relative memory operands get a new displacement,
// relative jmp/call/jcc become branches to the same absolute target. Anything that cannot be
// moved that way is refused with a reason, and the caller then installs no hook at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nccl_lamport::hooks {

/** Bytes of the entry jump written at the patch site: jmp rel32 to a stub within +-2 GiB. */
constexpr size_t kEntryJumpBytes = 5;

/** Largest trampoline relocatePrologue can produce (endbr64 + 5 relocated instructions of at
 *  most 16 bytes each + a 14-byte absolute jump back), rounded up. */
constexpr size_t kMaxTrampolineBytes = 112;

/** The result of relocating one function's prologue. */
struct RelocatedPrologue {
  /** Where the jump goes, relative to the entry: 4 when the entry starts with endbr64 (kept in
   *  place so indirect calls still land on an end-branch), else 0. */
  size_t patchOffset = 0;
  /** Whole instructions, from the patch site, that the entry jump overwrites (>= jumpBytes). */
  size_t copiedBytes = 0;
  /** The trampoline: [endbr64] + the copied instructions, relocated + a jump back to
   *  entry + patchOffset + copiedBytes. Valid only at the trampolineAddress it was built for. */
  std::vector<uint8_t> code;
};

/**
 * Builds the trampoline for the function whose first `available` bytes are `code`, loaded at
 * entryAddress, for a trampoline placed at trampolineAddress and an entry jump of jumpBytes.
 * Also scans up to scanBytes past the copied range (when available) and refuses if a relative
 * branch there lands strictly inside the bytes the jump overwrites.
 *
 * Returns false, with a short reason in *why, for: undecodable bytes; a return, trap or
 * unconditional jump inside the overwritten range (the function is shorter than the jump);
 * jrcxz/loop; a branch into the overwritten range; a RIP-relative displacement that no longer
 * fits in 32 bits at the trampoline.
 */
bool relocatePrologue(const uint8_t* code, size_t available, uint64_t entryAddress,
                      uint64_t trampolineAddress, size_t jumpBytes, RelocatedPrologue* out,
                      std::string* why, size_t scanBytes = 128);

/** Appends an x86-64 jump from `from` (the address the jump is placed at) to `to`: jmp rel32
 *  when the distance fits, else jmp [rip+0] followed by the 8-byte address. */
void appendJump(std::vector<uint8_t>* code, uint64_t from, uint64_t to);

}  // namespace nccl_lamport::hooks
