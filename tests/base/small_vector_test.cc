// SmallVector: insertion order and indexing across the inline part and the overflow, and every element
// destroyed exactly once (by clear() or the destructor).
#include "base/small_vector.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace podnet {
namespace {

TEST(SmallVector, KeepsOrderPastTheInlinePartAndDestroysEachElementOnce) {
  auto alive = std::make_shared<int>(0);
  struct Counted {
    std::shared_ptr<int> alive;
    std::string name;
    Counted(std::shared_ptr<int> a, std::string n) : alive(std::move(a)), name(std::move(n)) { ++*alive; }
    Counted(Counted&& o) noexcept : alive(o.alive), name(std::move(o.name)) { ++*alive; }
    ~Counted() { --*alive; }
  };
  {
    SmallVector<Counted, 2> v;
    for (int i = 0; i < 5; ++i) v.emplace_back(alive, "e" + std::to_string(i));
    EXPECT_EQ(v.size(), 5u);
    EXPECT_EQ(*alive, 5);
    std::vector<std::string> seen;
    v.for_each([&](Counted& c) { seen.push_back(c.name); });
    EXPECT_EQ(seen, (std::vector<std::string>{"e0", "e1", "e2", "e3", "e4"}));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i].name, "e" + std::to_string(i)) << "index " << i;
    v.clear();
    EXPECT_TRUE(v.empty());
    EXPECT_EQ(*alive, 0);
    v.emplace_back(alive, "again");
    EXPECT_EQ(*alive, 1);
  }
  EXPECT_EQ(*alive, 0) << "the destructor destroys what is left";
}

}  // namespace
}  // namespace podnet
