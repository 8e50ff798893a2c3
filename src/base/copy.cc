#include "base/copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/config.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace podnet {

void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Stores stream in whole 64-byte lines: the head up to the first line boundary of the
  // destination and the tail after the last are ordinary copies.
  const size_t head = std::min(bytes, (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t lines = bytes / 64;
  for (size_t i = 0; i < lines; ++i, d += 64, s += 64) {
    const auto* sv = reinterpret_cast<const __m128i*>(s);
    __m128i a = _mm_loadu_si128(sv), b = _mm_loadu_si128(sv + 1), c = _mm_loadu_si128(sv + 2),
            e = _mm_loadu_si128(sv + 3);
    auto* dv = reinterpret_cast<__m128i*>(d);
    _mm_stream_si128(dv, a);
    _mm_stream_si128(dv + 1, b);
    _mm_stream_si128(dv + 2, c);
    _mm_stream_si128(dv + 3, e);
  }
  std::memcpy(d, s, bytes - lines * 64);
  _mm_sfence();  // the streamed lines are visible before anything stored after the copy
#else
  std::memcpy(dst, src, bytes);
#endif
}

namespace {

// Whether copies into an output of `total` bytes stream, under threshold `stream_min`.
bool streams(size_t total, size_t stream_min) { return stream_min != 0 && total >= stream_min; }

void copy_as(void* dst, const void* src, size_t bytes, bool stream) {
  if (bytes == 0 || dst == src) return;
  if (stream) {
    stream_copy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace

size_t copy_stream_min() {
  static const size_t stream_min = config().copy_stream_min;
  return stream_min;
}

void copy_to_output(void* dst, const void* src, size_t bytes, size_t stream_min) {
  copy_as(dst, src, bytes, streams(bytes, stream_min));
}

void copy_to_output(void* dst, const void* src, size_t bytes) { copy_to_output(dst, src, bytes, copy_stream_min()); }

void copy_part_to_output(void* dst, const void* src, size_t bytes, size_t total) {
  copy_as(dst, src, bytes, streams(total, copy_stream_min()));
}

}  // namespace podnet
