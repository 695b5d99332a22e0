/* A spin lock with back-off whose holder never lets go: the worker spins on the CPU
   (a few thousand pause instructions), then gives the CPU up with sched_yield, and again,
   for a flag nobody sets. The main thread joins it. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
static volatile int ready;
static void *worker(void *arg) {
    (void)arg;
    while (!ready) {
        for (volatile long i = 0; i < 2000000 && !ready; i++)
            __asm__ volatile("pause");
        sched_yield();
    }
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
