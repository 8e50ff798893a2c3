// exchange S bytes both ways between 2 processes over loopback TCP, N times; mode 0 send, 1 vmsplice+splice
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <poll.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
static double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  size_t S=strtoull(argv[1],0,0); int N=atoi(argv[2]); int mode=atoi(argv[3]);
  int ls=socket(AF_INET,SOCK_STREAM,0); int one=1; setsockopt(ls,SOL_SOCKET,SO_REUSEADDR,&one,4);
  sockaddr_in a{}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(0x7f000001); a.sin_port=htons(23456);
  if(bind(ls,(sockaddr*)&a,sizeof a)){perror("bind");return 1;} listen(ls,1);
  pid_t p=fork(); int fd;
  if(p==0){fd=socket(AF_INET,SOCK_STREAM,0); connect(fd,(sockaddr*)&a,sizeof a);} else {fd=accept(ls,0,0);}
  setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4);
  setsockopt(fd,IPPROTO_TCP,TCP_CONGESTION,"reno",4);
  fcntl(fd,F_SETFL,O_NONBLOCK);
  char* sb=(char*)aligned_alloc(4096,S); char* rb=(char*)aligned_alloc(4096,S);
  memset(sb,p?1:2,S); memset(rb,0,S);
  int pp[2]; pipe(pp); fcntl(pp[0],F_SETPIPE_SZ,1<<20); fcntl(pp[1],F_SETFL,O_NONBLOCK); 
  int psz=fcntl(pp[1],F_GETPIPE_SZ);
  double t0=0;
  for(int it=-2;it<N;++it){
    if(it==0)t0=now();
    size_t sent=0,rcvd=0,inpipe=0;
    while(sent<S||rcvd<S){
      bool prog=false;
      if(sent<S){
        if(mode==0){ssize_t k=send(fd,sb+sent,S-sent,MSG_DONTWAIT|MSG_NOSIGNAL); if(k>0){sent+=k;prog=true;}}
        else{
          if(inpipe==0){ size_t want=S-sent; if(want>(size_t)psz)want=psz; iovec v{sb+sent,want}; ssize_t k=vmsplice(pp[1],&v,1,0); if(k>0){inpipe=k;} }
          if(inpipe>0){ssize_t k=splice(pp[0],0,fd,0,inpipe,SPLICE_F_MOVE|SPLICE_F_NONBLOCK|(sent+inpipe<S?SPLICE_F_MORE:0)); if(k>0){inpipe-=k;sent+=k;prog=true;}}
        }
      }
      if(rcvd<S){ssize_t k=recv(fd,rb+rcvd,S-rcvd,MSG_DONTWAIT); if(k>0){rcvd+=k;prog=true;}}
      if(!prog){pollfd f{fd,(short)((sent<S?POLLOUT:0)|POLLIN),0}; poll(&f,1,-1);}
    }
    // ack: 1 byte each way (sender must know receiver consumed)
    char c=0; send(fd,&c,1,0); while(recv(fd,&c,1,0)!=1){pollfd f{fd,POLLIN,0};poll(&f,1,-1);}
    if(rb[0]!=(p?2:1)||rb[S-1]!=(p?2:1)){fprintf(stderr,"bad data\n");return 1;}
  }
  double t=(now()-t0)/N;
  if(p){printf("S=%zu mode=%d %.1f us\n",S,mode,t); wait(0);}
  return 0;
}
