// Scratch experiment (not built by CMake): the AMX-BF16 linear's panel pass alone, in the
// driver's order (per column group of 2 panels, per 32-row tile, each panel over K = 2048),
// with x of M rows and `groups` column groups of weights.
//   g++ -O2 -march=native -mamx-tile -mamx-bf16 real.cpp -o real && taskset -c 1 ./real M HUGE GROUPS
#include <immintrin.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
struct alignas(64) Cfg { uint8_t palette=1, start=0, r[14]={}; uint16_t colsb[16]={}; uint8_t rows[16]={}; };
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
__attribute__((noinline)) void pass(const char* B, const char* A, size_t lda, int steps, float* C){
  _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
  for(int s=0;s<steps;s++){
    const char* b=B+(size_t)s*2048; const char* a=A+(size_t)s*64;
    _tile_loadd(6,b,128); _tile_loadd(4,a,lda); _tile_dpbf16ps(0,4,6);
    _tile_loadd(7,b+64,128); _tile_dpbf16ps(1,4,7);
    _tile_loadd(5,a+16*lda,lda); _tile_dpbf16ps(2,5,6); _tile_dpbf16ps(3,5,7);
  }
  _tile_stored(0,C,256);_tile_stored(1,C+16,256);_tile_stored(2,C+16*64,256);_tile_stored(3,C+16*64+16,256);
}
int main(int argc, char**argv){
  syscall(SYS_arch_prctl, 0x1023, 18);
  Cfg c; for(int t=0;t<8;t++){c.rows[t]=16;c.colsb[t]=64;} asm volatile("ldtilecfg %0"::"m"(c));
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
    passes=0; double t0=now();
    for(int rep=0; rep<8; rep++)
    for(int g=0; g<ngroups; g++) for(int rt=0; rt<M/32; rt++) for(int q=0;q<2;q++){ pass(B+(size_t)(2*g+q)*panel, A+(size_t)rt*32*lda, lda, steps, C+q*32); passes++; }
    double t=now()-t0; if(t<best)best=t;
  }
  double flop = passes*(double)steps*4*16*16*32*2;
  printf("M %d huge %d groups %d: %.0f GFLOP/s\n", M, huge, ngroups, flop/best/1e9);
}
