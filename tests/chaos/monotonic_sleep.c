/* Sleeps on CLOCK_MONOTONIC go straight to the kernel, around libfaketime.
 *
 * libfaketime 0.9.10 (Debian 12) with DONT_FAKE_MONOTONIC=1 still rewrites the
 * deadline of clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ...) as if it were
 * faked, and the kernel gets a negative time: EINVAL. Python 3.11's time.sleep makes
 * exactly that call, so every sleep raised (wolfcw/libfaketime#426). Preloaded before
 * libfaketime, this definition wins: monotonic sleeps are the kernel's, every other
 * clock still goes through libfaketime. Built by tests/chaos/wall_clock.py.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
