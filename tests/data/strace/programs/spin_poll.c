/* Start-up writes to a log file, then a spin: poll with timeout 0 on a pipe nobody writes,
   back to back, forever (returns at once every time). */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fds[2];
    int log = open(argc > 1 ? argv[1] : "/tmp/spin_poll.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (pipe(fds) || log < 0) return 1;
    for (int i = 0; i < 40; i++) { dprintf(log, "start-up step %d done\n", i); }
    struct pollfd p = {fds[0], POLLIN, 0};
    for (;;) poll(&p, 1, 0);
}
