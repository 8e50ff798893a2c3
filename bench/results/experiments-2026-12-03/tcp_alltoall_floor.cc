// N processes, full mesh loopback TCP, alltoall of B bytes per pair, ITERS times.
// mode bit0: yield when idle; CC from argv.
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <unistd.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include <string>
static double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#include <immintrin.h>
__attribute__((target("avx2"))) static void ntcopy(char* d,const char* s,size_t n){
  size_t i=0; while(((uintptr_t)(d+i)&31) && i<n){d[i]=s[i];i++;}
  for(;i+128<=n;i+=128){
    __m256i a=_mm256_loadu_si256((const __m256i*)(s+i)),b=_mm256_loadu_si256((const __m256i*)(s+i+32)),c=_mm256_loadu_si256((const __m256i*)(s+i+64)),e=_mm256_loadu_si256((const __m256i*)(s+i+96));
    _mm256_stream_si256((__m256i*)(d+i),a);_mm256_stream_si256((__m256i*)(d+i+32),b);_mm256_stream_si256((__m256i*)(d+i+64),c);_mm256_stream_si256((__m256i*)(d+i+96),e);}
  for(;i<n;i++) d[i]=s[i];
  _mm_sfence();
}
int main(int argc,char**argv){
  int N=atoi(argv[1]); size_t B=strtoull(argv[2],0,0); int IT=atoi(argv[3]); std::string cc=argv[4]; int mode=atoi(argv[5]);
  int base=20000+(getpid()%4000)*8;
  std::vector<int> ls(N);
  for(int r=0;r<N;r++){ls[r]=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(ls[r],SOL_SOCKET,SO_REUSEADDR,&one,4);sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(base+r);if(bind(ls[r],(sockaddr*)&a,sizeof a)){perror("bind");return 1;}listen(ls[r],16);}
  int me=0; for(int r=1;r<N;r++){ if(fork()==0){me=r;break;} }
  std::vector<int> fd(N,-1);
  // connect to lower ranks, accept from higher
  for(int p=0;p<me;p++){int s=socket(AF_INET,SOCK_STREAM,0);sockaddr_in a{};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=htons(base+p);while(connect(s,(sockaddr*)&a,sizeof a)){usleep(1000);} write(s,&me,4); fd[p]=s;}
  for(int k=me+1;k<N;k++){int s=accept(ls[me],0,0);int who;read(s,&who,4);fd[who]=s;}
  for(int p=0;p<N;p++) if(p!=me){int one=1;setsockopt(fd[p],IPPROTO_TCP,TCP_NODELAY,&one,4); if(cc!="system") setsockopt(fd[p],IPPROTO_TCP,TCP_CONGESTION,cc.data(),cc.size()); fcntl(fd[p],F_SETFL,O_NONBLOCK); if(getenv("PACE")){unsigned long v=strtoull(getenv("PACE"),0,0); setsockopt(fd[p],SOL_SOCKET,SO_MAX_PACING_RATE,&v,sizeof v);} if(getenv("LOWAT")){int v=atoi(getenv("LOWAT")); setsockopt(fd[p],IPPROTO_TCP,TCP_NOTSENT_LOWAT,&v,4);} }
  std::vector<char> sb(B*N,1), rb(B*N,0);
  double t0=0;
  for(int it=-5;it<IT;it++){
    if(it==0){ // crude barrier: exchange a byte with everyone
      t0=now();}
    size_t Bi = (getenv("ALT") && (it&1)==0) ? B/16 : B;
    if(getenv("SW")){ const char* c = Bi < B ? "bbr" : "reno"; for(int p=0;p<N;p++) if(p!=me) setsockopt(fd[p],IPPROTO_TCP,TCP_CONGESTION,c,strlen(c)); }
    std::vector<size_t> so(N,0), ro(N,0); so[me]=ro[me]=Bi; static std::vector<char> scr(N*B); const char* sbase=&sb[0];
    if(getenv("IPSTYLE")){ for(int p=0;p<N;p++) if(p!=me) memcpy(&scr[p*B],&rb[p*B],Bi); sbase=scr.data(); }
    else if(getenv("NT")) ntcopy(&rb[me*B],&sb[me*B],Bi); else if(!getenv("NOCOPY")) memcpy(&rb[me*B],&sb[me*B],Bi);
    int left=2*(N-1);
    while(left>0){
      bool prog=false;
      for(int k=1;k<N;k++){int p=(me+k)%N;
        if(so[p]<Bi){size_t cap=getenv("CAP")?strtoull(getenv("CAP"),0,0):B; size_t len=Bi-so[p]<cap?Bi-so[p]:cap; ssize_t w=send(fd[p],sbase+p*B+so[p],len,MSG_DONTWAIT|MSG_NOSIGNAL); if(w>0){so[p]+=w;prog=true;if(so[p]==Bi)left--;}}
      }
      for(int k=1;k<N;k++){int p=(me-k+N)%N;
        if(ro[p]<Bi){ssize_t w=recv(fd[p],&rb[p*B]+ro[p],Bi-ro[p],MSG_DONTWAIT); if(w>0){ro[p]+=w;prog=true;if(ro[p]==Bi)left--;}}
      }
      if(!prog && (mode&1)) { static unsigned idle=0; if((++idle % (mode>>1 ? (mode>>1) : 1))==0) sched_yield(); }
    }
  }
  double t=(now()-t0)/IT;
  if(me==0){printf("N=%d B=%zu cc=%s mode=%d: %.1f us\n",N,B,cc.c_str(),mode,t); for(int r=1;r<N;r++) wait(0);}
  return 0;
}
