#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdint.h>
// ping-pong over two cache lines (one per direction), each carrying a sequence word
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
int main(int argc,char**argv){long n=argc>1?atol(argv[1]):1000000; int extra=argc>2?atoi(argv[2]):0;
 char*m=mmap(0,4096*4,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
 _Atomic uint64_t*a=(void*)m,*b=(void*)(m+4096);
 _Atomic uint64_t*a2=(void*)(m+64),*b2=(void*)(m+4096+64);
 pid_t p=fork();
 if(p==0){pin(1);for(long i=1;i<=n;i++){while(atomic_load_explicit(a,memory_order_acquire)!=i);if(extra)atomic_store_explicit(b2,0,memory_order_relaxed);atomic_store_explicit(b,i,memory_order_release);}exit(0);}
 pin(0);struct timespec t0,t1;clock_gettime(CLOCK_MONOTONIC,&t0);
 for(long i=1;i<=n;i++){if(extra)atomic_store_explicit(a2,0,memory_order_relaxed);atomic_store_explicit(a,i,memory_order_release);while(atomic_load_explicit(b,memory_order_acquire)!=i);}
 clock_gettime(CLOCK_MONOTONIC,&t1);wait(0);
 printf("extra=%d RTT/2 %.1f ns\n",extra,((t1.tv_sec-t0.tv_sec)*1e9+(t1.tv_nsec-t0.tv_nsec))/n/2);return 0;}
