// 2 processes, one loopback TCP connection, exchange M bytes N times (both send, then both
// wait for the peer's M bytes). MODE 0: spin on non-blocking recv(). MODE 1: io_uring recv,
// submitted once per exchange, then spin on the completion queue (no system call).
// MODE 2: send and recv submitted in one io_uring_enter, then spin on the completion queue.
// COOP=1: the ring set up with IORING_SETUP_COOP_TASKRUN (completions only on kernel entry).
#include <liburing.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static double now(){return std::chrono::duration<double,std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(int argc,char**argv){
  int N=atoi(argv[1]); size_t M=atoi(argv[2]); int mode=atoi(argv[3]);
  int port=30000+getpid()%20000;
  int l=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(l,SOL_SOCKET,SO_REUSEADDR,&one,4);
  sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(port);
  if(bind(l,(sockaddr*)&a,sizeof a)){perror("bind");return 1;} listen(l,4);
  pid_t c=fork(); int me=c==0?1:0; int fd;
  if(me==0){fd=accept(l,0,0);} else {fd=socket(AF_INET,SOCK_STREAM,0); while(connect(fd,(sockaddr*)&a,sizeof a)){close(fd);usleep(1000);fd=socket(AF_INET,SOCK_STREAM,0);}}
  setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4); setsockopt(fd,IPPROTO_TCP,TCP_CONGESTION,"reno",4);
  fcntl(fd,F_SETFL,O_NONBLOCK);
  io_uring ring; if(mode){ io_uring_params p{}; if(getenv("COOP")) p.flags|=IORING_SETUP_COOP_TASKRUN; if(io_uring_queue_init_params(64,&ring,&p)){perror("uring");return 1;} }
  char sb[4096]={1}, rb[4096];
  double t0=0;
  for(int it=-1000;it<N;it++){
    if(it==0)t0=now();
    size_t got=0;
    if(mode==0){
      send(fd,sb,M,MSG_NOSIGNAL);
      while(got<M){ssize_t r=recv(fd,rb+got,M-got,MSG_DONTWAIT); if(r>0)got+=r;}
    } else {
      if(mode==1) send(fd,sb,M,MSG_NOSIGNAL);
      else { io_uring_sqe* s=io_uring_get_sqe(&ring); io_uring_prep_send(s,fd,sb,M,MSG_NOSIGNAL); s->user_data=1; s->flags|=IOSQE_CQE_SKIP_SUCCESS; }
      while(got<M){
        io_uring_sqe* s=io_uring_get_sqe(&ring); io_uring_prep_recv(s,fd,rb+got,M-got,0); s->user_data=2;
        io_uring_submit(&ring);
        io_uring_cqe* cq=nullptr;
        for(;;){ if(io_uring_peek_cqe(&ring,&cq)==0 && cq){ if(cq->user_data==2){ if(cq->res>0) got+=cq->res; io_uring_cqe_seen(&ring,cq); break;} io_uring_cqe_seen(&ring,cq);} }
      }
    }
  }
  double t=(now()-t0)/N;
  if(me==0){printf("mode=%d M=%zu: %.2f us per exchange\n",mode,M,t); wait(0);}
  return 0;
}
