/* A launcher that waits for a worker that never exits, while a timer signal ticks every 50 ms
 * (SA_RESTART, the handler writes one byte to a self-pipe, as Ruby's timer thread and many
 * event loops do): wait4 is cut by each tick and entered again (issue 44 survey, "restarted
 * wait"). gcc -O1 -o timer_wait timer_wait.c */
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int self_pipe[2];

static void tick(int sig)
{
    (void)sig;
    if (write(self_pipe[1], "!", 1) < 0)
        _exit(2);
}

int main(void)
{
    pid_t worker = fork();
    if (worker == 0) {
        for (;;)
            pause();                    /* never exits */
    }
    if (pipe(self_pipe) < 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 50000}, {0, 50000}};
    setitimer(ITIMER_REAL, &every, NULL);
    char drain[4096];
    for (;;) {
        int status;
        if (wait4(-1, &status, 0, NULL) == worker)
            return 0;
        (void)!read(self_pipe[0], drain, sizeof drain);
    }
}
