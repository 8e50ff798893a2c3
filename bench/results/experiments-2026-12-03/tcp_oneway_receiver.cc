// One-way stream of F-byte frames over loopback TCP (reno, TCP_NODELAY), sender pinned to CPU 0, receiver to
// CPU 1: how the receiver waits (spin: non-blocking recv in a loop; block: blocking recv; poll: poll() with
// timeout 0 before each recv) changes the sender's time per frame. Env PAUSE=K: K pause instructions after
// each failed recv (spin). Prints the receiver's recv calls per frame. Usage: tcp_oneway_receiver F N MODE
// Added 2026-12-07 (thirty-sixth session): modes spinqa / blockqa set TCP_QUICKACK to 0 (delayed
// acknowledgements) before every recv, spinqa1 once before the first (experiments-2026-12-07/README.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static double now(){return std::chrono::duration<double,std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(int argc,char**argv){
  size_t F=strtoull(argv[1],0,0); long N=atol(argv[2]); const char* mode=argv[3];
  int port=30000+getpid()%20000;
  int l=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(l,SOL_SOCKET,SO_REUSEADDR,&one,4);
  sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(port);
  if(bind(l,(sockaddr*)&a,sizeof a)){perror("bind");return 1;} listen(l,4);
  pid_t c=fork();
  if(c==0){ // receiver on CPU 1
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(1,&s); sched_setaffinity(0,sizeof s,&s);
    int fd=accept(l,0,0); setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4); setsockopt(fd,IPPROTO_TCP,TCP_CONGESTION,"reno",4);
    bool qa1=!strcmp(mode,"spinqa1"); bool qa=qa1||!strcmp(mode,"spinqa")||!strcmp(mode,"blockqa"); bool blk=!strncmp(mode,"block",5), pl=!strcmp(mode,"poll"); int pz=getenv("PAUSE")?atoi(getenv("PAUSE")):0;
    if(!blk) fcntl(fd,F_SETFL,O_NONBLOCK);
    std::vector<char> b(65536); size_t got=0, want=F*N; long calls=0, fails=0;
    while(got<want){
      if(pl){ pollfd p{fd,POLLIN,0}; if(poll(&p,1,0)<=0) continue; }
      if(qa && (qa1==0 || calls==0)){int z=0;setsockopt(fd,IPPROTO_TCP,TCP_QUICKACK,&z,4);} ssize_t r=recv(fd,b.data(),b.size(),0); calls++;
      if(r>0) got+=r; else if(r==0) break; else { fails++; for(int k=0;k<pz;k++) __builtin_ia32_pause(); }
    }
    fprintf(stderr,"receiver: %.2f recv/frame, %.2f failed/frame\n",(double)calls/N,(double)fails/N);
    char x=1; send(fd,&x,1,0); return 0;
  }
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(0,&s); sched_setaffinity(0,sizeof s,&s);
  int fd=socket(AF_INET,SOCK_STREAM,0); while(connect(fd,(sockaddr*)&a,sizeof a)){usleep(1000);}
  setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4); setsockopt(fd,IPPROTO_TCP,TCP_CONGESTION,"reno",4); fcntl(fd,F_SETFL,O_NONBLOCK);
  std::vector<char> f(F,1); usleep(100000);
  double t0=now();
  for(long i=0;i<N;i++){ size_t o=0; while(o<F){ ssize_t w=send(fd,f.data()+o,F-o,MSG_NOSIGNAL); if(w>0) o+=w; } }
  fcntl(fd,F_SETFL,0); char x; recv(fd,&x,1,0);
  double t=(now()-t0)/N; printf("%s F=%zu: %.2f us/frame\n",mode,F,t); wait(0); return 0;
}
