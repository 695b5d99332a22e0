/* fd_reuse: a client whose fd 4 is first a bulk TCP connection (40 messages of 1-4 KiB to a
 * listener of its own, read back on fd 5), closed, then the same numbers reused by a second
 * connection that only sends an 8-byte keep-alive every 300 ms and polls 300 ms for an answer
 * its peer (fd 5, a server stuck elsewhere: never read) never sends: after the transfer it waits forever. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int pair(int lfd, struct sockaddr_in *in, int *acc)
{
    int c = socket(AF_INET, SOCK_STREAM, 0);
    connect(c, (struct sockaddr *)in, sizeof *in);
    *acc = accept(lfd, NULL, NULL);
    return c;
}

int main(void)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof in;
    static char buf[8192];
    int a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);                 /* 3 */
    bind(lfd, (struct sockaddr *)&in, sizeof in);
    listen(lfd, 1);
    getsockname(lfd, (struct sockaddr *)&in, &len);
    int c = pair(lfd, &in, &a);                                /* 4, 5 */
    for (int i = 0; i < 40; i++) {
        write(c, buf, 1024 + (i * 397) % 3072);
        read(a, buf, sizeof buf);
    }
    close(c);
    close(a);
    c = pair(lfd, &in, &a);                                    /* 4, 5 again */
    struct pollfd p = {.fd = c, .events = POLLIN};
    for (;;) {
        write(c, "PING0001", 8);
        poll(&p, 1, 300);
    }
}
