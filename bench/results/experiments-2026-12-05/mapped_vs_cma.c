// Two processes; the writer copies S bytes into the reader's memory N times:
//   cma:    process_vm_writev into the reader's private (malloc'd, 4 KiB-page) buffer
//   mapped: memcpy into a memfd mapping that both processes map (4 KiB pages)
// Prints GB/s for each. The reader only keeps its buffer alive (and touched once).
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t S=argc>1?strtoull(argv[1],0,10):1<<20; long N=argc>2?atol(argv[2]):2000;
  int fd=memfd_create("x",0); ftruncate(fd,S);
  char*shared=mmap(0,S,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(shared,0,S);
  char*priv=aligned_alloc(4096,S); memset(priv,0,S);   // the reader's private buffer (inherited copy-on-write: touch after fork)
  int p2c[2]; pipe(p2c);
  pid_t reader=fork();
  if(reader==0){pin(1); memset(priv,1,S); write(p2c[1],"r",1); sleep(1000); _exit(0);}
  char c; read(p2c[0],&c,1);
  pin(0);
  char*src=aligned_alloc(4096,S); memset(src,2,S);
  struct iovec l={src,S}, r={priv,S};
  for(int w=0;w<3;w++) process_vm_writev(reader,&l,1,&r,1,0);
  double t0=now(); for(long i=0;i<N;i++) if(process_vm_writev(reader,&l,1,&r,1,0)!=(ssize_t)S){perror("pvw");return 1;}
  double t1=now();
  for(int w=0;w<3;w++) memcpy(shared,src,S);
  double t2=now(); for(long i=0;i<N;i++){ memcpy(shared,src,S); asm volatile(""::"r"(shared):"memory"); }
  double t3=now();
  printf("S=%zu cma %.1f GB/s, mapped memcpy %.1f GB/s\n",S,S*N/(t1-t0)/1e9,S*N/(t3-t2)/1e9);
  kill(reader,9); wait(0); return 0;}
