// Two threads (CPU 0 and CPU 1) move MSG bytes ITERS times through a shared ring of RING bytes in
// CHUNK-byte slots: the producer copies each chunk of the message into a slot (memcpy, or with
// NT=1 non-temporal stores), the consumer copies it out, one flag per slot and a released count.
// ROFF: the payload at this offset in its slot (podnet records carry a 56-byte header first).
// Usage: ./ring_pipe MSG CHUNK RING ITERS [NT [ROFF]]
// The twenty-fifth session's switches, from the environment (off by default): LAG=K the
// consumer waits until slot k+K is full before copying slot k; AVX=1 an AVX2 load/store loop
// instead of memcpy; SRCFIX=1 the producer always copies from the start of its source,
// DSTFIX=1 the consumer always into the start of its destination (a receive buffer reused for
// every message); FLUSH=1 the consumer clflushopt's each slot after copying it out.
#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <pthread.h>
#include <sys/mman.h>
#include <immintrin.h>
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static int g_avx=0; __attribute__((target("avx2"))) static void avxcopy(char* d,const char* s,size_t n){ for(size_t i=0;i<n;i+=64){ __m256i a=_mm256_loadu_si256((const __m256i*)(s+i)),b=_mm256_loadu_si256((const __m256i*)(s+i+32)); _mm256_storeu_si256((__m256i*)(d+i),a); _mm256_storeu_si256((__m256i*)(d+i+32),b);} }
__attribute__((target("clflushopt"))) static void flush_slot(char* p,size_t n){ for(size_t i=0;i<n;i+=64) _mm_clflushopt(p+i); }
static void mc(void* d,const void* s,size_t n){ if(g_avx) avxcopy((char*)d,(const char*)s,n); else memcpy(d,s,n);} 
static void ntcopy(char* d,const char* s,size_t n){ for(size_t i=0;i<n;i+=64){ __m128i a=_mm_loadu_si128((const __m128i*)(s+i)),b=_mm_loadu_si128((const __m128i*)(s+i+16)),c=_mm_loadu_si128((const __m128i*)(s+i+32)),e=_mm_loadu_si128((const __m128i*)(s+i+48)); _mm_stream_si128((__m128i*)(d+i),a);_mm_stream_si128((__m128i*)(d+i+16),b);_mm_stream_si128((__m128i*)(d+i+32),c);_mm_stream_si128((__m128i*)(d+i+48),e);} _mm_sfence(); }
int main(int argc,char**argv){ int nt=argc>5?atoi(argv[5]):0; static int flush=getenv("FLUSH")?1:0; static int srcfix=getenv("SRCFIX")?1:0, dstfix=getenv("DSTFIX")?1:0; g_avx=getenv("AVX")?1:0; uint64_t lag=getenv("LAG")?atoi(getenv("LAG")):0; size_t roff=argc>6?atoi(argv[6]):0;
  size_t msg=strtoull(argv[1],0,0), chunk=strtoull(argv[2],0,0), ring=strtoull(argv[3],0,0); int iters=atoi(argv[4]);
  size_t nslots=0; size_t stride=chunk+roff;
  nslots=ring/(chunk+roff); char* r=(char*)mmap(0,ring+4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(r,0,ring+4096);
  struct alignas(64) Flag{std::atomic<uint64_t> v{0}; char pad[56];};
  Flag* full=new Flag[nslots]; // seq number published
  char* src=(char*)aligned_alloc(4096,msg); memset(src,3,msg);
  char* dst=(char*)aligned_alloc(4096,msg); memset(dst,0,msg);
  size_t per=(msg+chunk-1)/chunk; uint64_t total=per*iters;
  std::atomic<uint64_t> consumed{0};
  auto t0=std::chrono::steady_clock::now();
  std::thread prod([&]{pin(0); for(uint64_t k=0;k<total;k++){ size_t s=k%nslots; while(k>=consumed.load(std::memory_order_acquire)+nslots) _mm_pause(); size_t off=(k%per)*chunk; size_t len=std::min(chunk,msg-off); if(nt) ntcopy(r+s*stride+roff,src+off,len); else mc(r+s*stride+roff,src+(srcfix?0:off),len); full[s].v.store(k+1,std::memory_order_release);} });
  std::thread cons([&]{pin(1); for(uint64_t k=0;k<total;k++){ size_t s=k%nslots; while(full[s].v.load(std::memory_order_acquire)!=k+1) _mm_pause(); if(lag){ uint64_t kk=std::min<uint64_t>(k+lag,total-1); size_t ss=kk%nslots; while(full[ss].v.load(std::memory_order_acquire)<kk+1 && kk<k+nslots-1) _mm_pause(); } size_t off=(k%per)*chunk; size_t len=std::min(chunk,msg-off); mc(dst+(dstfix?0:off),r+s*stride+roff,len); if(flush) flush_slot(r+s*stride,len+roff); consumed.store(k+1,std::memory_order_release);} });
  prod.join();cons.join();
  double t=std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count();
  printf("msg=%zu chunk=%zu ring=%zu: %.1f GB/s\n",msg,chunk,ring,(double)msg*iters/t/1e9);
}
