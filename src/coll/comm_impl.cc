#include "coll/comm_impl.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "coll/algorithms.h"
#include "coll/tuner.h"
#include "xfer/context_impl.h"
#include "xfer/endpoint_impl.h"
#include "xfer/world.h"

namespace podnet {

std::string_view collective_name(Collective c) noexcept {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kReduce: return "reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllgather: return "allgather";
    case Collective::kAllgatherv: return "allgatherv";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kAlltoallv: return "alltoallv";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kBarrier: return "barrier";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "?";
}

Result<std::unique_ptr<Communicator>> Communicator::create(World& world) {
  std::vector<int> members(world.size());
  for (int i = 0; i < world.size(); ++i) members[i] = i;
  return std::unique_ptr<Communicator>(new detail::CommImpl(world, std::move(members), world.rank(), 1));
}

bool Work::test() const { return state_ && state_->done(); }
Status Work::wait(std::chrono::nanoseconds timeout) {
  if (!state_) return Status::InvalidArgument("wait on an empty work handle");
  return state_->wait(timeout);
}
Status Work::wait() { return wait(std::chrono::hours(24 * 365)); }

namespace detail {

void WorkState::finish(Status st) {
  {
    std::lock_guard lk(mu_);
    status_ = std::move(st);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

Status WorkState::wait(std::chrono::nanoseconds timeout) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return done_.load(); }))
    return Status::Timeout("collective still running after {} ms",
                           std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  return status_;
}

CommImpl::CommImpl(World& world, std::vector<int> members, int rank, uint32_t id)
    : world_(world), members_(std::move(members)), rank_(rank), id_(id) {
  const Config& cfg = config();
  timeout_ = std::chrono::milliseconds(cfg.coll_timeout_ms);
  eps_.resize(members_.size());
  p2p_send_seq_.assign(members_.size(), 0);
  p2p_recv_seq_.assign(members_.size(), 0);
  scratch_.resize(4);
  const std::pair<Collective, const std::string*> knobs[] = {
      {Collective::kAllreduce, &cfg.algo_allreduce},         {Collective::kBroadcast, &cfg.algo_broadcast},
      {Collective::kAllgather, &cfg.algo_allgather},         {Collective::kReduceScatter, &cfg.algo_reduce_scatter},
      {Collective::kAlltoall, &cfg.algo_alltoall}};
  for (auto& [c, v] : knobs) {
    if (v->empty()) continue;
    Status st = validate_algorithm(c, *v);
    if (!st.ok()) {
      // Refuse loudly at first use rather than silently running something else.
      abort(st.with_context("PODNET_ALGO_{}", collective_name(c)));
      continue;
    }
    overrides_[c] = canonical_name(c, *v);
  }
  if (cfg.shm_prefer != "probe" && cfg.shm_prefer != "arena" && cfg.shm_prefer != "cma")
    abort(Status::InvalidArgument("PODNET_SHM_PREFER='{}': expected probe, arena or cma", cfg.shm_prefer));
}

CommImpl::~CommImpl() {
  {
    std::lock_guard lk(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // Nothing this communicator posted may complete into freed or reused memory later.
  Call::cancel_all(*this);
}

Status CommImpl::aborted() const {
  if (!is_aborted_.load(std::memory_order_acquire)) return {};
  std::lock_guard lk(abort_mu_);
  return aborted_;
}

namespace {
// Abort messages carry both top tag bits, which no collective message (bit 62 only) has.
constexpr uint64_t kAbortTagBase = 3ull << 62;
constexpr size_t kAbortTextMax = 2048;
}  // namespace

uint64_t CommImpl::abort_tag(uint32_t id) { return kAbortTagBase | static_cast<uint64_t>(id); }

// On the communicator's thread, after eps_ is complete. abort() may run on another thread:
// it reads eps_ only once `listeners_armed_` is set under abort_mu_, after which eps_ never
// changes. An abort that came before (and so could not tell the peers) is sent now.
void CommImpl::arm_abort_listeners() {
  if (listeners_posted_) return;
  listeners_posted_ = true;
  abort_listeners_.resize(size());
  abort_texts_.resize(size());
  uint64_t tag = abort_tag(id_);
  for (int p = 0; p < size(); ++p) {
    if (p == rank_) continue;
    auto text = std::make_shared<std::string>(kAbortTextMax, '\0');
    abort_texts_[p] = text;
    abort_listeners_[p] = eps_[p]->recv(text->data(), text->size(), tag);
    // The callback keeps the buffer alive until the receive completes (an abort message, or
    // the cancel when this communicator is destroyed).
    abort_listeners_[p].on_complete([text](const Status&) {});
  }
  Status pending;
  {
    std::lock_guard lk(abort_mu_);
    listeners_armed_ = true;
    if (is_aborted_.load(std::memory_order_relaxed) && !abort_sent_) pending = aborted_;
  }
  if (!pending.ok()) broadcast_abort(pending, CallInfo{});
}

// Abort payload: the sender's CallInfo (fixed 24 bytes), then the reason as text.
constexpr size_t kInfoBytes = 24;

void CommImpl::broadcast_abort(const Status& why, const CallInfo& mine) {
  {
    std::lock_guard lk(abort_mu_);
    if (abort_sent_ || !listeners_armed_) return;
    abort_sent_ = true;
  }
  auto text = std::make_shared<std::string>(kInfoBytes, '\0');
  uint8_t small[4] = {static_cast<uint8_t>(mine.coll), static_cast<uint8_t>(mine.dtype),
                      static_cast<uint8_t>(mine.op), 1};
  std::memcpy(text->data(), &mine.seq, 4);
  std::memcpy(text->data() + 4, small, 4);
  std::memcpy(text->data() + 8, &mine.count, 8);
  std::memcpy(text->data() + 16, &mine.root, 4);
  *text += why.message().substr(0, kAbortTextMax - kInfoBytes);
  uint64_t tag = kAbortTagBase | static_cast<uint64_t>(id_);
  for (int p = 0; p < size(); ++p) {
    if (p == rank_ || !eps_[p]) continue;
    // Fire and forget: the peers may be gone; the text lives until the send completes.
    Request r = eps_[p]->send(text->data(), text->size(), tag);
    r.on_complete([text](const Status&) {});
  }
}

namespace {
bool parse_abort(const std::string& buf, size_t n, CallInfo* info, std::string* text) {
  if (n < kInfoBytes) return false;
  uint8_t small[4];
  std::memcpy(&info->seq, buf.data(), 4);
  std::memcpy(small, buf.data() + 4, 4);
  std::memcpy(&info->count, buf.data() + 8, 8);
  std::memcpy(&info->root, buf.data() + 16, 4);
  if (small[3] != 1) return false;
  info->coll = static_cast<Collective>(small[0]);
  info->dtype = static_cast<DataType>(small[1]);
  info->op = static_cast<ReduceOp>(small[2]);
  text->assign(buf.data() + kInfoBytes, n - kInfoBytes);
  return true;
}
}  // namespace

std::vector<std::pair<int, CallInfo>> CommImpl::remote_calls() {
  std::vector<std::pair<int, CallInfo>> out;
  for (int p = 0; p < static_cast<int>(abort_listeners_.size()); ++p) {
    Request& r = abort_listeners_[p];
    if (!r.valid() || !r.test() || !r.status().ok()) continue;
    CallInfo ci;
    std::string text;
    if (parse_abort(*abort_texts_[p], r.bytes(), &ci, &text)) out.emplace_back(p, ci);
  }
  return out;
}

Status CommImpl::check_remote_abort(const CallInfo& mine) {
  if (Status a = aborted(); !a.ok()) return a;
  for (int p = 0; p < static_cast<int>(abort_listeners_.size()); ++p) {
    Request& r = abort_listeners_[p];
    if (!r.valid() || !r.done() || !r.status().ok()) continue;
    CallInfo theirs;
    std::string text;
    if (!parse_abort(*abort_texts_[p], r.bytes(), &theirs, &text)) text = "(malformed abort message)";
    Status st;
    if (!theirs.same_call(mine))
      st = Status::InvalidArgument("rank {} is in {} while this rank is in {}: every rank must call the same "
                                   "collectives with the same arguments (rank {} aborted: {})",
                                   p, theirs.describe(), mine.describe(), p, text);
    else
      st = Status(Code::kCancelled, fmt::format("rank {} aborted the communicator: {}", p, text));
    std::lock_guard lk(abort_mu_);
    if (aborted_.ok()) {
      aborted_ = st;
      is_aborted_.store(true, std::memory_order_release);
      abort_sent_ = true;  // the others heard it from that rank already
    }
    return aborted_;
  }
  return {};
}

void CommImpl::abort(const Status& why) {
  Status st;
  {
    std::lock_guard lk(abort_mu_);
    if (aborted_.ok()) aborted_ = Status(why.ok() ? Code::kCancelled : why.code(), "aborted: " + why.message());
    is_aborted_.store(true, std::memory_order_release);
    st = aborted_;
  }
  // Never waits: the peers hear about it through fire-and-forget messages.
  broadcast_abort(st, CallInfo{});
}

// A failed call may leave receives posted into scratch (a peer's message can still arrive
// and be copied there, even after this communicator is gone): its buffers are never freed or
// resized again. They go to a list that lives as long as the process (memory stays reachable,
// so leak checkers stay quiet); the next call starts with fresh ones.
void CommImpl::retire_scratch() {
  static std::mutex mu;
  static auto* graveyard = new std::vector<std::vector<std::byte>>();
  std::lock_guard lk(mu);
  for (auto& s : scratch_)
    if (s.capacity() > 0) graveyard->push_back(std::move(s));
  for (auto& s : scratch_) s = {};
}

std::byte* CommImpl::scratch(size_t bytes, int which) {
  auto& s = scratch_[which];
  if (s.size() < bytes) s.resize(bytes);
  return s.data();
}

std::string_view CommImpl::algo_override(Collective c) const {
  if (overrides_.empty()) return {};
  auto it = overrides_.find(c);
  return it == overrides_.end() ? std::string_view() : it->second;
}

Status CommImpl::set_algorithm(Collective c, std::string_view name) {
  // Calls already queued keep the algorithm they were posted with: every rank changes its
  // choice at the same point of its call sequence.
  drain_queue();
  pick_memo_.fill(PickMemo{});
  if (name.empty()) {
    overrides_.erase(c);
    return {};
  }
  PODNET_RETURN_IF_ERROR(validate_algorithm(c, name));
  overrides_[c] = canonical_name(c, name);
  return {};
}

std::string CommImpl::last_algorithm(Collective c) const {
  const char* a = last_algo_[static_cast<size_t>(c)].load(std::memory_order_acquire);
  return a == nullptr ? "" : a;
}

Status CommImpl::check_root(const char* what, int root) const {
  if (root < 0 || root >= size())
    return Status::InvalidArgument("{}: root {} is outside the communicator of {} ranks", what, root, size());
  return {};
}

template <typename Body>
Status CommImpl::run(Collective c, DataType t, ReduceOp op, size_t count, int root, Body&& body) {
  // One thread at a time uses a communicator (coll.h), and the worker runs queued calls only
  // while the user's thread is not inside one (drain_queue): no lock on this path.
  drain_queue();
  if (Status a = aborted(); !a.ok())
    return a.with_context("{} on rank {}", collective_name(c), rank_);
  for (int p = 0; p < size(); ++p) {
    if (eps_[p]) continue;
    auto ep = world_.peer(members_[p]);
    if (!ep.ok()) return ep.status().with_context("{}: connecting to rank {}", collective_name(c), p);
    eps_[p] = std::move(ep).value();
  }
  arm_abort_listeners();
  if (c != Collective::kSendRecv && !arena_tried_) {
    arena_tried_ = true;
    PODNET_RETURN_IF_ERROR(setup_arena());
  }
  Call call(*this, c, t, op, count, root);
  if (arena_ && c != Collective::kSendRecv) arena_->publish(call.info());
  Status st = body(call);
  last_algo_[static_cast<size_t>(c)].store(call.algorithm(), std::memory_order_release);
  if (!st.ok()) {
    PODNET_WARN(kColl, "{}", st.message());
    call.cancel_receives();
    retire_scratch();
    // Tell the other ranks, so that they fail now with this reason instead of waiting for
    // a timeout (or for data that will never come).
    if (st.code() != Code::kPeerFailed) broadcast_abort(st, call.info());
  }
  return st;
}

Status CommImpl::setup_arena() {
  const size_t slot = config().shm_coll_max;
  bool local_ok = slot > 0;
  std::string why = local_ok ? "" : "PODNET_SHM_COLL_MAX=0";
  for (int p = 0; p < size() && local_ok; ++p) {
    if (p == rank_ || eps_[p]->transport() == "shm") continue;
    local_ok = false;
    why = fmt::format("rank {} is reached over {}", p, eps_[p]->transport());
  }
  Call setup(*this, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, -1);
  setup.set_algorithm("arena setup");
  auto a = Arena::establish(setup, slot, local_ok, &why);
  if (!a.ok()) return a.status().with_context("setting up the shared-memory arena of communicator {:#x}", id_);
  arena_ = std::move(a).value();
  if (arena_)
    PODNET_INFO(kColl, "communicator {:#x}: shared-memory arena for {} ranks, {} bytes per slot, cross-memory copies {}",
                id_, size(), slot, !arena_->cma() ? "off" : arena_->cma_cheap() ? "preferred" : "past the arena's crossovers");
  else if (size() > 1)
    PODNET_INFO(kColl, "communicator {:#x}: no shared-memory arena ({})", id_, why);
  return {};
}

std::string_view CommImpl::pick(Collective c, size_t bytes) {
  PickMemo& memo = pick_memo_[static_cast<size_t>(c)];
  if (memo.bytes == bytes && !memo.algo.empty()) return memo.algo;
  memo.algo = choose(c, bytes);
  memo.bytes = bytes;
  return memo.algo;
}

std::string_view CommImpl::choose(Collective c, size_t bytes) {
  const size_t need = algo::arena_bytes(c, bytes, size());
  // allreduce, allgather and alltoall go through the arena in slot-sized parts: any size fits.
  const bool parts = c == Collective::kAllreduce || c == Collective::kAllgather || c == Collective::kAlltoall;
  const bool fits = arena_ && (need <= arena_->slot_bytes() || parts);
  const bool cma = arena_ && arena_->cma();
  std::string_view o = algo_override(c);
  if (!o.empty() && (o != "shm" || fits) && (o != "cma" || cma)) return o;
  if (!o.empty() && !warned_shm_fallback_) {
    warned_shm_fallback_ = true;
    std::string why;
    if (!arena_)
      why = "this communicator has no shared-memory arena (ranks on other hosts, or PODNET_SHM_COLL_MAX=0)";
    else if (o == "cma")
      why = "not every rank may read every other one's memory (PODNET_SHM_CMA=0, or ptrace rules)";
    else
      why = fmt::format("this call needs {} bytes per slot (PODNET_SHM_COLL_MAX={})", need, arena_->slot_bytes());
    PODNET_WARN(kColl, "{}: algorithm {} forced, but {}; using the tuner's choice (the benchmark rows say which ran)",
                collective_name(c), o, why);
  }
  // A table measured on this many ranks (`podnet tune`, which times shm too) comes first.
  const TuneTable* t = loaded_tune_table();
  const bool no_table = t == nullptr || t->nranks != size();
  const bool cheap = arena_ && arena_->cma_cheap();
  const bool split = cma && !world_.oversubscribed();  // the same on every rank, as all of these
  if (fits && no_table &&
      (need <= arena_crossover(c, size(), cma, cheap, split) || need >= arena_parts_from(c, size(), cma)))
    return "shm";
  if (cma && no_table && cma_beyond_arena(c, size(), cheap)) return "cma";
  bool over_shm = size() > 1;
  for (int p = 0; p < size() && over_shm; ++p)
    if (p != rank_ && eps_[p] && eps_[p]->transport() != "shm") over_shm = false;
  std::string_view a = choose_algorithm(c, bytes, size(), world_.slow_links(), world_.oversubscribed(), over_shm);
  if (a == "shm" && !fits) return algorithms_for(c).front();  // measured with an arena this call does not fit
  return a;
}

Status CommImpl::allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) {
  return run(Collective::kAllreduce, t, op, count, -1, [&](Call& c) {
    std::string_view a = pick(Collective::kAllreduce, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_allreduce(c, *arena_, send, recv, count);
    if (a == "cma") return algo::cma_allreduce(c, *arena_, send, recv, count);
    if (a == "recursive_doubling") return algo::allreduce_recursive_doubling(c, send, recv, count);
    if (a == "rabenseifner") return algo::allreduce_rabenseifner(c, send, recv, count);
    if (a == "tree") return algo::allreduce_tree(c, send, recv, count);
    if (a == "one_shot") return algo::allreduce_one_shot(c, send, recv, count);
    return algo::allreduce_ring(c, send, recv, count);
  });
}

Status CommImpl::reduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op, int root) {
  PODNET_RETURN_IF_ERROR(check_root("reduce", root));
  return run(Collective::kReduce, t, op, count, root, [&](Call& c) {
    std::string_view a = pick(Collective::kReduce, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_reduce(c, *arena_, send, recv, count, root);
    return algo::reduce_binomial(c, send, recv, count, root);
  });
}

uint64_t CommImpl::allocated_key(const void* p, size_t len) {
  // ContextImpl and EndpointImpl are the only implementations of Context and Endpoint.
  return static_cast<ContextImpl&>(world_.context()).allocated_key(p, len);
}

Request CommImpl::send_whole(int r, const void* buf, size_t len, uint64_t tag) {
  return static_cast<EndpointImpl&>(peer(r)).send_whole(buf, len, tag);
}

Request CommImpl::send_exchange(int r, const void* buf, size_t len, uint64_t tag) {
  return static_cast<EndpointImpl&>(peer(r)).send_exchange(buf, len, tag);
}

bool CommImpl::copy_mapped(int r, uint64_t key, uint64_t addr, void* local, size_t len, bool read) {
  if (key == 0 || !connected(r)) return false;
  if (!static_cast<EndpointImpl&>(peer(r)).copy_mapped_now(key, addr, local, len, read)) return false;
  mapped_copies_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::shared_ptr<const std::byte> CommImpl::view_mapped(int r, uint64_t key, uint64_t addr, size_t len) {
  if (key == 0 || !connected(r)) return nullptr;
  auto v = static_cast<EndpointImpl&>(peer(r)).view_mapped(key, addr, len);
  if (v) mapped_views_.fetch_add(1, std::memory_order_relaxed);
  return v;
}

Status CommImpl::broadcast(void* buf, size_t count, DataType t, int root) { return broadcast(buf, buf, count, t, root); }

Status CommImpl::broadcast(const void* send, void* recv, size_t count, DataType t, int root) {
  PODNET_RETURN_IF_ERROR(check_root("broadcast", root));
  if (rank_ == root && send == nullptr && count > 0) return Status::InvalidArgument("broadcast: null send buffer at the root");
  return run(Collective::kBroadcast, t, ReduceOp::kSum, count, root, [&](Call& c) {
    std::string_view a = pick(Collective::kBroadcast, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_broadcast(c, *arena_, send, recv, count, root);
    if (a == "chain") return algo::broadcast_chain(c, send, recv, count, root);
    return algo::broadcast_binomial(c, send, recv, count, root);
  });
}

Status CommImpl::allgather(const void* send, void* recv, size_t count, DataType t) {
  return run(Collective::kAllgather, t, ReduceOp::kSum, count, -1, [&](Call& c) {
    std::string_view a = pick(Collective::kAllgather, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_allgather(c, *arena_, send, recv, count);
    if (a == "bruck") return algo::allgather_bruck(c, send, recv, count);
    if (a == "recursive_doubling") return algo::allgather_recursive_doubling(c, send, recv, count);
    if (a == "linear") return algo::allgather_linear(c, send, recv, count);
    if (a == "cma") return algo::cma_allgather(c, *arena_, send, recv, count);
    return algo::allgather_ring(c, send, recv, count, world_.slow_links());
  });
}

Status CommImpl::allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                            DataType t) {
  if (counts.size() != static_cast<size_t>(size()) || counts[rank_] != send_count)
    return Status::InvalidArgument("allgatherv: counts has {} entries (need {}) or counts[{}] != send count {}",
                                   counts.size(), size(), rank_, send_count);
  return run(Collective::kAllgatherv, t, ReduceOp::kSum, 0, -1, [&](Call& c) {
    c.set_algorithm("ring");
    return algo::allgatherv_ring(c, send, recv, counts);
  });
}

Status CommImpl::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) {
  return run(Collective::kReduceScatter, t, op, recv_count, -1, [&](Call& c) {
    std::string_view a = pick(Collective::kReduceScatter, recv_count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_reduce_scatter(c, *arena_, send, recv, recv_count);
    if (a == "recursive_halving") return algo::reduce_scatter_recursive_halving(c, send, recv, recv_count);
    return algo::reduce_scatter_ring(c, send, recv, recv_count, world_.slow_links());
  });
}

Status CommImpl::alltoall(const void* send, void* recv, size_t count, DataType t) {
  return run(Collective::kAlltoall, t, ReduceOp::kSum, count, -1, [&](Call& c) {
    std::string_view a = pick(Collective::kAlltoall, count * c.esize());
    // In place, "cma" swaps each pair's blocks half by half (algo::cma_alltoall). Two ranks
    // go through the arena's parts instead unless the arena's probe found cross-memory
    // copies cheaper than hand-overs (2026-12-07, in place, -n 100, four interleaved rounds;
    // in the two where the arena ran fast: 1 / 4 / 16 MiB 46-48 us / 190-366 us / 1.34-1.89
    // ms against the swap's 93-100 / 346-348 / 2.08-2.12; in the two where it ran slow:
    // 189-191 / 686-690 / 2.55-2.75 ms against 96-98 / 348-356 / 1.87-2.17). More ranks
    // swap wherever "cma" runs out of place (4 ranks on 2 CPUs, two rounds, -n 50: 512 KiB
    // / 1 / 4 MiB 171-176 / 277-304 / 1106-1263 us against the arena's 234-334 / 483-501 /
    // 2073-2098; 3 ranks 512 KiB 138-157 against 189-191, 1 MiB even, 4 MiB 1459-1491
    // against 1659-1772; 8 ranks 1 / 4 MiB 826-886 / 4700-4967 against 992-1440 /
    // 6294-6604). Before the swap, "cma" in place copied every outgoing block aside first.
    if (a == "cma" && send == recv && size() <= 2 && !arena_->cma_cheap() &&
        algo_override(Collective::kAlltoall).empty())
      a = "shm";
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_alltoall(c, *arena_, send, recv, count);
    if (a == "bruck") return algo::alltoall_bruck(c, send, recv, count);
    if (a == "linear") return algo::alltoall_linear(c, send, recv, count);
    if (a == "cma") return algo::cma_alltoall(c, *arena_, send, recv, count);
    return algo::alltoall_pairwise(c, send, recv, count);
  });
}

Status CommImpl::alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                           const std::vector<size_t>& recv_counts, DataType t) {
  if (send_counts.size() != static_cast<size_t>(size()) || recv_counts.size() != static_cast<size_t>(size()))
    return Status::InvalidArgument("alltoallv: counts need {} entries", size());
  return run(Collective::kAlltoallv, t, ReduceOp::kSum, 0, -1, [&](Call& c) {
    c.set_algorithm("pairwise");
    return algo::alltoallv_pairwise(c, send, send_counts, recv, recv_counts);
  });
}

Status CommImpl::gather(const void* send, void* recv, size_t count, DataType t, int root) {
  PODNET_RETURN_IF_ERROR(check_root("gather", root));
  return run(Collective::kGather, t, ReduceOp::kSum, count, root, [&](Call& c) {
    std::string_view a = pick(Collective::kGather, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_gather(c, *arena_, send, recv, count, root);
    return algo::gather_linear(c, send, recv, count, root);
  });
}

Status CommImpl::scatter(const void* send, void* recv, size_t count, DataType t, int root) {
  PODNET_RETURN_IF_ERROR(check_root("scatter", root));
  return run(Collective::kScatter, t, ReduceOp::kSum, count, root, [&](Call& c) {
    std::string_view a = pick(Collective::kScatter, count * c.esize());
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_scatter(c, *arena_, send, recv, count, root);
    return algo::scatter_linear(c, send, recv, count, root);
  });
}

Status CommImpl::barrier() {
  return run(Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, -1, [&](Call& c) {
    std::string_view a = pick(Collective::kBarrier, 0);
    c.set_algorithm(a.data());
    if (a == "shm") return algo::shm_barrier(c, *arena_);
    return algo::barrier_dissemination(c);
  });
}

Status CommImpl::send(const void* buf, size_t count, DataType t, int peer) {
  PODNET_RETURN_IF_ERROR(check_root("send", peer));
  return run(Collective::kSendRecv, t, ReduceOp::kSum, count, -1, [&](Call& c) {
    c.set_algorithm("direct");
    return c.send(peer, buf, count * c.esize(), next_p2p_seq(peer, true) & 0xFFFF);
  });
}

Status CommImpl::recv(void* buf, size_t count, DataType t, int peer) {
  PODNET_RETURN_IF_ERROR(check_root("recv", peer));
  return run(Collective::kSendRecv, t, ReduceOp::kSum, count, -1, [&](Call& c) {
    c.set_algorithm("direct");
    return c.recv(peer, buf, count * c.esize(), next_p2p_seq(peer, false) & 0xFFFF);
  });
}

// ---- non-blocking ----------------------------------------------------------------------

namespace {
thread_local bool t_in_worker = false;
}

void CommImpl::drain_queue() {
  if (t_in_worker) return;  // the worker runs queued calls in order already
  if (inflight_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock lk(q_mu_);
  q_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

Work CommImpl::enqueue(std::function<Status()> fn) {
  auto ws = std::make_shared<WorkState>();
  {
    std::lock_guard lk(q_mu_);
    queue_.emplace_back(std::move(fn), ws);
    inflight_.fetch_add(1, std::memory_order_release);
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  q_cv_.notify_all();
  return Work(ws);
}

void CommImpl::worker_loop() {
  t_in_worker = true;
  std::unique_lock lk(q_mu_);
  for (;;) {
    q_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    auto [fn, ws] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    Status st = fn();
    ws->finish(std::move(st));
    lk.lock();
    busy_ = false;
    inflight_.fetch_sub(1, std::memory_order_release);
    q_cv_.notify_all();
  }
}

// The queued function runs the blocking form on the worker thread (run() knows not to wait
// for the queue there).
Work CommImpl::iallreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) {
  return enqueue([=, this] { return allreduce(send, recv, count, t, op); });
}
Work CommImpl::ibroadcast(void* buf, size_t count, DataType t, int root) {
  return enqueue([=, this] { return broadcast(buf, count, t, root); });
}
Work CommImpl::iallgather(const void* send, void* recv, size_t count, DataType t) {
  return enqueue([=, this] { return allgather(send, recv, count, t); });
}
Work CommImpl::ireduce_scatter(const void* send, void* recv, size_t recv_count, DataType t, ReduceOp op) {
  return enqueue([=, this] { return reduce_scatter(send, recv, recv_count, t, op); });
}
Work CommImpl::ialltoall(const void* send, void* recv, size_t count, DataType t) {
  return enqueue([=, this] { return alltoall(send, recv, count, t); });
}
Work CommImpl::ibarrier() {
  return enqueue([this] { return barrier(); });
}

// ---- split / dup -------------------------------------------------------------------------

Result<std::unique_ptr<Communicator>> CommImpl::split(int color, int key) {
  const int n = size();
  int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * n);
  PODNET_RETURN_IF_ERROR(allgather(mine, all.data(), 2, DataType::kInt64).with_context("split"));
  uint32_t split_no = ++splits_;
  if (color < 0) return std::unique_ptr<Communicator>();
  std::vector<std::pair<int64_t, int>> group;  // (key, parent rank)
  for (int p = 0; p < n; ++p)
    if (all[2 * p] == color) group.emplace_back(all[2 * p + 1], p);
  std::sort(group.begin(), group.end());
  std::vector<int> members;
  int new_rank = -1;
  for (auto& [k, p] : group) {
    if (p == rank_) new_rank = static_cast<int>(members.size());
    members.push_back(members_[p]);
  }
  // Every member derives the same id from (parent id, split number, color).
  uint64_t h = (static_cast<uint64_t>(id_) * 0x9E3779B97F4A7C15ull) ^ (split_no * 0xC2B2AE3D27D4EB4Full) ^
               (static_cast<uint64_t>(color) * 0x165667B19E3779F9ull);
  h ^= h >> 31;
  uint32_t id = static_cast<uint32_t>(h % 0x1FFFE) + 2;  // 17 bits, never 0 or the world's 1
  return std::unique_ptr<Communicator>(new CommImpl(world_, std::move(members), new_rank, id));
}

Result<std::unique_ptr<Communicator>> CommImpl::dup() { return split(0, rank_); }

}  // namespace detail
}  // namespace podnet
