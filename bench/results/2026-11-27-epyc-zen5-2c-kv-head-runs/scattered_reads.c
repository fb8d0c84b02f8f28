// Read bandwidth: sequential against runs of 4/8/16/64 KB in random order, with and without a prefetch two runs ahead (gcc -O2 -pthread scattered_reads.c; ./a.out THREADS)
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static size_t N; static char* buf; static int mode; static int nth; static size_t chunk=4096; static int pfd=2;
static unsigned* order; static size_t nch;
__attribute__((target("avx512f"))) static void* work(void* arg){
  long id=(long)arg; __m512 a=_mm512_setzero_ps(),b=a; size_t per=nch/nth;
  size_t c0=id*per, c1=c0+per;
  for(size_t c=c0;c<c1;c++){
    const char* p = buf + (size_t)(mode? order[c] : c)*chunk;
    if(mode==2 && c+pfd<c1){ const char* q=buf+(size_t)order[c+pfd]*chunk; for(size_t o=0;o<chunk;o+=64) _mm_prefetch(q+o,_MM_HINT_T0);}
    for(size_t o=0;o<chunk;o+=128){ a=_mm512_add_ps(a,_mm512_load_ps((const float*)(p+o))); b=_mm512_add_ps(b,_mm512_load_ps((const float*)(p+o+64))); }
  }
  static volatile float sink; sink=_mm512_reduce_add_ps(_mm512_add_ps(a,b)); return 0;}
static void run_mode(int m, size_t ch){ mode=m; chunk=ch; nch=N/chunk;
  for(size_t i=0;i<nch;i++)order[i]=i; srand(1); for(size_t i=nch-1;i>0;i--){size_t j=rand()%(i+1); unsigned t=order[i];order[i]=order[j];order[j]=t;}
  pthread_t th[16]; double t=now(); for(long i=0;i<nth;i++)pthread_create(&th[i],0,work,(void*)i); for(int i=0;i<nth;i++)pthread_join(th[i],0); t=now()-t;
  printf("%6.1f ", N/t/1e9); fflush(stdout);}
int main(int argc,char**argv){ N=(size_t)1536<<20; nth=atoi(argv[1]); chunk=4096;
  buf=mmap(0,N,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(buf,N,MADV_HUGEPAGE);
  for(size_t i=0;i<N/8;i++)((unsigned long*)buf)[i]=i;
  order=malloc((N/4096)*sizeof(unsigned));
  printf("seq   r4K  r4Kpf r8Kpf r16Kpf r64Kpf\n");
  for(int rep=0;rep<4;rep++){ run_mode(0,4096); run_mode(1,4096); run_mode(2,4096); run_mode(2,8192); run_mode(2,16384); run_mode(2,65536); printf("\n"); }
}
