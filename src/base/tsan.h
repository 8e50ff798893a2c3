// Happens-before that ThreadSanitizer cannot see. A message handed through the kernel (a TCP
// socket: the sender's sendmsg, the receiver's recv) or through memory mapped twice (a shm
// ring reached at two addresses when both ends live in one process, as in the tests) orders
// the receiver after the sender, but TSan only tracks synchronisation at one address in one
// process. Without these calls a TSan build reports every buffer a peer's message hands over
// (the data of a one-sided write, read by the application after its request completed) as a
// race. Both ends use one process-wide address: every release orders everything before it
// ahead of every later acquire. That is stronger than the real ordering (a race between two
// threads that both talk to peers could hide), but what is left is the engine's own
// threading. No code at all unless built with -fsanitize=thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define PODNET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PODNET_TSAN 1
#endif
#endif

#ifdef PODNET_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace podnet {

#ifdef PODNET_TSAN
inline char g_kernel_handover;
// Before a message leaves for a peer.
inline void handover_release() noexcept { __tsan_release(&g_kernel_handover); }
// After a message from a peer arrived.
inline void handover_acquire() noexcept { __tsan_acquire(&g_kernel_handover); }
#else
inline void handover_release() noexcept {}
inline void handover_acquire() noexcept {}
#endif

}  // namespace podnet
