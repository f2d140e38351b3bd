#ifndef RELSERVE_SERVER_MODEL_KERNELS_CPU_KERNEL_SUPPORT_H_
#define RELSERVE_SERVER_MODEL_KERNELS_CPU_KERNEL_SUPPORT_H_

// Marks a hand-written CPU kernel's entry point for one compiled copy per instruction set,
// chosen when the library loads: its loops vectorize with AVX-512 or AVX2 where the CPU has
// them and run as SSE2 elsewhere. Helpers it calls should be always_inline, so that each copy
// gets them compiled for its instruction set.
// Elsewhere than x86-64 there is one copy, for the target the build chose.
// ThreadSanitizer builds get the single default copy: the copies are chosen by an ifunc
// resolver, which the dynamic loader runs before the sanitizer runtime has started, and
// ThreadSanitizer instruments that resolver too, so the process would crash while loading.
#if defined(__SANITIZE_THREAD__)
#define RELSERVE_CPU_SINGLE_COPY 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RELSERVE_CPU_SINGLE_COPY 1
#endif
#endif
#if defined(__x86_64__)
#if defined(RELSERVE_CPU_SINGLE_COPY)
#define RELSERVE_CPU_MULTIVERSION
#else
#define RELSERVE_CPU_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#define RELSERVE_HAVE_AVX512_KERNELS 1
#else
#define RELSERVE_CPU_MULTIVERSION
#define RELSERVE_HAVE_AVX512_KERNELS 0
#endif

#endif  // RELSERVE_SERVER_MODEL_KERNELS_CPU_KERNEL_SUPPORT_H_
