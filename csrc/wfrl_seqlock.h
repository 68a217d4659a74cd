/* Sequence-locked weights in shared memory: one writer (the learner) publishes, many readers (the
 * collector workers, other processes) copy a consistent version between episodes.
 *
 * seq[0] counts writes: odd while a write is in progress, even when the weights are consistent;
 * seq[1] is the published version number. A reader copies, then re-reads seq[0]; if it changed
 * (or was odd), the copy may mix two versions and is retried.
 *
 * Why the fences: x86 keeps stores in order and loads in order, so plain accesses work there;
 * aarch64 (whose wheels the project also builds) may reorder both. The writer needs the odd count
 * visible before any weight is stored and every weight visible before the even count (release);
 * the reader needs its first count read before the copy and the copy before its second count
 * read (acquire). The copies themselves are plain memcpy: a torn copy is detected by the count.
 * Reference: wfrl/collect/shm.py (ReferenceWeightsBoard), held equal by tests/test_shm_seqlock.py. */
#ifndef WFRL_SEQLOCK_H
#define WFRL_SEQLOCK_H

#include <stdint.h>
#include <string.h>

static inline void wfrl_weights_publish(int64_t *seq, float *dst, const float *src, int64_t n,
                                        int64_t version)
{
    const int64_t s = __atomic_load_n(&seq[0], __ATOMIC_RELAXED);
    __atomic_store_n(&seq[0], s + 1, __ATOMIC_RELAXED);           /* odd: writing */
    __atomic_thread_fence(__ATOMIC_RELEASE);                       /* odd before the data */
    memcpy(dst, src, (size_t)n * sizeof(float));
    __atomic_store_n(&seq[1], version, __ATOMIC_RELAXED);
    __atomic_store_n(&seq[0], s + 2, __ATOMIC_RELEASE);           /* data before even */
}

/* Copies a consistent version into out and returns its version number; retries (spinning) while
 * a write is in progress or one happened during the copy. */
static inline int64_t wfrl_weights_read(const int64_t *seq, const float *src, float *out,
                                        int64_t n)
{
    for (;;) {
        const int64_t s0 = __atomic_load_n(&seq[0], __ATOMIC_ACQUIRE);  /* before the copy */
        if (s0 & 1)
            continue;
        memcpy(out, src, (size_t)n * sizeof(float));
        const int64_t version = __atomic_load_n(&seq[1], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);                       /* copy before re-read */
        if (__atomic_load_n(&seq[0], __ATOMIC_RELAXED) == s0)
            return version;
    }
}

#endif
