/* Waits that libfaketime gets wrong, sent to the kernel with the kernel's times.
 *
 * Preloaded before libfaketime (tests/chaos/wall_clock.py builds it), these
 * definitions win; every other call still goes through libfaketime.
 *
 * - clock_nanosleep on CLOCK_MONOTONIC: libfaketime 0.9.10 (Debian 12) with
 *   DONT_FAKE_MONOTONIC=1 still rewrites the deadline of an absolute monotonic
 *   sleep as if it were faked, and the kernel gets a negative time: EINVAL. Python
 *   3.11's time.sleep makes exactly that call, so every sleep raised
 *   (wolfcw/libfaketime#426). Monotonic time is not shifted: the call goes as is.
 * - cnd_timedwait (C11, glibc): librdkafka waits on its queues with an absolute
 *   CLOCK_REALTIME deadline read through libfaketime (shifted), but glibc's
 *   cnd_timedwait calls pthread_cond_timedwait inside libc, where libfaketime does
 *   not intercept it: the kernel waited the shift on top. With the clock one hour
 *   ahead, every librdkafka wait begun after the jump lasted an hour and the
 *   tracker's first commit_transaction never returned. The deadline is moved back
 *   by the shift in force, as a kernel whose clock had jumped would see it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *request,
                    struct timespec *remain) {
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (clock_id == CLOCK_MONOTONIC) {
        /* clock_nanosleep returns the error number; the raw syscall sets errno */
        return syscall(SYS_clock_nanosleep, clock_id, flags, request, remain) == 0 ? 0 : errno;
    }
    if (!next) {
        next = dlsym(RTLD_NEXT, "clock_nanosleep");
    }
    return next(clock_id, flags, request, remain);
}

/* A CLOCK_REALTIME deadline read through libfaketime, on the kernel's clock. */
static struct timespec kernel_deadline(const struct timespec *deadline) {
    struct timespec shifted, kernel;
    clock_gettime(CLOCK_REALTIME, &shifted);               /* libfaketime's */
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &kernel);   /* the kernel's */
    long long shift = (shifted.tv_sec - kernel.tv_sec) * NS + (shifted.tv_nsec - kernel.tv_nsec);
    long long at = deadline->tv_sec * NS + deadline->tv_nsec - shift;
    if (at < 0) {
        at = 0;
    }
    struct timespec out = {at / NS, at % NS};
    return out;
}

int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *deadline) {
    static int (*next)(cnd_t *, mtx_t *, const struct timespec *);
    if (!next) {
        next = dlsym(RTLD_NEXT, "cnd_timedwait");
    }
    struct timespec kernel = kernel_deadline(deadline);
    return next(cond, mutex, &kernel);
}
