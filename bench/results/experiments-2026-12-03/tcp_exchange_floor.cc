// 2 processes exchange 8+64 bytes (both send, then both recv) N times over loopback TCP, busy recv
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
static double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  int N=atoi(argv[1]); size_t M=atoi(argv[2]); std::string cc=argv[3];
  int port=30000+getpid()%20000;
  int ls=socket(AF_INET,SOCK_STREAM,0); int one=1; setsockopt(ls,SOL_SOCKET,SO_REUSEADDR,&one,4);
  sockaddr_in a{}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(0x7f000001); a.sin_port=htons(port);
  bind(ls,(sockaddr*)&a,sizeof a); listen(ls,1);
  pid_t p=fork(); int fd;
  if(p==0){fd=socket(AF_INET,SOCK_STREAM,0); while(connect(fd,(sockaddr*)&a,sizeof a)) usleep(1000);} else fd=accept(ls,0,0);
  setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4); if(cc!="system") setsockopt(fd,IPPROTO_TCP,TCP_CONGESTION,cc.data(),cc.size());
  char sb[256]={1}, rb[256];
  double t0=0;
  for(int i=-1000;i<N;i++){
    if(i==0)t0=now();
    send(fd,sb,M,MSG_DONTWAIT|MSG_NOSIGNAL);
    size_t got=0; while(got<M){ssize_t k=recv(fd,rb+got,M-got,MSG_DONTWAIT); if(k>0)got+=k;}
  }
  double t=(now()-t0)/N;
  if(p){printf("M=%zu cc=%s: %.2f us per exchange\n",M,cc.c_str(),t); wait(0);}
}
