/* vt_wait.c - a start-up whose main thread enters an ioctl that never returns, while a helper
 * thread polls every 100 ms (the shape of a CUDA start-up stuck in a UVM ioctl, on a device
 * this VM has: VT_WAITACTIVE on a virtual console that is never switched to blocks until the
 * process is killed). The same fd's earlier ioctls (VT_GETSTATE, KDGETMODE) return.
 * gcc -O1 -pthread -o vt_wait vt_wait.c */
#include <fcntl.h>
#include <linux/kd.h>
#include <linux/vt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int wake;

static void *poller(void *arg) {
    struct pollfd p = {.fd = wake, .events = POLLIN};
    (void)arg;
    for (;;)
        poll(&p, 1, 100);               /* times out every 100 ms: nobody writes the eventfd */
    return NULL;
}

int main(void) {
    struct vt_stat st;
    int mode, fd = open("/dev/tty7", O_RDWR | O_NOCTTY);
    pthread_t t;
    if (fd < 0) { perror("open /dev/tty7"); return 1; }
    wake = eventfd(0, EFD_CLOEXEC);
    ioctl(fd, VT_GETSTATE, &st);
    ioctl(fd, KDGETMODE, &mode);
    pthread_create(&t, NULL, poller, NULL);
    printf("active vt %d, waiting for vt 7\n", st.v_active);
    fflush(stdout);
    ioctl(fd, VT_WAITACTIVE, 7);        /* never returns: nobody switches to vt 7 */
    return 0;
}
