// Loopback TCP with frames that end inside a segment (docs/performance.md, "chunks of whole
// segments"): a forked sender writes N frames of F bytes, one send() each (TCP_NODELAY; with
// a third argument 1, MSG_MORE on all but the last); the parent receives and prints Gb/s.
//   cc -O2 -o /tmp/tcp_tail bench/anchors/tcp_tail.c
//   for F in 65483 65484 65600; do /tmp/tcp_tail $F 30000; done   # 65483 = loopback's MSS
// Loopback only (127.0.0.1, a port the kernel picks).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){size_t F=atol(v[1]);long N=atol(v[2]);int more=c>3?atoi(v[3]):0;
 int ls=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);
 bind(ls,(void*)&a,sizeof a);listen(ls,1);socklen_t l=sizeof a;getsockname(ls,(void*)&a,&l);
 if(fork()==0){int s=socket(AF_INET,SOCK_STREAM,0);connect(s,(void*)&a,sizeof a);int one=1;setsockopt(s,IPPROTO_TCP,TCP_NODELAY,&one,4);
  char*b=malloc(F);memset(b,1,F);for(long i=0;i<N;i++){size_t o=0;while(o<F){ssize_t w=send(s,b+o,F-o,(more&&i+1<N)?MSG_MORE:0);if(w<=0)exit(1);o+=w;}}close(s);exit(0);}
 int s=accept(ls,0,0);char*b=malloc(F);double t0=now();size_t tot=0;for(;;){ssize_t r=recv(s,b,F,0);if(r<=0)break;tot+=r;}double t=now()-t0;wait(0);
 printf("F=%zu %.2f Gb/s\n",F,tot*8/t/1e9);return 0;}
