/* Signature-agnostic forwarders for the NCCL exports of plugin/abi/opaque_api_list.h (the device
 * API's host functions and ncclResetDebugInitInternal).
 *
 * Why assembly: we must export these names (a program linked against the real libnccl.so.2 fails
 * to load under LD_AUDIT without them) but must not depend on their C++ signatures (ncclTeam by
 * value, types that change between releases, one function declared nowhere). A tail jump passes
 * every argument register, stack argument and return value through untouched, whatever they are.
 *
 * Per function (fast path): load its slot of nccl_lamport_opaque_real (opaque_forward.cc), and if
 * set jump to it. First call (slow path): save every register that can carry an argument, call
 * nccl_lamport_resolve_opaque(index) (C++: resolves the real function, or a fallback stub that
 * returns the documented value, and fills the slot), restore, and jump to what it returned. The
 * return address stays the caller's, so the real function returns straight to the caller.
 *
 * Saved around the resolver: x86-64 SysV rdi, rsi, rdx, rcx, r8, r9 (arguments), rax (number of
 * vector registers of a varargs call), r10 (static chain), xmm0-xmm7; aarch64 x0-x7, x8 (address
 * of a returned struct), q0-q7, x29/x30. Not saved: the upper halves of ymm/zmm registers (no NCCL
 * function takes AVX vectors; the resolver may run vzeroupper inside libc). Scratch: r11 on
 * x86-64, x16/x17 on aarch64, which the ABIs leave to call veneers and PLT stubs anyway.
 * On other architectures this file defines nothing: those names are then not exported (the
 * linker ignores names of exports.map that are not defined) and the resolver is unused. */
#include "plugin/abi/opaque_api_list.h"

#if defined(__x86_64__)

#if defined(__CET__)
#include <cet.h> /* _CET_ENDBR, and the IBT/SHSTK property note when CET is on */
#else
#define _CET_ENDBR
#endif

        .hidden nccl_lamport_opaque_real
        .hidden nccl_lamport_resolve_opaque
        .text

        .macro NCCL_LAMPORT_TRAMPOLINE name, index
        .globl \name
        .type \name, @function
        .p2align 4
\name:
        .cfi_startproc
        _CET_ENDBR
        movq nccl_lamport_opaque_real+8*\index(%rip), %r11
        testq %r11, %r11
        jz 1f
        jmpq *%r11
1:      movl $\index, %r11d
        jmp nccl_lamport_opaque_slow
        .cfi_endproc
        .size \name, .-\name
        .endm

/* Entered by jmp with rsp as at the trampoline's entry and the index in r11d. rbp keeps the
 * entry rsp, so the stack is realigned to 16 even for a caller that did not align it. */
        .p2align 4
        .type nccl_lamport_opaque_slow, @function
nccl_lamport_opaque_slow:
        .cfi_startproc
        pushq %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq %rsp, %rbp
        .cfi_def_cfa_register %rbp
        andq $-16, %rsp
        subq $192, %rsp              /* 8 integer registers (64 bytes), 8 xmm registers (128) */
        movq %rdi, 0(%rsp)
        movq %rsi, 8(%rsp)
        movq %rdx, 16(%rsp)
        movq %rcx, 24(%rsp)
        movq %r8, 32(%rsp)
        movq %r9, 40(%rsp)
        movq %rax, 48(%rsp)
        movq %r10, 56(%rsp)
        movaps %xmm0, 64(%rsp)
        movaps %xmm1, 80(%rsp)
        movaps %xmm2, 96(%rsp)
        movaps %xmm3, 112(%rsp)
        movaps %xmm4, 128(%rsp)
        movaps %xmm5, 144(%rsp)
        movaps %xmm6, 160(%rsp)
        movaps %xmm7, 176(%rsp)
        movl %r11d, %edi
        call nccl_lamport_resolve_opaque  /* never returns null */
        movq %rax, %r11
        movaps 176(%rsp), %xmm7
        movaps 160(%rsp), %xmm6
        movaps 144(%rsp), %xmm5
        movaps 128(%rsp), %xmm4
        movaps 112(%rsp), %xmm3
        movaps 96(%rsp), %xmm2
        movaps 80(%rsp), %xmm1
        movaps 64(%rsp), %xmm0
        movq 56(%rsp), %r10
        movq 48(%rsp), %rax
        movq 40(%rsp), %r9
        movq 32(%rsp), %r8
        movq 24(%rsp), %rcx
        movq 16(%rsp), %rdx
        movq 8(%rsp), %rsi
        movq 0(%rsp), %rdi
        leave                        /* rsp = rbp; pop rbp: rsp is the entry rsp again */
        .cfi_def_cfa %rsp, 8
        .cfi_restore %rbp
        jmpq *%r11
        .cfi_endproc
        .size nccl_lamport_opaque_slow, .-nccl_lamport_opaque_slow

#define NCCL_LAMPORT_X(index, name, fallback) NCCL_LAMPORT_TRAMPOLINE name, index;
NCCL_LAMPORT_OPAQUE_API(NCCL_LAMPORT_X)

#elif defined(__aarch64__)

        .hidden nccl_lamport_opaque_real
        .hidden nccl_lamport_resolve_opaque
        .text

/* hint #34 is "bti c" (a landing pad for callers through a function pointer when BTI is on; a NOP
 * on cores without BTI). br x16 may land on the real function's "bti c". */
        .macro NCCL_LAMPORT_TRAMPOLINE name, index
        .globl \name
        .type \name, %function
        .p2align 4
\name:
        .cfi_startproc
        hint #34
        adrp x16, nccl_lamport_opaque_real+8*\index
        ldr x16, [x16, #:lo12:nccl_lamport_opaque_real+8*\index]
        cbz x16, 1f
        br x16
1:      mov w17, #\index
        b nccl_lamport_opaque_slow
        .cfi_endproc
        .size \name, .-\name
        .endm

/* Entered by b with sp as at the trampoline's entry (16-aligned by the ABI) and the index in
 * w17. x29/x30 are saved because bl overwrites x30 (the caller's return address). */
        .p2align 4
        .type nccl_lamport_opaque_slow, %function
nccl_lamport_opaque_slow:
        .cfi_startproc
        stp x29, x30, [sp, #-224]!   /* x29/x30, x0-x8 (+8 padding), q0-q7 */
        .cfi_def_cfa_offset 224
        .cfi_offset x29, -224
        .cfi_offset x30, -216
        mov x29, sp
        stp x0, x1, [sp, #16]
        stp x2, x3, [sp, #32]
        stp x4, x5, [sp, #48]
        stp x6, x7, [sp, #64]
        str x8, [sp, #80]
        stp q0, q1, [sp, #96]
        stp q2, q3, [sp, #128]
        stp q4, q5, [sp, #160]
        stp q6, q7, [sp, #192]
        mov w0, w17
        bl nccl_lamport_resolve_opaque  /* never returns null */
        mov x16, x0
        ldp q6, q7, [sp, #192]
        ldp q4, q5, [sp, #160]
        ldp q2, q3, [sp, #128]
        ldp q0, q1, [sp, #96]
        ldr x8, [sp, #80]
        ldp x6, x7, [sp, #64]
        ldp x4, x5, [sp, #48]
        ldp x2, x3, [sp, #32]
        ldp x0, x1, [sp, #16]
        ldp x29, x30, [sp], #224
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
        br x16
        .cfi_endproc
        .size nccl_lamport_opaque_slow, .-nccl_lamport_opaque_slow

#define NCCL_LAMPORT_X(index, name, fallback) NCCL_LAMPORT_TRAMPOLINE name, index;
NCCL_LAMPORT_OPAQUE_API(NCCL_LAMPORT_X)

/* With -mbranch-protection the compiler marks every C/C++ object BTI/PAC-compatible in a GNU
 * property note, and the linker keeps a feature for the shared object only if every input has it:
 * without this note (what <cet.h> does on x86-64) this one file would drop BTI/PAC for the whole
 * libnccl-lamport.so. The code above is compatible: "bti c" at each entry, the slow path entered
 * by a direct branch, x30 saved and restored around the resolver call, no ret. */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define NCCL_LAMPORT_AARCH64_BTI 1
#else
#define NCCL_LAMPORT_AARCH64_BTI 0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT) && __ARM_FEATURE_PAC_DEFAULT
#define NCCL_LAMPORT_AARCH64_PAC 2
#else
#define NCCL_LAMPORT_AARCH64_PAC 0
#endif
#if NCCL_LAMPORT_AARCH64_BTI || NCCL_LAMPORT_AARCH64_PAC
        .pushsection .note.gnu.property, "a"
        .p2align 3
        .long 4                      /* name size ("GNU\0") */
        .long 16                     /* descriptor size */
        .long 5                      /* NT_GNU_PROPERTY_TYPE_0 */
        .asciz "GNU"
        .long 0xc0000000             /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
        .long 4                      /* its data size */
        .long NCCL_LAMPORT_AARCH64_BTI | NCCL_LAMPORT_AARCH64_PAC
        .long 0                      /* padding to 8 bytes */
        .popsection
#endif

#endif /* architectures */

#if defined(__ELF__)
        .section .note.GNU-stack, "", %progbits  /* this code needs no executable stack */
#endif
