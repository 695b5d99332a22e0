/* A client that starts with work and ends waiting for a reply that never comes: it writes 40
   start-up lines to its log file, connects to its server on 127.0.0.1:PORT (a server outside
   the log that accepts and never answers), sends a request and blocks in read() for the reply.
   usage: reply_wait PORT LOGFILE */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int log = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (log < 0 || s < 0) return 1;
    for (int i = 0; i < 40; i++) dprintf(log, "start-up step %d done\n", i);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) return 1;
    const char *q = "SELECT 1;\n";
    write(s, q, strlen(q));
    char reply[4096];
    read(s, reply, sizeof reply);        /* the reply never comes */
    return 0;
}
