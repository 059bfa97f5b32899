#include "plugin/hooks/prologue_relocator.h"

#include <cstring>

#if defined(__x86_64__) && defined(NCCL_LAMPORT_HAVE_CAPSTONE)
#include <capstone/capstone.h>
#endif

namespace nccl_lamport::hooks {

namespace {

bool fitsRel32(int64_t distance) { return distance >= INT32_MIN && distance <= INT32_MAX; }

void appendBytes(std::vector<uint8_t>* code, const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  code->insert(code->end(), p, p + n);
}

void appendRel32(std::vector<uint8_t>* code, int64_t value) {
  const int32_t rel = static_cast<int32_t>(value);
  appendBytes(code, &rel, sizeof(rel));
}

}  // namespace

void appendJump(std::vector<uint8_t>* code, uint64_t from, uint64_t to) {
  const int64_t distance = static_cast<int64_t>(to - (from + 5));
  if (fitsRel32(distance)) {
    code->push_back(0xE9);
    appendRel32(code, distance);
    return;
  }
  const uint8_t indirect[] = {0xFF, 0x25, 0, 0, 0, 0};  // jmp qword ptr [rip+0]
  appendBytes(code, indirect, sizeof(indirect));
  appendBytes(code, &to, sizeof(to));
}

#if defined(__x86_64__) && defined(NCCL_LAMPORT_HAVE_CAPSTONE)

namespace {

constexpr uint8_t kEndbr64[] = {0xF3, 0x0F, 0x1E, 0xFA};

// A call to an absolute address that works at any distance: call [rip+2]; jmp +8; .quad target.
// The return address is the short jump, which steps over the address.
void appendCall(std::vector<uint8_t>* code, uint64_t from, uint64_t to) {
  const int64_t distance = static_cast<int64_t>(to - (from + 5));
  if (fitsRel32(distance)) {
    code->push_back(0xE8);
    appendRel32(code, distance);
    return;
  }
  const uint8_t indirect[] = {0xFF, 0x15, 2, 0, 0, 0, 0xEB, 0x08};
  appendBytes(code, indirect, sizeof(indirect));
  appendBytes(code, &to, sizeof(to));
}

// jcc with condition nibble cc to `to`: jcc rel32 when it fits, else the inverted short jcc over
// an absolute jump.
void appendConditionalJump(std::vector<uint8_t>* code, uint64_t from, uint64_t to, uint8_t cc) {
  const int64_t distance = static_cast<int64_t>(to - (from + 6));
  if (fitsRel32(distance)) {
    code->push_back(0x0F);
    code->push_back(static_cast<uint8_t>(0x80 | cc));
    appendRel32(code, distance);
    return;
  }
  code->push_back(static_cast<uint8_t>(0x70 | (cc ^ 1)));  // inverted condition, skip 14 bytes
  code->push_back(14);
  const uint8_t indirect[] = {0xFF, 0x25, 0, 0, 0, 0};
  appendBytes(code, indirect, sizeof(indirect));
  appendBytes(code, &to, sizeof(to));
}

struct Capstone {
  csh handle = 0;
  bool ok = false;
  Capstone() {
    ok = cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK &&
         cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON) == CS_ERR_OK;
  }
  ~Capstone() {
    if (handle != 0) cs_close(&handle);
  }
};

// The absolute target of a relative branch (capstone reports it as the immediate operand), or
// false when the instruction has no immediate target (an indirect branch).
bool branchTarget(const cs_insn& insn, uint64_t* target) {
  const cs_x86& x86 = insn.detail->x86;
  if (x86.op_count != 1 || x86.operands[0].type != X86_OP_IMM) return false;
  *target = static_cast<uint64_t>(x86.operands[0].imm);
  return true;
}

bool isRelativeBranch(csh handle, const cs_insn& insn) {
  uint64_t target = 0;
  return (cs_insn_group(handle, &insn, CS_GRP_JUMP) || cs_insn_group(handle, &insn, CS_GRP_CALL)) &&
         branchTarget(insn, &target);
}

// Conditional-jump condition nibble from the encoding (0x7X rel8 or 0x0F 0x8X rel32).
bool conditionCode(const cs_insn& insn, uint8_t* cc) {
  const uint8_t* b = insn.bytes;
  if (insn.size == 2 && (b[0] & 0xF0) == 0x70) {
    *cc = b[0] & 0x0F;
    return true;
  }
  if (insn.size == 6 && b[0] == 0x0F && (b[1] & 0xF0) == 0x80) {
    *cc = b[1] & 0x0F;
    return true;
  }
  return false;
}

bool usesRipRelativeMemory(const cs_insn& insn) {
  const cs_x86& x86 = insn.detail->x86;
  for (int i = 0; i < x86.op_count; ++i) {
    if (x86.operands[i].type == X86_OP_MEM && x86.operands[i].mem.base == X86_REG_RIP) return true;
  }
  return false;
}

// Appends one copied instruction, rewritten for its new address `at`.
bool relocateInstruction(csh handle, const cs_insn& insn, uint64_t at, uint64_t rangeStart,
                         uint64_t rangeEnd, std::vector<uint8_t>* code, std::string* why) {
  const bool jump = cs_insn_group(handle, &insn, CS_GRP_JUMP);
  const bool call = cs_insn_group(handle, &insn, CS_GRP_CALL);
  uint64_t target = 0;
  if ((jump || call) && branchTarget(insn, &target)) {
    if (target > rangeStart && target < rangeEnd) {
      *why = "a branch into the bytes the entry jump overwrites";
      return false;
    }
    if (call) {
      appendCall(code, at, target);
      return true;
    }
    if (insn.id == X86_INS_JMP) {
      appendJump(code, at, target);
      return true;
    }
    uint8_t cc = 0;
    if (!conditionCode(insn, &cc)) {
      *why = std::string("'") + insn.mnemonic + "' cannot be relocated";  // jrcxz, loop*
      return false;
    }
    appendConditionalJump(code, at, target, cc);
    return true;
  }
  if (usesRipRelativeMemory(insn)) {
    const cs_x86_encoding& enc = insn.detail->x86.encoding;
    if (enc.disp_offset == 0 || enc.disp_size != 4) {
      *why = std::string("'") + insn.mnemonic + "' has a RIP-relative operand of unknown encoding";
      return false;
    }
    int32_t disp = 0;
    std::memcpy(&disp, insn.bytes + enc.disp_offset, sizeof(disp));
    const uint64_t absolute = insn.address + insn.size + static_cast<int64_t>(disp);
    const int64_t moved = static_cast<int64_t>(absolute - (at + insn.size));
    if (!fitsRel32(moved)) {
      *why = "a RIP-relative operand out of 32-bit reach of the trampoline";
      return false;
    }
    const size_t start = code->size();
    appendBytes(code, insn.bytes, insn.size);
    const int32_t rel = static_cast<int32_t>(moved);
    std::memcpy(code->data() + start + enc.disp_offset, &rel, sizeof(rel));
    return true;
  }
  appendBytes(code, insn.bytes, insn.size);
  return true;
}

// True when this instruction ends the function's straight-line flow (ret, trap, jmp).
bool endsFlow(csh handle, const cs_insn& insn) {
  return cs_insn_group(handle, &insn, CS_GRP_RET) || cs_insn_group(handle, &insn, CS_GRP_IRET) ||
         insn.id == X86_INS_JMP || insn.id == X86_INS_INT3 || insn.id == X86_INS_UD2 ||
         insn.id == X86_INS_HLT;
}

}  // namespace

bool relocatePrologue(const uint8_t* code, size_t available, uint64_t entryAddress,
                      uint64_t trampolineAddress, size_t jumpBytes, RelocatedPrologue* out,
                      std::string* why, size_t scanBytes) {
  *out = RelocatedPrologue();
  Capstone cs;
  if (!cs.ok) {
    *why = "the disassembler did not start";
    return false;
  }
  const bool endbr = available >= sizeof(kEndbr64) && std::memcmp(code, kEndbr64, sizeof(kEndbr64)) == 0;
  out->patchOffset = endbr ? sizeof(kEndbr64) : 0;
  if (endbr) appendBytes(&out->code, kEndbr64, sizeof(kEndbr64));

  const uint8_t* site = code + out->patchOffset;
  const uint64_t siteAddress = entryAddress + out->patchOffset;
  size_t remaining = available - out->patchOffset;
  const uint64_t rangeEnd = siteAddress + jumpBytes;  // conservative until copiedBytes is known

  cs_insn* insn = cs_malloc(cs.handle);
  const uint8_t* cursor = site;
  uint64_t address = siteAddress;
  bool ok = true;
  // Phase 1: whole instructions until the jump fits.
  while (ok && out->copiedBytes < jumpBytes) {
    if (!cs_disasm_iter(cs.handle, &cursor, &remaining, &address, insn)) {
      *why = "undecodable bytes in the entry";
      ok = false;
      break;
    }
    // A branch among the copied instructions that ends the flow is fine only as the last one.
    const bool last = out->copiedBytes + insn->size >= jumpBytes;
    if (endsFlow(cs.handle, *insn) && !(last && isRelativeBranch(cs.handle, *insn))) {
      *why = std::string("the function ends ('") + insn->mnemonic + "') before the entry jump does";
      ok = false;
      break;
    }
    const uint64_t at = trampolineAddress + out->code.size();
    ok = relocateInstruction(cs.handle, *insn, at, siteAddress, rangeEnd, &out->code, why);
    out->copiedBytes += insn->size;
  }
  const uint64_t copiedEnd = siteAddress + out->copiedBytes;
  if (ok) appendJump(&out->code, trampolineAddress + out->code.size(), copiedEnd);
  // Phase 2: nothing later in the function may branch back into the overwritten bytes.
  size_t scanned = 0;
  while (ok && scanned < scanBytes && cs_disasm_iter(cs.handle, &cursor, &remaining, &address, insn)) {
    scanned += insn->size;
    uint64_t target = 0;
    if (isRelativeBranch(cs.handle, *insn) && branchTarget(*insn, &target) && target > siteAddress &&
        target < copiedEnd) {
      *why = "a later branch into the bytes the entry jump overwrites";
      ok = false;
    }
  }
  cs_free(insn, 1);
  if (ok && out->code.size() > kMaxTrampolineBytes) {
    *why = "the relocated prologue is too long";
    ok = false;
  }
  if (!ok) out->code.clear();
  return ok;
}

#else  // not x86-64

bool relocatePrologue(const uint8_t*, size_t, uint64_t, uint64_t, size_t, RelocatedPrologue* out,
                      std::string* why, size_t) {
  // aarch64: only a single B is safe to write while other threads run (+-128 MiB reach), and an
  // NCCL built with branch-target identification would trap on the jump back. Not done yet.
  *out = RelocatedPrologue();
  *why = "entry hooks are implemented for x86-64 (with capstone) only";
  return false;
}

#endif

}  // namespace nccl_lamport::hooks
