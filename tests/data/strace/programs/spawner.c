/* spawner.c - a launcher that forks a child every 200 ms; the child execs /bin/true --child and the
 * launcher reaps it (waitpid): the shape of a supervisor starting short-lived tools.
 * gcc -O1 -o spawner spawner.c */
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    struct timespec gap = {0, 200 * 1000 * 1000};
    printf("READY %d\n", getpid()); fflush(stdout);
    for (;;) {
        pid_t c = fork();
        if (c == 0) { execl("/bin/true", "true", "--child", (char *)NULL); _exit(127); }
        int st; waitpid(c, &st, 0);
        nanosleep(&gap, NULL);
    }
}
