/* ioctl_loop.c - one thread that polls with back-to-back ioctls (FIONREAD on a pipe, TCGETS on a
 * pty), in bursts of four every 20 ms, forever: the shape of a host thread polling a device.
 * gcc -O1 -o ioctl_loop ioctl_loop.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    int p[2], pty = posix_openpt(O_RDWR | O_NOCTTY), n;
    struct termios t;
    struct timespec gap = {0, 20 * 1000 * 1000};
    if (pty < 0 || pipe(p) < 0) { perror("setup"); return 1; }
    printf("READY %d\n", getpid());
    fflush(stdout);
    for (;;) {
        ioctl(p[0], FIONREAD, &n);
        ioctl(pty, TCGETS, &t);
        ioctl(p[0], FIONREAD, &n);
        ioctl(pty, TCGETS, &t);
        nanosleep(&gap, NULL);
    }
}
