// Scratch experiment (not built by CMake): software prefetch in the panel pass, weights from
// memory: the panel's own stream D bytes ahead (T0/T1/T2), the next panel over the last row
// tile's pass, and both.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 pf.cpp -o pf
//   (taskset -c 0 ./pf ROW_TILES > core0.txt &); taskset -c 1 ./pf ROW_TILES
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <initializer_list>
struct alignas(64) Cfg { uint8_t palette=1, start=0, r[14]={}; uint16_t colsb[16]={}; uint8_t rows[16]={}; };
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
template<int HINT>
__attribute__((noinline)) void pass(const char* B, const char* A, size_t lda, int steps, float* C, const char* pf, int pf_per_step, int pf_stride){
  _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
  for(int s=0;s<steps;s++){
    const char* b=B+(size_t)s*2048; const char* a=A+(size_t)s*64;
    if (pf) for(int l=0;l<pf_per_step;l++) _mm_prefetch(pf+(size_t)s*pf_per_step*pf_stride+(size_t)l*pf_stride, (_mm_hint)HINT);
    _tile_loadd(6,b,128); _tile_loadd(4,a,lda); _tile_dpbf16ps(0,4,6);
    _tile_loadd(7,b+64,128); _tile_dpbf16ps(1,4,7);
    _tile_loadd(5,a+16*lda,lda); _tile_dpbf16ps(2,5,6); _tile_dpbf16ps(3,5,7);
  }
  _tile_stored(0,C,128);_tile_stored(1,C+16,128);_tile_stored(2,C+512,128);_tile_stored(3,C+528,128);
}
int main(int argc, char**argv){
  syscall(SYS_arch_prctl, 0x1023, 18);
  Cfg c; for(int t=0;t<8;t++){c.rows[t]=16;c.colsb[t]=64;} asm volatile("ldtilecfg %0"::"m"(c));
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
      calls=0; double t0=now();
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
      double t=now()-t0; if(t<best)best=t;
    }
    double flop = calls*(double)steps*4*16*16*32*2;
    printf("%-34s rts %d: %5.0f GFLOP/s  %5.1f GB/s weights\n", v.name, rts, flop/best/1e9, (double)calls/rts*panel/best/1e9);
  }
}
