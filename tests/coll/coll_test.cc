// Every collective x algorithm x data type x op, over sizes {0, 1, 7, 4096+3, 1 MiB+5}
// and world sizes {1, 2, 3, 4, 5, 8}, checked against a reference computed here, in
// double precision, independently of the library.
//
// Floating-point tolerance: inputs are small integers (exact in every type), so sums,
// products, min and max are exact and compared bit for bit; only avg divides, and is
// compared with a relative tolerance of 1e-6 (float32/float64) or 1e-2 (float16/bfloat16,
// 8 and 11 bits of mantissa).
#include "coll_cases.h"
#include "coll_harness.h"
#include "reference_coll.h"

namespace podnet::testing {
namespace {

struct WorldSize : ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Ranks, WorldSize, ::testing::Values(1, 2, 3, 4, 5, 8));

TEST_P(WorldSize, AllreduceEveryAlgorithmTypeOpSize) {
  const int n = GetParam();
  Pod pod(n);
  for (const char* algo : {"ring", "recursive_doubling", "rabenseifner", "tree", "one_shot", "shm", "cma"}) {
    std::vector<Communicator*> comms(n);
    pod.run([&](int r) {
      comms[r] = &pod.comm(r);
      ASSERT_TRUE(comms[r]->set_algorithm(Collective::kAllreduce, algo).ok());
    });
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t count : kSizes) {
          if (count > 5000 && !big_ok(t, op)) continue;
          if (!forced_runs(algo, Collective::kAllreduce, count, t, n)) continue;
          for (bool in_place : {false, true}) {
            if (in_place && count > 5000) continue;
            pod.run([&](int r) {
              size_t es = dtype_size(t);
              auto send = junk(count * es), recv = junk(count * es);
              fill_input(t, op, r, send.data(), count);
              void* dst = in_place ? send.data() : recv.data();
              Status st = comms[r]->allreduce(send.data(), dst, count, t, op);
              ASSERT_TRUE(st.ok()) << algo << ": " << st.to_string();
              EXPECT_EQ(comms[r]->last_algorithm(Collective::kAllreduce), algo);
              EXPECT_EQ(compare(t, op, n, dst, count, 0, algo, r), 0u);
              // Nothing past the result is written, and an out-of-place send stays as it was.
              EXPECT_EQ(spare_intact(send, algo, "send", r) + spare_intact(recv, algo, "recv", r), 0u);
              if (!in_place) {
                EXPECT_EQ(compare_input(t, op, r, send.data(), count, std::string(algo) + " (send)", r), 0u);
              }
            });
          }
        }
  }
}

}  // namespace
}  // namespace podnet::testing
