/* reaper.c - a launcher whose three workers all end and are reaped (the shape of torchrun after
 * a worker failed): worker 0 finishes (exit 0), worker 1 fails (exit 3), the launcher then
 * sends SIGTERM to worker 2 (killed by SIGTERM), reaps each one with wait4 and exits 1.
 * gcc -O1 -o reaper reaper.c */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void) {
    pid_t w[3];
    for (int i = 0; i < 3; i++) {
        if ((w[i] = fork()) == 0) {
            if (i == 0) { nap(100); printf("worker 0 done\n"); exit(0); }
            if (i == 1) { nap(300); fprintf(stderr, "worker 1: error\n"); exit(3); }
            for (;;) nap(1000);                   /* worker 2 works until told to stop */
        }
    }
    int left = 3, status, failed = 0;
    while (left > 0) {
        struct rusage ru;
        pid_t pid = wait4(-1, &status, 0, &ru);
        if (pid < 0) break;
        left--;
        printf("launcher: pid %d ended, status 0x%x\n", pid, status);
        fflush(stdout);
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && !failed) {
            failed = 1;
            kill(w[2], SIGTERM);                  /* one failed: stop the others */
        }
    }
    return failed ? 1 : 0;
}
