#include "coll/tuner.h"

#include <algorithm>

namespace podnet::detail {

const std::vector<std::string_view>& algorithms_for(Collective c) {
  static const std::vector<std::string_view> kAllreduce{"ring", "recursive_doubling", "rabenseifner", "tree",
                                                        "one_shot"};
  static const std::vector<std::string_view> kBroadcast{"binomial", "chain"};
  static const std::vector<std::string_view> kAllgather{"ring", "recursive_doubling", "bruck"};
  static const std::vector<std::string_view> kReduceScatter{"ring", "recursive_halving"};
  static const std::vector<std::string_view> kAlltoall{"pairwise", "bruck"};
  static const std::vector<std::string_view> kBarrier{"dissemination"};
  static const std::vector<std::string_view> kReduce{"binomial"};
  static const std::vector<std::string_view> kLinear{"linear"};
  static const std::vector<std::string_view> kRing{"ring"};
  static const std::vector<std::string_view> kPairwise{"pairwise"};
  static const std::vector<std::string_view> kDirect{"direct"};
  switch (c) {
    case Collective::kAllreduce: return kAllreduce;
    case Collective::kBroadcast: return kBroadcast;
    case Collective::kAllgather: return kAllgather;
    case Collective::kReduceScatter: return kReduceScatter;
    case Collective::kAlltoall: return kAlltoall;
    case Collective::kBarrier: return kBarrier;
    case Collective::kReduce: return kReduce;
    case Collective::kAllgatherv: return kRing;
    case Collective::kAlltoallv: return kPairwise;
    case Collective::kSendRecv: return kDirect;
    default: return kLinear;
  }
}

std::string_view choose_algorithm(Collective c, size_t bytes, int n) {
  // Measured on loopback TCP (bench/coll notes): latency-bound sizes want few dependent
  // rounds; bandwidth-bound sizes want every byte to cross each link about once.
  switch (c) {
    case Collective::kAllreduce:
      if (n <= 2) return bytes <= (256u << 10) ? "one_shot" : "ring";
      if (bytes <= 4096 && n <= 8) return "one_shot";
      if (bytes <= (64u << 10)) return "recursive_doubling";
      if (bytes <= (1u << 20)) return "rabenseifner";
      return "ring";
    case Collective::kBroadcast:
      return bytes <= (256u << 10) || n <= 2 ? "binomial" : "chain";
    case Collective::kAllgather:
      return bytes <= (16u << 10) ? "bruck" : "ring";
    case Collective::kReduceScatter:
      return "ring";
    case Collective::kAlltoall:
      return bytes <= 1024 && n > 2 ? "bruck" : "pairwise";
    default:
      return algorithms_for(c).front();
  }
}

Status validate_algorithm(Collective c, std::string_view name) {
  const auto& v = algorithms_for(c);
  if (std::find(v.begin(), v.end(), name) != v.end()) return {};
  std::string names;
  for (auto a : v) names += (names.empty() ? "" : ", ") + std::string(a);
  return Status::InvalidArgument("{} has no algorithm '{}' (available: {})", collective_name(c), name, names);
}

}  // namespace podnet::detail
