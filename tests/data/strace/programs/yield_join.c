/* yield_join.c: a worker that waits for a flag nobody sets by yielding the CPU in a loop: sched_yield,
   over and over, no timeout, no clock read, no output. The main thread joins it. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
static volatile int ready;
static void *worker(void *arg) {
    (void)arg;
    while (!ready) sched_yield();
    return NULL;
}
int main(void) {
    pthread_t t;
    printf("waiting for the worker\n");
    fflush(stdout);
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;
}
