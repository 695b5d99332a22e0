/* clock_spin.c - start-up log writes, then an endless spin on the clock (the shape of an X
 * server whose log ends in a clock_gettime loop). The clock is read through syscall(2), as
 * where the vDSO cannot serve it (a clocksource without vDSO support): otherwise strace would
 * see nothing. It waits 0.5 s before starting (time to attach `strace -p`).
 * gcc -O1 -o clock_spin clock_spin.c */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "server.log";
    int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    char line[160];
    struct timespec ts, deadline;
    struct timeval tv;
    struct timespec pause = {0, 500 * 1000 * 1000};
    nanosleep(&pause, NULL);                       /* waits for its configuration */
    for (int i = 0; i < 40; i++) {                 /* start-up: a log line per step */
        int n = snprintf(line, sizeof line, "[%8.3f] (II) module %02d: loaded, init ok\n",
                         i * 0.013, i);
        write(log, line, (size_t)n);
    }
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec -= 1;                          /* a deadline already gone by: never met */
    for (unsigned long k = 0;; k++) {              /* waits for an event that never comes */
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        if (ts.tv_sec < deadline.tv_sec)
            break;
        if (k % 16 == 0)
            syscall(SYS_gettimeofday, &tv, NULL);
    }
    return 0;
}
