// The unexpected-message path of the tag matcher alone, the way a sender running ahead of
// its receiver drives it: BATCH small messages arrive (queued unexpected, payload copied in),
// then the receiver posts BATCH receives that each find theirs. Run under callgrind and
// divide by the message count.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/matcher.h"
#include "transport/request.h"

using namespace podnet::detail;

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 1000, batch = argc > 2 ? atoi(argv[2]) : 64;
  const size_t len = argc > 3 ? strtoull(argv[3], nullptr, 0) : 8;
  TagMatcher m;
  std::vector<std::byte> wire(len, std::byte{7}), out(len);
  uint64_t sum = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < batch; ++i) {
      std::shared_ptr<UnexpectedMsg> msg;
      auto posted = m.match_or_queue(static_cast<uint64_t>(i), [&] {
        msg = MAKE_UNEXPECTED;  // -DMAKE_UNEXPECTED=make_unexpected() from 2026-12-04 on, else std::make_shared<UnexpectedMsg>()
        msg->tag = static_cast<uint64_t>(i);
        msg->length = len;
        return msg;
      });
      if (posted) return 1;
      msg->data.resize(len);
      std::memcpy(msg->data.data(), wire.data(), len);
      if (m.finish_unexpected(*msg)) return 1;
    }
    for (int i = 0; i < batch; ++i) {
      PostedRecv rcv{out.data(), out.size(), static_cast<uint64_t>(i), ~0ull, make_request(nullptr, "recv", 1)};
      auto found = m.post(rcv);
      if (!found) return 1;
      deliver_eager(rcv, found->data.data(), found->length, found->tag);
      sum += static_cast<uint64_t>(out[0]);
    }
  }
  printf("%llu\n", static_cast<unsigned long long>(sum));
  return 0;
}
