// plugin/hooks/prologue_relocator on byte strings at chosen addresses: what the trampoline holds
// for each position-dependent instruction, and which prologues are refused.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/hooks/prologue_relocator.h"

using nccl_lamport::hooks::kEntryJumpBytes;
using nccl_lamport::hooks::RelocatedPrologue;
using nccl_lamport::hooks::relocatePrologue;

namespace {

int32_t rel32At(const std::vector<uint8_t>& code, size_t offset) {
  int32_t v = 0;
  std::memcpy(&v, code.data() + offset, sizeof(v));
  return v;
}

uint64_t u64At(const std::vector<uint8_t>& code, size_t offset) {
  uint64_t v = 0;
  std::memcpy(&v, code.data() + offset, sizeof(v));
  return v;
}

TEST(PrologueRelocator, RipRelativeLeaGetsANewDisplacement) {
  // lea rax, [rip+0x100]; ret
  const std::vector<uint8_t> fn = {0x48, 0x8D, 0x05, 0x00, 0x01, 0x00, 0x00, 0xC3};
  RelocatedPrologue out;
  std::string why;
  ASSERT_TRUE(relocatePrologue(fn.data(), fn.size(), 0x10000, 0x20000, kEntryJumpBytes, &out, &why)) << why;
  EXPECT_EQ(out.patchOffset, 0u);
  EXPECT_EQ(out.copiedBytes, 7u);
  ASSERT_EQ(out.code.size(), 7u + 5u);
  EXPECT_EQ(out.code[0], 0x48);
  EXPECT_EQ(out.code[2], 0x05);
  // Same absolute operand: 0x10000 + 7 + 0x100 == 0x20000 + 7 + disp.
  EXPECT_EQ(0x20000 + 7 + static_cast<int64_t>(rel32At(out.code, 3)), 0x10000 + 7 + 0x100);
  EXPECT_EQ(out.code[7], 0xE9);  // back to the instruction after the copy
  EXPECT_EQ(0x20000 + 12 + static_cast<int64_t>(rel32At(out.code, 8)), 0x10007);
}

TEST(PrologueRelocator, EarlyCallBecomesAnAbsoluteCallWhenFar) {
  // push rbx; mov ebx, edi; call +0x40; pop rbx; ret
  const std::vector<uint8_t> fn = {0x53, 0x89, 0xFB, 0xE8, 0x40, 0x00, 0x00, 0x00, 0x5B, 0xC3};
  const uint64_t entry = 0x7f0000000000ull;
  RelocatedPrologue out;
  std::string why;
  ASSERT_TRUE(relocatePrologue(fn.data(), fn.size(), entry, 0x1000, kEntryJumpBytes, &out, &why)) << why;
  EXPECT_EQ(out.copiedBytes, 8u);
  ASSERT_GE(out.code.size(), 3u + 16u + 14u);
  EXPECT_EQ(out.code[0], 0x53);
  EXPECT_EQ(out.code[3], 0xFF);  // call [rip+2]; jmp +8; .quad target
  EXPECT_EQ(out.code[4], 0x15);
  EXPECT_EQ(out.code[9], 0xEB);
  EXPECT_EQ(u64At(out.code, 11), entry + 8 + 0x40);
  EXPECT_EQ(out.code[19], 0xFF);  // jmp [rip]; .quad entry+8
  EXPECT_EQ(u64At(out.code, 25), entry + 8);
}

TEST(PrologueRelocator, Endbr64StaysAtTheEntryAndStartsTheTrampoline) {
  // endbr64; push rbp; mov rbp, rsp; sub rsp, 16; leave; ret
  const std::vector<uint8_t> fn = {0xF3, 0x0F, 0x1E, 0xFA, 0x55, 0x48, 0x89, 0xE5,
                                   0x48, 0x83, 0xEC, 0x10, 0xC9, 0xC3};
  RelocatedPrologue out;
  std::string why;
  ASSERT_TRUE(relocatePrologue(fn.data(), fn.size(), 0x4000, 0x5000, kEntryJumpBytes, &out, &why)) << why;
  EXPECT_EQ(out.patchOffset, 4u);
  EXPECT_EQ(out.copiedBytes, 8u);  // push (1) + mov (3) + sub (4)
  EXPECT_EQ(std::vector<uint8_t>(out.code.begin(), out.code.begin() + 4), std::vector<uint8_t>({0xF3, 0x0F, 0x1E, 0xFA}));
}

TEST(PrologueRelocator, ShortConditionalJumpBecomesNear) {
  // test edi, edi; jz +0x10; ... ret
  std::vector<uint8_t> fn = {0x85, 0xFF, 0x74, 0x10, 0x8D, 0x47, 0x05, 0xC3};
  fn.resize(0x20, 0x90);
  RelocatedPrologue out;
  std::string why;
  ASSERT_TRUE(relocatePrologue(fn.data(), fn.size(), 0x8000, 0x9000, kEntryJumpBytes, &out, &why)) << why;
  EXPECT_EQ(out.copiedBytes, 7u);
  EXPECT_EQ(out.code[2], 0x0F);
  EXPECT_EQ(out.code[3], 0x84);  // jz rel32
  EXPECT_EQ(0x9000 + 8 + static_cast<int64_t>(rel32At(out.code, 4)), 0x8000 + 4 + 0x10);
}

TEST(PrologueRelocator, RefusesWhatCannotMove) {
  RelocatedPrologue out;
  std::string why;
  const std::vector<uint8_t> tiny = {0x89, 0xF8, 0xC3, 0x90, 0x90, 0x90, 0x90};  // mov eax, edi; ret
  EXPECT_FALSE(relocatePrologue(tiny.data(), tiny.size(), 0x1000, 0x2000, kEntryJumpBytes, &out, &why));
  EXPECT_NE(why.find("ends"), std::string::npos) << why;
  // lea rax, [rip+0x100] with the trampoline 3 GiB away: the displacement no longer fits.
  const std::vector<uint8_t> lea = {0x48, 0x8D, 0x05, 0x00, 0x01, 0x00, 0x00, 0xC3};
  EXPECT_FALSE(relocatePrologue(lea.data(), lea.size(), 0x1000, 0xC0001000ull, kEntryJumpBytes, &out, &why));
  EXPECT_NE(why.find("RIP-relative"), std::string::npos) << why;
  // mov eax, edi; L: dec eax; jg L; ret  (a later branch to entry+2)
  const std::vector<uint8_t> loop = {0x89, 0xF8, 0xFF, 0xC8, 0x7F, 0xFC, 0xC3, 0x90};
  EXPECT_FALSE(relocatePrologue(loop.data(), loop.size(), 0x1000, 0x2000, kEntryJumpBytes, &out, &why));
  EXPECT_NE(why.find("branch into"), std::string::npos) << why;
  // jrcxz +2 inside the copied bytes.
  const std::vector<uint8_t> jrcxz = {0xE3, 0x02, 0x90, 0x90, 0x90, 0x90, 0xC3};
  EXPECT_FALSE(relocatePrologue(jrcxz.data(), jrcxz.size(), 0x1000, 0x2000, kEntryJumpBytes, &out, &why));
  EXPECT_TRUE(out.code.empty());
}

}  // namespace
