// 2 processes exchange B bytes each way per iteration over loopback TCP (reno), non-blocking.
// TWO=1: a separate connection per direction (podnet's layout); else one connection both ways.
// HDR=1: a 64-byte header before each payload and the receiver reads it with a 64K recv first.
// ONEWAY=1: only process 0 sends (a 2-rank broadcast's root), back to back, no reply.
// WORK=K: K turns of a volatile busy loop per iteration on both sides (user work on the path).
// POLL=1: poll() with timeout 0 before each recv; PAUSE=K: K pause instructions after a recv that
// found nothing. These three were used on the exchange only, not with ONEWAY.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static double now(){return std::chrono::duration<double,std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();}
static int lsn(int port){int s=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(s,SOL_SOCKET,SO_REUSEADDR,&one,4);sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(port);if(bind(s,(sockaddr*)&a,sizeof a)){perror("bind");exit(1);}listen(s,4);return s;}
static int con(int port){int s=socket(AF_INET,SOCK_STREAM,0);sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(port);while(connect(s,(sockaddr*)&a,sizeof a)){close(s);usleep(1000);s=socket(AF_INET,SOCK_STREAM,0);}return s;}
static void prep(int s){int one=1;setsockopt(s,IPPROTO_TCP,TCP_NODELAY,&one,4);setsockopt(s,IPPROTO_TCP,TCP_CONGESTION,"reno",4);fcntl(s,F_SETFL,O_NONBLOCK);}
int main(int argc,char**argv){
  size_t B=strtoull(argv[1],0,0); int IT=atoi(argv[2]); bool two=getenv("TWO"); bool hdr=getenv("HDR"); bool oneway=getenv("ONEWAY"); bool usepoll=getenv("POLL"); int work=getenv("WORK")?atoi(getenv("WORK")):0; int pause_=getenv("PAUSE")?atoi(getenv("PAUSE")):0;
  int port=20000+getpid()%20000;
  int l0=lsn(port), l1=lsn(port+1);
  pid_t c=fork(); int me=c==0?1:0;
  int sfd,rfd;
  if(!two){ if(me==0){sfd=rfd=accept(l0,0,0);} else {sfd=rfd=con(port);} }
  else { if(me==0){ sfd=con(port+1); rfd=accept(l0,0,0);} else { rfd=accept(l1,0,0); sfd=con(port);} }
  prep(sfd); if(rfd!=sfd) prep(rfd);
  std::vector<char> sb(B+64,1), rb(B,0), rx(65536);
  double t0=0;
  for(int it=-20;it<IT;it++){
    if(it==0)t0=now();
    { volatile int x=0; for(int k=0;k<work;k++) x+=k; }
    size_t so=(oneway&&me==1)?B+(hdr?64:0):0, ro=(oneway&&me==0)?B:0, tot=B+(hdr?64:0), rxh=0; // rxh: header bytes received
    struct iovec iov[2]; 
    while(so<tot||ro<B){
      if(so<tot){ ssize_t w;
        if(hdr){ if(so<64){iov[0]={sb.data()+so,64-so};iov[1]={sb.data()+64,B};msghdr m{};m.msg_iov=iov;m.msg_iovlen=2;w=sendmsg(sfd,&m,MSG_DONTWAIT|MSG_NOSIGNAL);} else w=send(sfd,sb.data()+so,tot-so,MSG_DONTWAIT|MSG_NOSIGNAL);}
        else w=send(sfd,sb.data()+so,tot-so,MSG_DONTWAIT|MSG_NOSIGNAL);
        if(w>0)so+=w;}
      if(ro<B && usepoll){ struct pollfd p{rfd,POLLIN,0}; if(poll(&p,1,0)<=0) continue; }
      if(ro<B){ ssize_t w;
        if(hdr && rxh<64){ w=recv(rfd,rx.data(),rx.size()<64+B-ro?rx.size():64+B-ro,MSG_DONTWAIT); if(w<0 && pause_){ for(int k=0;k<pause_;k++) __builtin_ia32_pause(); } if(w>0){ size_t h=w<(ssize_t)(64-rxh)?w:64-rxh; rxh+=h; size_t p=w-h; memcpy(rb.data()+ro,rx.data()+h,p); ro+=p;} }
        else { w=recv(rfd,rb.data()+ro,B-ro,MSG_DONTWAIT); if(w>0)ro+=w; }
        if(w<0 && pause_){ for(int k=0;k<pause_;k++) __builtin_ia32_pause(); }
      }
    }
  }
  double t=(now()-t0)/IT;
  if(me==0){printf("B=%zu two=%d hdr=%d: %.1f us\n",B,two,hdr,t); wait(0);}
  return 0;
}
