/* The stand-in entry points of tests/shim/hooks/standin_entries.S and standin_cet.c. */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int hk_rip_lea(int x);     /* x + 101 */
int hk_unaligned(int x);   /* x + 102 */
int hk_early_call(int x);  /* 2x + 3 */
int hk_endbr(int x);       /* x + 104 */
int hk_early_jcc(int x);   /* x + 5, or -1 for 0 */
int hk_loop_back(int x);   /* refused */
int hk_tiny(int x);        /* refused */
int hk_cet(int x);         /* 3x + 7 */
#ifdef __cplusplus
}
#endif
