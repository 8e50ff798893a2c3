// Process_vm_readv / process_vm_writev of N bytes, ITERS times, from/into a child's private buffer on
// 4 KiB pages (HUGE=0) or on 2 MiB transparent huge pages (HUGE=1, madvise): the cost of the
// remote side's page pinning. Usage: ./cma_huge N HUGE ITERS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>
int main(int argc,char**argv){
  size_t n=strtoull(argv[1],0,0); int huge=atoi(argv[2]); int it=atoi(argv[3]);
  size_t H=2<<20;
  char* m=(char*)mmap(0,n+H,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);  // placeholder
  munmap(m,n+H);
  char* rb=(char*)mmap(0,n+H,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char* r=(char*)(((uintptr_t)rb+H-1)&~(H-1));
  if(huge) madvise(r,(n+H-1)&~(H-1),MADV_HUGEPAGE);
  memset(r,5,n);
  pid_t c=fork();
  if(c==0){ pause(); _exit(0);}  // child holds copy-on-write pages: touch them so they're its own
  // child shares pages COW; make child's own by having it write? simpler: use child's memory as remote: child memsets after fork
  kill(c,SIGKILL); waitpid(c,0,0);
  // redo: child writes its own buffer
  int pfd[2]; pipe(pfd);
  c=fork();
  if(c==0){ char* cb=(char*)mmap(0,n+H,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); char* cr=(char*)(((uintptr_t)cb+H-1)&~(H-1)); if(huge) madvise(cr,(n+H-1)&~(H-1),MADV_HUGEPAGE); memset(cr,7,n); write(pfd[1],&cr,sizeof cr); pause(); _exit(0);}
  read(pfd[0],&r,sizeof r);
  char* l=(char*)aligned_alloc(4096,n); memset(l,1,n);
  for(int mode=0;mode<2;mode++){
    double best=1e9;
    for(int rr=0;rr<5;rr++){
      auto t0=std::chrono::steady_clock::now();
      for(int i=0;i<it;i++){ iovec li{l,n}, ri{r,n}; ssize_t k= mode? process_vm_writev(c,&li,1,&ri,1,0): process_vm_readv(c,&li,1,&ri,1,0); if(k!=(ssize_t)n){perror("cma");return 1;} }
      double t=std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count(); if(t<best)best=t;
    }
    printf("n=%zu huge=%d %s: %.1f us/call %.1f GB/s\n",n,huge,mode?"writev":"readv",best/it*1e6,(double)n*it/best/1e9);
  }
  kill(c,SIGKILL); waitpid(c,0,0);
}
