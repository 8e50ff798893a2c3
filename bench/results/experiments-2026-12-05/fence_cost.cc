// Throwaway experiment (bench/results/experiments-2026-12-05/README.md): what a full fence costs here,
// std::atomic_thread_fence(seq_cst) as GCC 12 emits it against an explicit lock or and nothing.
#include <atomic>
#include <chrono>
#include <cstdio>
std::atomic<int> x;
int main(){
  const int N=50'000'000;
  for (int round=0; round<2; ++round){
  auto t0=std::chrono::steady_clock::now();
  for(int i=0;i<N;++i){ x.store(i,std::memory_order_relaxed); std::atomic_thread_fence(std::memory_order_seq_cst); (void)x.load(std::memory_order_relaxed);}
  auto t1=std::chrono::steady_clock::now();
  for(int i=0;i<N;++i){ x.store(i,std::memory_order_relaxed); asm volatile("lock orq $0,-8(%%rsp)":::"memory","cc"); (void)x.load(std::memory_order_relaxed);}
  auto t2=std::chrono::steady_clock::now();
  for(int i=0;i<N;++i){ x.store(i,std::memory_order_relaxed); asm volatile("":::"memory"); (void)x.load(std::memory_order_relaxed);}
  auto t3=std::chrono::steady_clock::now();
  printf("mfence %.2f ns, lock or %.2f ns, none %.2f ns\n", std::chrono::duration<double,std::nano>(t1-t0).count()/N, std::chrono::duration<double,std::nano>(t2-t1).count()/N, std::chrono::duration<double,std::nano>(t3-t2).count()/N);}
}
