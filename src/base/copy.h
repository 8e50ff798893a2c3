// Copies into memory that is not read again soon: a collective's output, the destination of
// a large message or one-sided transfer that shared memory moves with a user-space copy.
//
// A large memcpy writes through the caches: every destination line is first read from
// memory (the store needs it in the cache), then written back when evicted, and on its way
// evicts what the transfers around it need. Non-temporal stores go straight to memory, so
// a copy larger than the caches moves a third less through the memory system: 32 MiB out of
// cache at 16.3-18.1 against 9.2-11.6 GB/s for glibc's memcpy on the AMD EPYC VM, whose
// glibc would start streaming only at 240 MiB (docs/performance.md "Streaming copies").
// Below the threshold, or where the CPU has no such stores (not x86-64), it is a memcpy.
// Thread-safety: safe from any thread; the stores are fenced before it returns, so a flag
// published afterwards is seen after the data, as with memcpy.
#pragma once

#include <cstddef>

namespace podnet {

// `bytes` from `src` to `dst`, which must not overlap. Streams from
// PODNET_COPY_STREAM_MIN bytes (0: never).
void copy_to_output(void* dst, const void* src, size_t bytes);

// PODNET_COPY_STREAM_MIN (read once).
size_t copy_stream_min();

// A part of an output of `total` bytes (a fragment of a large message, a slot-sized piece
// of a large collective): streamed when the whole output reaches PODNET_COPY_STREAM_MIN,
// whatever the part's own size.
void copy_part_to_output(void* dst, const void* src, size_t bytes, size_t total);

// The same, with the threshold given (tests, and calls that copy a large output in parts).
void copy_to_output(void* dst, const void* src, size_t bytes, size_t stream_min);

// The non-temporal copy itself, whatever the size (a memcpy where the CPU has none).
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace podnet
