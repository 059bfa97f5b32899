/* An entry compiled with -fcf-protection=full, so that the compiler (not hand-written assembly)
   puts endbr64 first, as CET-enabled distribution builds of NCCL do. Returns x * 3 + 7. */
__attribute__((visibility("default"), noinline)) int hk_cet(int x) {
  volatile int scale = 3;  /* keeps the body longer than the entry jump */
  return x * scale + 7;
}
