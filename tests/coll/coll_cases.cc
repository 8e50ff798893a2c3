// run_case: inputs, the call and the check for every collective (see coll_cases.h).
#include "coll_cases.h"

#include <algorithm>
#include <cstring>

namespace podnet::testing {
namespace {

std::byte* at(std::vector<std::byte>& v, size_t elems, size_t es) { return v.data() + elems * es; }

size_t check_reduce(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t);
  auto send = junk(k.count * es), recv = junk(k.count * es);
  fill_input(k.t, k.op, r, send.data(), k.count);
  const bool in_place = k.variant == Variant::kInPlace;
  void* dst = in_place ? send.data() : recv.data();
  const bool result_here = k.coll == Collective::kAllreduce || r == k.root;
  st = k.coll == Collective::kAllreduce ? c.allreduce(send.data(), dst, k.count, k.t, k.op)
                                        : c.reduce(send.data(), dst, k.count, k.t, k.op, k.root);
  if (!st.ok()) return 0;
  size_t wrong = result_here ? compare(k.t, k.op, n, dst, k.count, 0, what, r) : 0;
  wrong += spare_intact(send, what, "send", r) + spare_intact(recv, what, "recv", r);
  if (!in_place) {
    wrong += compare_input(k.t, k.op, r, send.data(), k.count, what + " (send)", r);
    if (!result_here) wrong += still_junk(recv, what, "recv (a non-root's)", r);
  }
  return wrong;
}

size_t check_reduce_scatter(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t);
  auto send = junk(n * k.count * es), recv = junk(k.count * es);
  fill_input(k.t, k.op, r, send.data(), n * k.count);
  void* dst = k.variant == Variant::kInPlace ? send.data()
              : k.variant == Variant::kAlias ? send.data() + r * k.count * es
                                             : recv.data();
  st = c.reduce_scatter(send.data(), dst, k.count, k.t, k.op);
  if (!st.ok()) return 0;
  size_t wrong = compare(k.t, k.op, n, dst, k.count, r * k.count, what, r);
  wrong += spare_intact(send, what, "send", r) + spare_intact(recv, what, "recv", r);
  if (k.variant == Variant::kOutOfPlace)
    wrong += compare_input(k.t, k.op, r, send.data(), n * k.count, what + " (send)", r);
  return wrong;
}

// In place: one buffer. Out of place: the root's send lands in every recv (the root's too);
// the others' send buffers hold junk that must be ignored, and the root's stays as it was.
size_t check_broadcast(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const size_t es = dtype_size(k.t);
  auto buf = junk(k.count * es);
  if (k.variant == Variant::kInPlace) {
    if (c.rank() == k.root) fill_pattern(k.t, buf.data(), k.count, key_bcast(k.root));
    st = c.broadcast(buf.data(), k.count, k.t, k.root);
    if (!st.ok()) return 0;
    return compare_pattern(k.t, buf.data(), k.count, key_bcast(k.root), what, c.rank()) +
           spare_intact(buf, what, "buffer", c.rank());
  }
  auto send = junk(k.count * es);
  if (c.rank() == k.root) fill_pattern(k.t, send.data(), k.count, key_bcast(k.root));
  st = c.broadcast(send.data(), buf.data(), k.count, k.t, k.root);
  if (!st.ok()) return 0;
  size_t bad = compare_pattern(k.t, buf.data(), k.count, key_bcast(k.root), what, c.rank());
  if (c.rank() == k.root) bad += compare_pattern(k.t, send.data(), k.count, key_bcast(k.root), what + " (root's send)", c.rank());
  bad += spare_intact(buf, what, "recv", c.rank()) + spare_intact(send, what, "send", c.rank());
  if (c.rank() != k.root) bad += still_junk(send, what, "send (a non-root's)", c.rank());
  return bad;
}

// allgather and allgatherv: rank b's block holds key_gather(b).
size_t check_allgather(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t);
  const bool v = k.coll == Collective::kAllgatherv;
  std::vector<size_t> counts(n), off(n + 1, 0);
  for (int b = 0; b < n; ++b) {
    counts[b] = v ? vcount(k.count, b) : k.count;
    off[b + 1] = off[b] + counts[b];
  }
  auto send = junk(counts[r] * es), recv = junk(off[n] * es);
  const void* src = send.data();
  if (k.variant == Variant::kOutOfPlace) {
    fill_pattern(k.t, send.data(), counts[r], key_gather(r));
  } else if (k.variant == Variant::kInPlace) {
    fill_pattern(k.t, at(recv, off[r], es), counts[r], key_gather(r));
    src = at(recv, off[r], es);
  } else {
    fill_pattern(k.t, recv.data(), counts[r], key_gather(r));
    src = recv.data();
  }
  st = v ? c.allgatherv(src, counts[r], recv.data(), counts, k.t) : c.allgather(src, recv.data(), k.count, k.t);
  if (!st.ok()) return 0;
  size_t wrong = 0;
  for (int b = 0; b < n; ++b) wrong += compare_pattern(k.t, at(recv, off[b], es), counts[b], key_gather(b), what, r);
  wrong += spare_intact(recv, what, "recv", r) + spare_intact(send, what, "send", r);
  // Out of place the send block stays as filled; otherwise the call never sees `send`.
  if (k.variant == Variant::kOutOfPlace)
    return wrong + compare_pattern(k.t, send.data(), counts[r], key_gather(r), what + " (send)", r);
  return wrong + still_junk(send, what, "unused send", r);
}

// alltoall and alltoallv: the block from a to b holds key_pair(a, b).
size_t check_alltoall(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t);
  const bool v = k.coll == Collective::kAlltoallv;
  std::vector<size_t> sc(n), rc(n), so(n + 1, 0), ro(n + 1, 0);
  for (int b = 0; b < n; ++b) {
    sc[b] = v ? v2count(k.count, r, b) : k.count;
    rc[b] = v ? v2count(k.count, b, r) : k.count;
    so[b + 1] = so[b] + sc[b];
    ro[b + 1] = ro[b] + rc[b];
  }
  const bool in_place = k.variant == Variant::kInPlace;
  auto send = junk((in_place ? std::max(so[n], ro[n]) : so[n]) * es), recv = junk(ro[n] * es);
  for (int b = 0; b < n; ++b) fill_pattern(k.t, at(send, so[b], es), sc[b], key_pair(r, b));
  void* dst = in_place ? send.data() : recv.data();
  st = v ? c.alltoallv(send.data(), sc, dst, rc, k.t) : c.alltoall(send.data(), dst, k.count, k.t);
  if (!st.ok()) return 0;
  size_t wrong = 0;
  for (int a = 0; a < n; ++a)
    wrong += compare_pattern(k.t, static_cast<std::byte*>(dst) + ro[a] * es, rc[a], key_pair(a, r), what, r);
  wrong += spare_intact(send, what, "send", r) + spare_intact(recv, what, "recv", r);
  if (!in_place)
    for (int b = 0; b < n; ++b)
      wrong += compare_pattern(k.t, at(send, so[b], es), sc[b], key_pair(r, b), what + " (send)", r);
  return wrong;
}

size_t check_gather(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t), bytes = k.count * es;
  auto send = junk(bytes), recv = junk(n * bytes);
  const void* src = send.data();
  if (r != k.root || k.variant == Variant::kOutOfPlace) {
    fill_pattern(k.t, send.data(), k.count, key_gather(r));
  } else if (k.variant == Variant::kInPlace) {
    fill_pattern(k.t, at(recv, r * k.count, es), k.count, key_gather(r));
    src = at(recv, r * k.count, es);
  } else {
    fill_pattern(k.t, recv.data(), k.count, key_gather(r));
    src = recv.data();
  }
  st = c.gather(src, recv.data(), k.count, k.t, k.root);
  if (!st.ok()) return 0;
  size_t wrong = spare_intact(recv, what, "recv", r) + spare_intact(send, what, "send", r);
  wrong += src == send.data() ? compare_pattern(k.t, send.data(), k.count, key_gather(r), what + " (send)", r)
                              : still_junk(send, what, "unused send", r);
  if (r != k.root) return wrong + still_junk(recv, what, "recv (a non-root's)", r);
  for (int b = 0; b < n; ++b) wrong += compare_pattern(k.t, at(recv, b * k.count, es), k.count, key_gather(b), what, r);
  return wrong;
}

// The root's block b holds key_pair(root, b).
size_t check_scatter(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  const size_t es = dtype_size(k.t), bytes = k.count * es;
  auto send = junk(n * bytes), recv = junk(bytes);
  void* dst = recv.data();
  if (r == k.root) {
    for (int b = 0; b < n; ++b) fill_pattern(k.t, at(send, b * k.count, es), k.count, key_pair(k.root, b));
    if (k.variant == Variant::kInPlace) dst = at(send, r * k.count, es);
    if (k.variant == Variant::kAlias) dst = send.data();
  }
  st = c.scatter(send.data(), dst, k.count, k.t, k.root);
  if (!st.ok()) return 0;
  size_t wrong = compare_pattern(k.t, dst, k.count, key_pair(k.root, r), what, r);
  wrong += spare_intact(send, what, "send", r) + spare_intact(recv, what, "recv", r);
  if (r != k.root) return wrong + still_junk(send, what, "send (a non-root's)", r);
  // The root's blocks stay as filled, but for block 0 when its own result lands there (alias).
  for (int b = 0; b < n; ++b)
    if (k.variant != Variant::kAlias || b != 0 || r == 0)
      wrong +=
          compare_pattern(k.t, at(send, b * k.count, es), k.count, key_pair(k.root, b), what + " (root's send)", r);
  return wrong;
}

// Rank r sends to r+shift and receives from r-shift: two messages each way, checking that
// messages between one pair arrive in order. The lower rank of each pair sends first, so
// blocking sends cannot form a cycle.
size_t check_sendrecv(Communicator& c, const Case& k, const std::string& what, Status& st) {
  const int r = c.rank(), n = c.size();
  if (n == 1) return 0;
  const int shift = 1 + k.root % (n - 1), to = (r + shift) % n, from = (r - shift + n) % n;
  const size_t es = dtype_size(k.t);
  std::vector<std::byte> out[2] = {junk(k.count * es), junk(k.count * es)};
  std::vector<std::byte> in[2] = {junk(k.count * es), junk(k.count * es)};
  for (int m = 0; m < 2; ++m) fill_pattern(k.t, out[m].data(), k.count, key_pair(r, to) + 64 * m);
  auto sends = [&] {
    for (int m = 0; m < 2 && st.ok(); ++m) st = c.send(out[m].data(), k.count, k.t, to);
  };
  auto recvs = [&] {
    for (int m = 0; m < 2 && st.ok(); ++m) st = c.recv(in[m].data(), k.count, k.t, from);
  };
  if (r < to) { sends(); recvs(); } else { recvs(); sends(); }
  size_t wrong = 0;
  if (st.ok())
    for (int m = 0; m < 2; ++m) {
      wrong += compare_pattern(k.t, in[m].data(), k.count, key_pair(from, r) + 64 * m, what, r);
      wrong += spare_intact(in[m], what, "recv", r);
      wrong += compare_pattern(k.t, out[m].data(), k.count, key_pair(r, to) + 64 * m, what + " (send)", r);
    }
  return wrong;
}

}  // namespace

size_t run_case(Communicator& c, const Case& k) {
  const std::string what = describe(k, c.size());
  size_t problems = 0;
  if (Status s = c.set_algorithm(k.coll, k.algo); !s.ok()) {
    ADD_FAILURE() << what << " rank " << c.rank() << ": set_algorithm: " << s.to_string();
    ++problems;
  }
  Status st;
  switch (k.coll) {
    case Collective::kAllreduce: case Collective::kReduce: problems += check_reduce(c, k, what, st); break;
    case Collective::kReduceScatter: problems += check_reduce_scatter(c, k, what, st); break;
    case Collective::kBroadcast: problems += check_broadcast(c, k, what, st); break;
    case Collective::kAllgather: case Collective::kAllgatherv: problems += check_allgather(c, k, what, st); break;
    case Collective::kAlltoall: case Collective::kAlltoallv: problems += check_alltoall(c, k, what, st); break;
    case Collective::kGather: problems += check_gather(c, k, what, st); break;
    case Collective::kScatter: problems += check_scatter(c, k, what, st); break;
    case Collective::kBarrier: st = c.barrier(); break;
    case Collective::kSendRecv: problems += check_sendrecv(c, k, what, st); break;
  }
  if (!st.ok()) {
    ADD_FAILURE() << what << " rank " << c.rank() << ": " << st.to_string();
    return problems + 1;
  }
  if (k.coll == Collective::kSendRecv && c.size() == 1) return problems;
  const std::string used = c.last_algorithm(k.coll);
  const auto names = expected_algorithms(k.coll);
  if (!k.algo.empty() ? used != k.algo
                      : !names.empty() && std::find(names.begin(), names.end(), used) == names.end()) {
    ADD_FAILURE() << what << " rank " << c.rank() << ": last_algorithm is '" << used << "'";
    ++problems;
  }
  return problems;
}

}  // namespace podnet::testing
