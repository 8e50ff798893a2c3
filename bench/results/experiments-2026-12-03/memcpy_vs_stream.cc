#include <initializer_list>
#include <immintrin.h>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ctime>
static double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
__attribute__((target("avx2"))) void ntcopy(char* d,const char* s,size_t n){
  for(size_t i=0;i<n;i+=128){
    __m256i a=_mm256_loadu_si256((const __m256i*)(s+i)),b=_mm256_loadu_si256((const __m256i*)(s+i+32)),c=_mm256_loadu_si256((const __m256i*)(s+i+64)),e=_mm256_loadu_si256((const __m256i*)(s+i+96));
    _mm256_stream_si256((__m256i*)(d+i),a);_mm256_stream_si256((__m256i*)(d+i+32),b);_mm256_stream_si256((__m256i*)(d+i+64),c);_mm256_stream_si256((__m256i*)(d+i+96),e);}
  _mm_sfence();
}
int main(){ for(size_t S: {1048576ul,4194304ul,16777216ul}){ int K=4; char*a=(char*)aligned_alloc(4096,S*K); char*b=(char*)aligned_alloc(4096,S*K); memset(a,1,S*K); memset(b,2,S*K);
 for(int m=0;m<2;m++) for(int k=0;k<2;k++){double t0=now(); int N=100; for(int i=0;i<N;i++){ char*d=b+(i%K)*S; const char*s=a+(i%K)*S; if(m) ntcopy(d,s,S); else memcpy(d,s,S); asm volatile(""::"r"(b):"memory");} double t=(now()-t0)/N; printf("%zu %s: %.1f us %.1f GB/s\n",S,m?"nt":"memcpy",t,S/t/1e3);} } }
