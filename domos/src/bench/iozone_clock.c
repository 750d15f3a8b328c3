/*
 * A clock for the real iozone, which `domos bench iozone` loads into it with LD_PRELOAD
 * (decision 0016). iozone times with gettimeofday, whose resolution is a microsecond, and
 * takes that resolution off every interval it measures, flooring the result at one tick: a
 * 32 KiB read that takes 2.7 us is reported as 1.0 us. This gettimeofday answers the
 * nanoseconds since the library was loaded as if they were microseconds, so iozone's
 * arithmetic runs on nanoseconds (its measured resolution becomes the tens of nanoseconds a
 * clock reading costs) and every rate it prints is a thousand times too small, which the bench
 * multiplies back. It says on standard error that it is loaded, so the bench knows which clock
 * iozone ran on.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static struct timespec loaded;

__attribute__((constructor)) static void start(void) {
    clock_gettime(CLOCK_MONOTONIC, &loaded);
    fputs("domos-iozone-clock: nanoseconds as microseconds\n", stderr);
}

int gettimeofday(struct timeval *restrict now, void *restrict zone) {
    (void)zone;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)(ts.tv_sec - loaded.tv_sec) * 1000000000LL + (ts.tv_nsec - loaded.tv_nsec);
    now->tv_sec = ns / 1000000;
    now->tv_usec = ns % 1000000;
    return 0;
}
