// The progress engine's "host is crowded" filter: a snapshot of /proc/loadavg that catches
// one thread more than usual must not switch spinning waiters to yielding for a whole period.
#include <gtest/gtest.h>

#include "transport/progress.h"

namespace podnet::detail {
namespace {

TEST(Hysteresis, FollowsOnlyReadingsThatAgreeSeveralTimesInARow) {
  Hysteresis h(true, 3);
  EXPECT_TRUE(h.update(false));
  EXPECT_TRUE(h.update(false));
  EXPECT_FALSE(h.update(false)) << "the third disagreeing reading in a row flips it";
  // One stray reading, then the usual one: no flip, and the count starts over.
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(false));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(false));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(true));
  EXPECT_TRUE(h.update(true));
  EXPECT_TRUE(h.value());
}

TEST(Hysteresis, OneReadingSufficesWhenAgreeIsOne) {
  Hysteresis h(false, 1);
  EXPECT_TRUE(h.update(true));
  EXPECT_FALSE(h.update(false));
}

}  // namespace
}  // namespace podnet::detail
