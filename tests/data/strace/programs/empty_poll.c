/* A client polling sockets whose peers are gone, with no wait: for each of six sockets,
   ioctl(FIONREAD) (0 bytes waiting) and recv(MSG_DONTWAIT) (0: end of file), over and over.
   No timeout, no clock read, no output: it busy-waits for data that will never come. */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
    int fds[6];
    for (int i = 0; i < 6; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
        close(sv[1]);                      /* the peer is gone: recv returns 0 */
        fds[i] = sv[0];
    }
    char buf[256];
    for (;;) {
        for (int i = 0; i < 6; i++) {
            int n = 0;
            ioctl(fds[i], FIONREAD, &n);
            if (n > 0 || recv(fds[i], buf, sizeof buf, MSG_DONTWAIT) > 0) return 0;
        }
    }
}
