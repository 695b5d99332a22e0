#include <pthread.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
void *w(void *a){ int fd=open("/dev/null",O_WRONLY); write(fd,"hello",5); close(fd); usleep(20000); return 0; }
int main(){ int p[2]; pipe(p); int e=eventfd(0,0); int s=socket(AF_INET,SOCK_STREAM,0);
 int d=dup(p[1]); int d2=fcntl(p[0],F_DUPFD_CLOEXEC,10); dup2(e,20); write(20,"12345678",8);
 pthread_t t; pthread_create(&t,0,w,0); write(d,"x",1); pthread_join(t,0);
 pid_t c=fork(); if(c==0){ write(p[1],"child",5); close(s); _exit(0);} waitpid(c,0,0);
 close(d); close(d2); write(1,"done\n",5); return 0; }
