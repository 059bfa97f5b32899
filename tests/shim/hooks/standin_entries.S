/* A stand-in library whose exported entry points have the prologue shapes real NCCL builds have
   (research/tuner-activation.md 3b), written in assembly so the shapes are exact:
     hk_rip_lea     a RIP-relative lea as the first instruction (returns x + 1 + hk_data)
     hk_unaligned   an odd address, a 1-byte push, then a RIP-relative lea (as pnccl CommInitRank
                    in 2.28.9) (returns x + 2 + hk_data)
     hk_early_call  push / mov / call rel32 within the first 5 bytes (as pncclGroupEnd)
                    (returns 2x + 3)
     hk_endbr       endbr64, then a RIP-relative lea (-fcf-protection builds) (returns x + 4 +
                    hk_data)
     hk_early_jcc   a conditional short jump in the first 5 bytes (returns x + 5, or -1 for 0)
     hk_loop_back   a later short jump back into its first 5 bytes (must be refused)
     hk_tiny        shorter than the entry jump (must be refused)
   hk_data is 100. Every function takes one int and returns an int. */
#if defined(__x86_64__)
        .text
        .globl  hk_rip_lea, hk_unaligned, hk_early_call, hk_endbr, hk_early_jcc, hk_loop_back, hk_tiny
        .type   hk_rip_lea, @function
        .type   hk_unaligned, @function
        .type   hk_early_call, @function
        .type   hk_endbr, @function
        .type   hk_early_jcc, @function
        .type   hk_loop_back, @function
        .type   hk_tiny, @function

        .p2align 4
hk_rip_lea:
        lea     hk_data(%rip), %rax
        mov     (%rax), %eax
        add     %edi, %eax
        add     $1, %eax
        ret
        .size   hk_rip_lea, .-hk_rip_lea

        .p2align 4
        nop
hk_unaligned:
        push    %rbx
        lea     hk_data(%rip), %rbx
        mov     (%rbx), %eax
        add     %edi, %eax
        add     $2, %eax
        pop     %rbx
        ret
        .size   hk_unaligned, .-hk_unaligned

        .p2align 4
hk_double:
        lea     (%rdi,%rdi), %eax
        ret

        .p2align 4
hk_early_call:
        push    %rbx
        mov     %edi, %ebx
        call    hk_double
        add     $3, %eax
        pop     %rbx
        ret
        .size   hk_early_call, .-hk_early_call

        /* A page of its own: the refused-mprotect test needs entries on two pages. */
        .p2align 12
hk_endbr:
        endbr64
        lea     hk_data(%rip), %rax
        mov     (%rax), %eax
        add     %edi, %eax
        add     $4, %eax
        ret
        .size   hk_endbr, .-hk_endbr

        .p2align 4
hk_early_jcc:
        test    %edi, %edi
        jz      1f
        lea     5(%rdi), %eax
        ret
1:      mov     $-1, %eax
        ret
        .size   hk_early_jcc, .-hk_early_jcc

        .p2align 4
hk_loop_back:
        mov     %edi, %eax
2:      dec     %eax
        jg      2b
        ret
        .size   hk_loop_back, .-hk_loop_back

        .p2align 4
hk_tiny:
        mov     %edi, %eax
        ret
        .size   hk_tiny, .-hk_tiny

        .data
        .p2align 2
hk_data:
        .long   100
#endif
        .section .note.GNU-stack,"",@progbits
