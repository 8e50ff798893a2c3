// A TCP peer: its outgoing streams (which carry this side's requests) and incoming streams
// (which carry the peer's requests), the operations waiting for replies, tag matching,
// rendezvous state and the sticky first error.
//
// Protocols:
//   write      kWrite chunks (striped over the streams) -> one kWriteAck per chunk after
//              the data is placed; write_notify adds a final kWriteImm once all chunks are
//              acknowledged when striped, so the notification never precedes the data.
//              A one-frame write_notify up to the eager size goes on the ordered stream, and
//              its kWriteAck, while a thread of the target waits, is deferred: it leaves
//              with the target's next frame there (its reply) or when the engine flushes
//              deferred output (ProgressEngine::note_deferred; at most ack_delay_us later).
//   read       kReadReq chunks -> kReadResp with the data, received into the local buffer.
//   send       <= eager max: kSend with the payload on stream 0 (keeps message order);
//              larger: kRts on stream 0 -> kCts from the receiver once a receive matched
//              -> kRdvData chunks straight into the receive buffer.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/matcher.h"
#include "transport/request.h"
#include "transport/tcp/connection.h"
#include "transport/transport.h"

namespace podnet::tcp {

class TcpEndpoint : public detail::TransportEndpoint, public std::enable_shared_from_this<TcpEndpoint> {
 public:
  TcpEndpoint(TcpTransport* transport, uint64_t peer_id, int peer_rank, std::string peer_listen);
  ~TcpEndpoint() override;

  // Opens the streams to the peer's listeners (one per rail): `streams` per rail, stream i to
  // rail i % rails.size(), at most kMaxStreams.
  Status start_outgoing(const std::vector<std::pair<std::string, uint16_t>>& rails);
  bool has_outgoing() const;
  size_t stream_count() const;  // outgoing streams (the streams option before they exist)
  Status attach_incoming(const std::shared_ptr<Connection>& c, const HelloBody& hello);

  int peer_rank() const noexcept override { return peer_rank_.load(); }
  std::string peer_name() const override;
  Req write(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
            size_t len, const uint64_t* imm) override;
  Req read(const detail::RegionState& local, size_t local_off, const RemoteKey& remote, uint64_t remote_off,
           size_t len) override;
  Req send(const void* buf, size_t len, uint64_t tag) override;
  Req send_exchange(const void* buf, size_t len, uint64_t tag, uint64_t* done_seq) override;
  Req recv(void* buf, size_t capacity, uint64_t tag, uint64_t mask) override;
  Req recv_notify() override;
  size_t cancel_recvs(uint64_t tag, uint64_t mask) override { return matcher_.cancel(tag, mask); }
  Status health() const override;
  Status wait_connected(int64_t deadline_ns) override;

  // Called by connections with their receive lock held.
  void on_header(Connection& c, RxSink& sink);
  void on_payload(Connection& c, RxSink& sink, const std::string& control);
  void on_stream_open(Connection& c);
  void on_bye(Connection& c);
  void on_connection_failed(Connection& c, const Status& why);
  // A connection closed with `sink`'s payload half read: a posted receive its message was
  // filling (only that connection held it) fails with the endpoint's error, and so does a read
  // or rendezvous receive it was filling once the endpoint has failed (fail() left it to the
  // connection: its buffer was being written).
  void abort_payload(RxSink& sink);

  void tick(int64_t now_ns);
  void close_gracefully();        // sends bye on every stream
  // Sticky; completes everything pending with the error, except the reads and rendezvous
  // receives a connection is copying a payload into at that moment: their buffers are still
  // being written, so the user must not have them back yet. The connection completes them
  // when its payload ends (on_payload) or when it lets go of it (abort_payload).
  void fail(const Status& why);

 private:
  struct Chunk {
    std::shared_ptr<detail::RequestState> req;
    std::byte* local = nullptr;  // read: destination
    uint64_t len = 0;
    bool copying = false;  // a connection is reading the response into `local` (mu_)
  };
  struct SendOp {
    std::shared_ptr<detail::RequestState> req;
    const std::byte* buf = nullptr;
    size_t len = 0;
  };
  struct RecvOp {
    detail::PostedRecv recv;
    uint64_t tag = 0;
    size_t length = 0;
    std::atomic<size_t> received{0};
    int copiers = 0;  // connections reading data into recv.buf now (mu_)
  };
  // What a data sink's payload is for: kPostedCookie, a posted receive (sink.req);
  // kUnexpectedCookie, a queued message (sink.cookie); kRdvCookie, rendezvous data for the
  // RecvOp in sink.cookie; kReadCookie, the response to the read chunk sink.hdr.seq.
  enum CookieKind { kNoCookie, kPostedCookie, kUnexpectedCookie, kRdvCookie, kReadCookie };

  std::shared_ptr<detail::RequestState> new_request(const char* op);
  Status op_failure(const detail::RequestState& r, const Status& why) const;
  template <typename F>
  Status register_unless_failed(F&& add);
  Req failed_request(const char* op, const Status& why);
  // send(), or send_exchange() with its larger eager limit (exchange_eager_limit).
  Req send_as(const void* buf, size_t len, uint64_t tag, bool exchange);
  std::shared_ptr<Connection> out_stream(size_t i);
  // The connection that carries this side's ordered frames (sends, rendezvous requests and
  // their answers, unstriped immediates): chosen once, at the first use or when the peer's
  // stream 0 arrives, and never changed, so they stay in order. Both sides pick the stream
  // opened by the side with the smaller context id where they can: one connection then
  // carries a ping-pong both ways, and TCP's acknowledgements ride on the replies instead
  // of travelling as segments of their own (loopback 8 B RTT/2: 3.1-3.2 us on one
  // connection against 4.4-4.5 us on one per direction, measured with a plain socket loop).
  Connection* ordered_stream();
  void set_ordered(std::shared_ptr<Connection> c);  // conn_mu_ held; once per endpoint
  // Splits [0, len) into `n` chunks of `size` bytes (the last one shorter). `fit_segments`:
  // a transfer below the striping size whose frame exceeds one segment is split into frames
  // that each fit one (single_segment_chunks): writes and reads; not rendezvous data (over
  // tcp on 4 ranks on 2 CPUs the extra frames cost more CPU than they save), nor a
  // write_notify (split, its immediate would wait a round trip for the chunks' acks). One
  // call gives both numbers: the MSS they depend on may drop when another stream opens.
  struct ChunkPlan {
    size_t n, size;
  };
  ChunkPlan chunk_plan(size_t len, bool fit_segments) const;
  size_t chunk_size(size_t len, bool fit_segments, uint32_t mss) const;  // len > 0
  void post_write_chunks(const std::shared_ptr<detail::RequestState>& target, const std::byte* src,
                         const RemoteKey& remote, uint64_t raddr, size_t len);
  void post_write_imm(const std::shared_ptr<detail::RequestState>& req, const RemoteKey& remote, uint64_t raddr,
                      uint64_t imm, uint32_t order);
  // Tells the target that the write_notify numbered `order` failed (its striped data was
  // refused): the number is used up and nothing is delivered for it.
  void post_order_only(uint32_t order);
  std::vector<std::shared_ptr<Connection>> connections() const;  // ours, then the peer's
  // The notification numbered `order` arrived: delivers it (`imm`; nullopt: the write was
  // refused, nothing to deliver) and every later one that waited for it, in order.
  void deliver_notification(uint32_t order, std::optional<uint64_t> imm);
  void start_cts(Connection* c, detail::PostedRecv recv, const detail::UnexpectedMsg& msg);
  // A connection stops copying into `op` (receive `token`): with the message `whole`, Ok when
  // this call completes it; otherwise the endpoint's error when the endpoint has failed and
  // nothing else copies into it. nullopt: not this call's to complete.
  std::optional<Status> release_rdv(RecvOp& op, uint64_t token, bool whole);
  void handle_reply(const FrameHeader& h, const std::string& control);

  TcpTransport* transport_;
  const uint64_t peer_id_;
  std::atomic<int> peer_rank_;
  std::string peer_listen_;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> next_id_{1};

  mutable std::mutex conn_mu_;
  std::vector<std::shared_ptr<Connection>> out_;
  std::vector<std::shared_ptr<Connection>> in_;
  std::shared_ptr<Connection> ordered_hold_;     // set once, under conn_mu_
  std::atomic<Connection*> ordered_{nullptr};    // ordered_hold_.get() once chosen

  mutable std::mutex mu_;  // chunks_, sends_, recvs_, failed_
  std::unordered_map<uint64_t, Chunk> chunks_;
  std::unordered_map<uint64_t, SendOp> sends_;
  std::unordered_map<uint64_t, std::shared_ptr<RecvOp>> recvs_;
  Status failed_;
  std::atomic<bool> has_failed_{false};  // failed_ is set: health() locks only then
  std::atomic<bool> graceful_{false};  // the peer said bye: its absence is no error

  detail::TagMatcher matcher_;
  // Notifications are delivered in the order the peer posted its write_notify calls, even
  // though their frames travel on different streams: each carries a number, and the ones
  // that overtake an earlier one wait here.
  std::atomic<uint32_t> notify_out_{0};
  std::atomic<uint32_t> mss_{0};  // the smallest MSS of the outgoing streams (0: unknown)
  std::mutex notify_mu_;
  uint32_t notify_next_ = 0;
  std::map<uint32_t, std::optional<uint64_t>> notify_early_;  // nullopt: refused, skip it
};

}  // namespace podnet::tcp
