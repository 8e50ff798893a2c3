#include "bench_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace podnet::tool {
namespace {
constexpr size_t kHuge = size_t{2} << 20;
constexpr const char* kThpFile = "/sys/kernel/mm/transparent_hugepage/enabled";
}  // namespace

BenchBuffer::~BenchBuffer() {
  if (map_ != nullptr) munmap(map_, mapped_);
}

Status BenchBuffer::allocate(size_t bytes, bool hugepages) {
  mapped_ = bytes + (hugepages ? kHuge : 0);
  void* m = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    map_ = nullptr;
    return Status::Unavailable("bench buffer of {} bytes: mmap: {}", bytes, std::strerror(errno));
  }
  map_ = static_cast<std::byte*>(m);
  data_ = map_;
  size_ = bytes;
  if (!hugepages) return {};
  data_ = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map_) + kHuge - 1) & ~uintptr_t{kHuge - 1});
  std::string thp;
  std::getline(std::ifstream(kThpFile), thp);
  if (thp.empty() || thp.find("[never]") != std::string::npos)
    return Status::Unavailable("--hugepages: transparent huge pages are off ({}: '{}')", kThpFile, thp);
  if (madvise(data_, (bytes + kHuge - 1) & ~(kHuge - 1), MADV_HUGEPAGE) != 0)
    return Status::Unavailable("--hugepages: madvise(MADV_HUGEPAGE): {}", std::strerror(errno));
  return {};
}

size_t BenchBuffer::huge_bytes() const {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  size_t total = 0;
  // madvise split the mapping: sum over every area that overlaps the buffer.
  const auto from = reinterpret_cast<uintptr_t>(data_), to = from + size_;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      ours = lo < to && hi > from;  // an area's header line
    } else if (ours && line.rfind("AnonHugePages:", 0) == 0) {
      total += std::strtoull(line.c_str() + 14, nullptr, 10) * 1024;
    }
  }
  return total;
}

}  // namespace podnet::tool
