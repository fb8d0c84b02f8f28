// Scratch experiment (not built by CMake): software prefetch in the panel pass, weights from
// memory: the panel's own stream D bytes ahead (T0/T1/T2), the next panel over the last row
// tile's pass, and both.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 pf.cpp -o pf
//   (taskset -c 0 ./pf ROW_TILES > core0.txt &); taskset -c 1 ./pf ROW_TILES
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include "amx_pass.h"
template<int HINT>
__attribute__((noinline)) void pass(const char* B, const char* A, size_t lda, int steps, float* C, const char* pf, int pf_per_step, int pf_stride){
  zero_c();
  for(int s=0;s<steps;s++){
    if (pf) for(int l=0;l<pf_per_step;l++) _mm_prefetch(pf+(size_t)s*pf_per_step*pf_stride+(size_t)l*pf_stride, (_mm_hint)HINT);
    step_2x2(B+(size_t)s*2048, A+(size_t)s*64, lda);
  }
  store_c(C, 32);
}
int main(int argc, char**argv){
  amx_setup();
  int K = 2048; int steps=K/32;
  size_t panel = (size_t)steps*2048; // 128 KB
  size_t lda = K*2; char* A=(char*)aligned_alloc(4096, 64*lda); for(size_t i=0;i<64*lda;i++) A[i]=(char)(rand()&0x3f);
  alignas(64) static float C[32*32];
  int rts = argc>1 ? atoi(argv[1]) : 2;
  size_t nb=8192; size_t S = nb*panel; char* B=(char*)aligned_alloc(4096,S); memset(B,1,S);
  struct V{const char* name; int own; int next; int hint; int stride;};
  for (V v : {V{"none",0,0,3,64}, V{"own 16K T1 all",16384,0,2,64}, V{"own 32K T1 all",32768,0,2,64}, V{"own 64K T1 all",65536,0,2,64}, V{"own 16K T2 all",16384,0,1,64}, V{"own 32K T1 rt0 + next T1 rt last",32768,1,2,64}, V{"own 16K T1 rt0 + next T1 rt last",16384,1,2,64}}){
    double best=1e9; long calls=0;
    for(int r=0;r<3;r++){
      calls=0; double t0=now_s();
      for(size_t p=0;p<nb/4;p++){
        const char* bp=B+p*panel;
        for(int rt=0; rt<rts; rt++){
          const char* pf=nullptr; int per=0;
          bool last = rt==rts-1;
          if (v.next && last && rts>1) { pf = bp+panel; per = 32; }
          else if (v.own && (rt==0 || !v.next)) { pf = bp + v.own; per = 2048/v.stride; }
          if (v.hint==1) pass<1>(bp, A+rt*32*lda, lda, steps, C, pf, per, v.stride); else if (v.hint==3) pass<3>(bp, A+rt*32*lda, lda, steps, C, pf, per, v.stride); else pass<2>(bp, A+rt*32*lda, lda, steps, C, pf, per, v.stride);
          calls++;
        }
      }
      double t=now_s()-t0; if(t<best)best=t;
    }
    double flop = calls*(double)steps*4*16*16*32*2;
    printf("%-34s rts %d: %5.0f GFLOP/s  %5.1f GB/s weights\n", v.name, rts, flop/best/1e9, (double)calls/rts*panel/best/1e9);
  }
}
