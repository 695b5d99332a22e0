#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
void *w(void *a){ for(;;){ usleep(300000); getppid(); } return 0; }
int main(){ pthread_t t; pthread_create(&t,0,w,0); pthread_create(&t,0,w,0); for(;;){ sleep(1); getpid(); } }
