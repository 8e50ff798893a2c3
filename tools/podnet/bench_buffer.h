// The point-to-point benchmark's buffer: anonymous memory, optionally on 2 MiB transparent
// huge pages (`podnet bench p2p --hugepages`, as perftest's --use_hugepages).
#pragma once

#include <podnet/status.h>

#include <cstddef>

namespace podnet::tool {

class BenchBuffer {
 public:
  BenchBuffer() = default;
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  ~BenchBuffer();
  // Maps `bytes` (untouched: the caller faults them in). With `hugepages`, 2 MiB aligned and
  // advised MADV_HUGEPAGE before the first touch, so the pages are huge from the start; an
  // error when transparent huge pages are off.
  Status allocate(size_t bytes, bool hugepages);
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes of the buffer the kernel backs with huge pages now (/proc/self/smaps).
  size_t huge_bytes() const;

 private:
  std::byte* map_ = nullptr;
  std::byte* data_ = nullptr;
  size_t mapped_ = 0, size_ = 0;
};

}  // namespace podnet::tool
