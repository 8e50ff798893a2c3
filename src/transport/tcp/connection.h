// One TCP connection of a peer: a non-blocking socket, a queue of frames to send (flushed
// with vectored writes from the posting thread or the progress engine), and the receive
// state machine that reads each payload straight into its destination.
//
// Locks: tx_mu_ guards the send queue; rx_mu_ serialises the receive side (the progress
// engine may call on_event from several threads; a busy side is skipped, level-triggered
// epoll calls again). Callbacks into the endpoint run with rx_mu_ held and must not block.
#pragma once

#include <podnet/status.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/tcp/wire.h"

namespace podnet::detail {
class RequestState;
}

namespace podnet::tcp {

class TcpTransport;
class TcpEndpoint;

// Where an incoming payload goes.
struct RxSink {
  enum class Kind { kNone, kDiscard, kData, kControl };
  Kind kind = Kind::kNone;
  std::byte* dst = nullptr;  // kData
  FrameHeader hdr;           // the frame this payload belongs to
  // Bookkeeping the endpoint needs when the payload is complete.
  detail::RegionPin pin;
  std::shared_ptr<void> cookie;
  int cookie_kind = 0;       // what cookie points to (the endpoint's business)
  std::shared_ptr<detail::RequestState> req;  // a posted receive the payload completes
  Status error;              // kDiscard: the reply to send when done
};

struct TxItem {
  std::byte hdr[kHeaderSize];
  const std::byte* payload = nullptr;
  size_t length = 0;
  size_t sent = 0;                                  // header + payload bytes written so far
  std::shared_ptr<detail::RequestState> part;       // part_done() once fully written
  std::shared_ptr<std::string> owned;               // payload storage for control texts
  std::shared_ptr<void> hold;                       // kept alive until written (a region pin)
  uint32_t zc_id = 0;                               // last MSG_ZEROCOPY send that carried it
  bool zc = false;                                  // ... if any did
};

class Connection : public detail::EventHandler, public std::enable_shared_from_this<Connection> {
 public:
  enum class State { kConnecting, kBackoff, kHandshake, kOpen, kClosed };

  Connection(TcpTransport* transport, bool outgoing, int stream);
  ~Connection() override;

  // Outgoing: where to connect and until when; before the connection is published where
  // housekeeping (another thread) can tick() it, which reads these.
  void set_target(const std::string& host, uint16_t port, int64_t deadline_ns);
  // Outgoing: starts a non-blocking connect to the target (retried with backoff until the
  // deadline).
  Status start_connect();
  // Incoming: adopts an accepted socket, waiting for the peer's hello.
  Status adopt(int fd, std::string remote);

  void set_endpoint(TcpEndpoint* ep) { endpoint_.store(ep, std::memory_order_release); }
  TcpEndpoint* endpoint() const { return endpoint_.load(std::memory_order_acquire); }

  // Queues a frame and tries to send right away. `payload` must stay valid until the frame
  // is written (reported through `part` when given; a reference, copied only when the frame
  // has to wait in the queue: most small frames leave at once).
  void post(const FrameHeader& h, const void* payload, size_t len,
            const std::shared_ptr<detail::RequestState>& part = nullptr, std::shared_ptr<void> hold = nullptr);
  void post_text(FrameHeader h, std::string text);  // payload owned by the queue
  // Queues a payload-less frame without sending it: it leaves with the next frame posted
  // here, or when the engine flushes deferred output (TcpTransport::defer).
  void post_deferred(const FrameHeader& h);
  void flush_deferred();

  void on_event(uint32_t events) override;
  // For tests: runs `f` holding the receive lock as a thread reading a payload does, then,
  // like one, lets go of the receive state if the connection closed meanwhile.
  void while_reading(const std::function<void()>& f);
  // Retries a connect, sends heartbeats, checks the peer's silence. Never blocks.
  void tick(int64_t now_ns);
  // Closes the socket (once); the endpoint is told unless `notify` is false. Frames not
  // sent yet fail; with zero-copy frames the kernel still holds, the connection is reset
  // instead of shut down, so that nothing more is read from their pages.
  void fail(const Status& why, bool notify = true);
  // Whether zero-copy frames still wait for the kernel (after sending what it can and
  // reaping its completions): a closing context gives them a while to leave before fail().
  bool zerocopy_pending();
  // The handshake finished: queued frames may go, after `first` when given (an incoming
  // connection's hello-ack, which must precede anything posted while it was handshaking).
  void mark_open(const FrameHeader* first = nullptr);

  State state() const { return state_.load(std::memory_order_acquire); }
  bool outgoing() const { return outgoing_; }
  int stream() const { return stream_.load(); }
  void set_stream(int s) { stream_.store(s); }
  const std::string& remote() const { return remote_; }
  int64_t last_rx_ns() const { return last_rx_ns_.load(std::memory_order_relaxed); }
  // The path's full segment size (TCP_INFO's advertised MSS) once open; 0 before or unknown.
  uint32_t mss() const { return mss_.load(std::memory_order_relaxed); }
  // Whether the connection runs through the loopback device (a peer at 127.x or at one of
  // this host's own addresses); known once connected or accepted.
  bool through_loopback() const { return loopback_.load(std::memory_order_relaxed); }

 private:
  Status open_socket();
  void on_connected();
  void flush();         // tx_mu_ held by caller
  void read_ready();    // rx_mu_ held by caller
  bool handle_header(const FrameHeader& h);
  void finish_payload();
  void set_want_out(bool want);  // tx_mu_ held
  void enable_zerocopy();        // if the options and the peer call for it
  void choose_congestion();      // once connected: through_loopback(), PODNET_TCP_CONGESTION
  void reap_zerocopy();          // reads completions from the error queue; tx_mu_ held
  bool holds_user_pages();       // zero-copy frames the kernel has not finished; tx_mu_ held
  void abort_socket();           // resets the connection, dropping its send queue; tx_mu_ held
  void set_rcvlowat(int bytes);  // rx_mu_ held
  // Once closed: fails the receive a half-arrived payload was to complete (only this
  // connection holds it) and drops the rest of the frame's state (a region pin would hold
  // up deregistration). Takes rx_mu_ when free; a thread that holds it calls this again
  // after it lets go (on_event), and the thread reading this connection, which may be
  // the one that closed it, does it there too.
  void reap_rx();
  void abort_sink();  // rx_mu_ held

  TcpTransport* transport_;
  const bool outgoing_;
  std::atomic<int> stream_;
  std::atomic<TcpEndpoint*> endpoint_{nullptr};
  std::atomic<State> state_;
  int fd_ = -1;
  std::string remote_;
  std::string host_;
  uint16_t port_ = 0;
  // No deadline until set_target/adopt.
  int64_t connect_deadline_ns_ = INT64_MAX;
  int64_t retry_at_ns_ = 0;
  int64_t backoff_ns_ = 0;
  int64_t handshake_deadline_ns_ = INT64_MAX;
  Status last_connect_error_;

  std::mutex tx_mu_;
  // Items live on the heap: a zero-copy send pins the header bytes where they are until the
  // kernel reports it complete, so they must not move.
  std::deque<std::unique_ptr<TxItem>> txq_;
  bool want_out_ = false;
  bool deferred_ = false;  // the transport's deferred list holds this connection
  // MSG_ZEROCOPY: the kernel numbers each zero-copy sendmsg; a frame's buffer (and the
  // request or region pin riding on it) is released only once its number is reported done.
  bool zerocopy_ = false;
  uint32_t zc_next_ = 0;       // id of the next zero-copy sendmsg
  uint32_t zc_done_ = 0;       // ids below this are complete
  std::deque<std::unique_ptr<TxItem>> zc_wait_;  // written, waiting for their zero-copy completion
  std::atomic<int64_t> last_tx_ns_{0};
  std::atomic<uint32_t> mss_{0};
  std::atomic<bool> loopback_{false};

  std::mutex rx_mu_;
  std::vector<std::byte> rxbuf_;
  size_t rx_begin_ = 0, rx_end_ = 0;
  bool in_payload_ = false;
  uint64_t payload_left_ = 0;
  RxSink sink_;
  std::string control_;  // kControl payload collected here
  std::atomic<int64_t> last_rx_ns_{0};
  int rcvlowat_ = 1;  // SO_RCVLOWAT while a large payload is arriving (1 otherwise)
};

}  // namespace podnet::tcp
