/* segv_malloc.c - a thread faults inside malloc (a use-after-free wrote over a freed chunk's
 * list pointer) while it holds its arena's lock; its SIGSEGV handler logs the crash with
 * malloc, which waits for that same lock for ever. main joins the thread. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_segv(int sig)
{
    char *msg = malloc(4096);              /* blocks: this thread holds the arena lock */
    if (msg) {
        snprintf(msg, 4096, "worker crashed (signal %d)\n", sig);
        write(2, msg, strlen(msg));
    }
    _exit(70);
}

static void *worker(void *arg)
{
    (void)arg;
    printf("READY %d\n", getpid());
    fflush(stdout);
    sleep(1);
    char *a = malloc(0x500), *guard = malloc(0x20);
    __asm__ volatile("" : : "r"(a), "r"(guard) : "memory");
    free(a);                                /* to the unsorted bin (past tcache's sizes) */
    ((void *volatile *)a)[1] = (void *)0x10; /* the bug: a write after free, over its bk */
    void *b = malloc(0x600);                /* walks the unsorted bin: faults at 0x20 */
    __asm__ volatile("" : : "r"(b) : "memory");
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;
}
