// Scratch experiment (not built by CMake): the AMX-BF16 linear's panel pass alone, in the
// driver's order (per column group of 2 panels, per 32-row tile, each panel over K = 2048),
// with x of M rows and `groups` column groups of weights.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 real.cpp -o real && taskset -c 1 ./real M HUGE GROUPS
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include "amx_pass.h"
int main(int argc, char**argv){
  amx_setup();
  int K = 2048; int steps=K/32;
  size_t panel = (size_t)steps*2048; // 128 KB
  int M = argc>1 ? atoi(argv[1]) : 512;
  int huge = argc>2 ? atoi(argv[2]) : 0;
  int ngroups = argc>3 ? atoi(argv[3]) : 1;
  size_t lda = K*2; size_t abytes = (size_t)M*lda;
  char* A=(char*)aligned_alloc(2<<20, (abytes + (2<<20)-1) & ~((size_t)(2<<20)-1));
  if (huge) madvise(A, abytes, MADV_HUGEPAGE);
  for(size_t i=0;i<abytes;i++) A[i]=(char)(rand()&0x3f);
  size_t bbytes = ngroups*2*panel; char* B=(char*)aligned_alloc(2<<20, (bbytes+(2<<20)-1)&~((size_t)(2<<20)-1)); if(huge) madvise(B,bbytes,MADV_HUGEPAGE);
  for(size_t i=0;i<bbytes;i++) B[i]=(char)(rand()&0x3f);
  alignas(64) static float C[32*64];
  double best=1e9; long passes=0;
  for(int r=0;r<5;r++){
    passes=0; double t0=now_s();
    for(int rep=0; rep<8; rep++)
    for(int g=0; g<ngroups; g++) for(int rt=0; rt<M/32; rt++) for(int q=0;q<2;q++){ plain_pass(B+(size_t)(2*g+q)*panel, A+(size_t)rt*32*lda, lda, steps, C+q*32, 64); passes++; }
    double t=now_s()-t0; if(t<best)best=t;
  }
  double flop = passes*(double)steps*4*16*16*32*2;
  printf("M %d huge %d groups %d: %.0f GFLOP/s\n", M, huge, ngroups, flop/best/1e9);
}
