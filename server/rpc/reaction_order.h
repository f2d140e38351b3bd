#ifndef RELSERVE_SERVER_RPC_REACTION_ORDER_H_
#define RELSERVE_SERVER_RPC_REACTION_ORDER_H_

// gRPC promises that a reactor's OnDone runs after every other reaction (OnCancel, OnReadDone,
// OnWriteDone) has returned, but keeps that promise inside its own, uninstrumented library, where
// ThreadSanitizer cannot see it: deleting the reactor in OnDone then reads as racing with what
// the last reaction did. Reactions announce their end and OnDone its start, so ThreadSanitizer
// builds know the order gRPC guarantees; elsewhere these compile to nothing.

#if defined(__SANITIZE_THREAD__)
#define RELSERVE_TSAN_ANNOTATIONS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RELSERVE_TSAN_ANNOTATIONS 1
#endif
#endif

#ifdef RELSERVE_TSAN_ANNOTATIONS
#include <sanitizer/tsan_interface.h>
#endif

namespace relserve {

// At the start of every reaction except OnDone: marks its end, on every path out of it.
class ReactionScope {
 public:
  explicit ReactionScope(void* reactor) : reactor_(reactor) {}
  ReactionScope(const ReactionScope&) = delete;
  ReactionScope& operator=(const ReactionScope&) = delete;
  ~ReactionScope() {
#ifdef RELSERVE_TSAN_ANNOTATIONS
    __tsan_release(reactor_);
#endif
  }

 private:
  [[maybe_unused]] void* reactor_;
};

// First thing in OnDone.
inline void AfterAllReactions(void* reactor) {
#ifdef RELSERVE_TSAN_ANNOTATIONS
  __tsan_acquire(reactor);
#else
  (void)reactor;
#endif
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_REACTION_ORDER_H_
