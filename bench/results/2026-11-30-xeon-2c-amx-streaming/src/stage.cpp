// Scratch experiment (not built by CMake): how fast one core streams weights from memory
// through panel passes (1 or 2 row tiles a panel): plain tile loads, AVX-512 copies into an L1
// ring D steps ahead (tile loads then read the ring), and AVX-512 loads alone for the ceiling.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 stage.cpp -o stage
//   (taskset -c 0 ./stage ROW_TILES > core0.txt &); taskset -c 1 ./stage ROW_TILES
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "amx_pass.h"
// stage: copy step s+D's 2KB into ring slot with AVX-512, tile-load from ring
template<int D>
__attribute__((noinline)) void pass_stage(const char* B, const char* A, size_t lda, int steps, float* C){
  alignas(64) static char ring[16][2048];
  zero_c();
  for(int s=0;s<D && s<steps;s++) for(int l=0;l<32;l++) _mm512_store_si512(ring[s&15]+64*l, _mm512_loadu_si512(B+(size_t)s*2048+64*l));
  for(int s=0;s<steps;s++){
    if (s+D<steps){ const char* src=B+(size_t)(s+D)*2048; char* dst=ring[(s+D)&15];
      for(int l=0;l<32;l++) _mm512_store_si512(dst+64*l, _mm512_load_si512(src+64*l)); }
    step_2x2(ring[s&15], A+(size_t)s*64, lda);
  }
  store_c(C, 32);
}
int main(int argc, char**argv){
  amx_setup();
  int K = 2048; int steps=K/32;
  size_t panel = (size_t)steps*2048;
  size_t lda = K*2; char* A=(char*)aligned_alloc(4096, 64*lda); for(size_t i=0;i<64*lda;i++) A[i]=(char)(rand()&0x3f);
  alignas(64) static float C[32*32];
  int rts = argc>1 ? atoi(argv[1]) : 1;
  size_t nb=8192; size_t S = nb*panel; char* B=(char*)aligned_alloc(4096,S); memset(B,1,S);
  __m512i sink = _mm512_setzero_si512();
  const char* names[] = {"plain","stage D=2","stage D=4","stage D=8","stage D=12", "read only (AVX-512 loads)"};
  for(int round=0; round<2; round++)
  for(int v=0; v<6; v++){
    double best=1e9; long calls=0;
    for(int r=0;r<2;r++){
      calls=0; double t0=now_s();
      for(size_t p=0;p<nb/4;p++){
        const char* bp=B+(p + (size_t)(v*997+r*2011+round*3001)%(nb/2))%nb*panel;
        for(int rt=0; rt<rts; rt++){
          const char* Ar=A+rt*32*lda;
          bool first = rt==0;
          if (v==0 || !first) plain_pass(bp,Ar,lda,steps,C,32);
          else if (v==1) pass_stage<2>(bp,Ar,lda,steps,C);
          else if (v==2) pass_stage<4>(bp,Ar,lda,steps,C);
          else if (v==3) pass_stage<8>(bp,Ar,lda,steps,C);
          else if (v==4) pass_stage<12>(bp,Ar,lda,steps,C);
          else { __m512i acc=_mm512_setzero_si512(); for(size_t o=0;o<panel;o+=64) acc=_mm512_or_si512(acc,_mm512_load_si512(bp+o)); sink=acc; }
          calls++;
        }
      }
      double t=now_s()-t0; if(t<best)best=t;
    }
    printf("%-28s rts %d: %5.1f GB/s weights\n", names[v], rts, (double)calls/rts*panel/best/1e9);
  }
  volatile int x = _mm512_reduce_or_epi32(sink); (void)x;
}
