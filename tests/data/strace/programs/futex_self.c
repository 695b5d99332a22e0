/* The main thread writes a heartbeat to a log file 5 times (0.2 s apart), then locks a mutex
   it already holds (a self-deadlock: FUTEX_WAIT_PRIVATE, 2, NULL forever); a helper thread
   polls a pipe nobody writes, 200 ms timeouts, forever. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int fds[2];
static void *poller(void *x) { struct pollfd p = {fds[0], POLLIN, 0}; for (;;) poll(&p, 1, 200); return x; }
int main(int argc, char **argv) {
    pthread_t t;
    int log = open(argc > 1 ? argv[1] : "/tmp/futex_self.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (pipe(fds) || log < 0) return 1;
    printf("ready %d\n", getpid()); fflush(stdout);
    pthread_create(&t, 0, poller, 0);
    for (int i = 0; i < 5; i++) { dprintf(log, "heartbeat %d of the main loop\n", i); usleep(200000); }
    pthread_mutex_lock(&m);
    pthread_mutex_lock(&m);
    return 0;
}
