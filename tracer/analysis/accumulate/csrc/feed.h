/* What feed.c (calls into statistics) shares with rowfeed.c (a RowBlock's rows into them):
 * the context feed_calls's comment describes, read once per call, and its helpers. */
#ifndef HANGTRACE_FEED_H
#define HANGTRACE_FEED_H
#include "text.h"

enum { M_FIRST_TS, M_LAST_TS, M_ONGOING, M_LAST_CALL, M_NCALLS, M_SYSCALLS, M_FAILURES,
       M_TAIL_NAME, M_TAIL_RET, M_TAIL_RUN, M_TAIL_SINCE, M_DURS_KNOWN, M_SYSCALL_TIME,
       M_IOCTLS, M_INPUT_BYTES, M_INPUT_AT, M_INPUT_TS, M_FILE_READS, M_COUNT };
enum { C_SYSCALL, C_READ, C_IOCTL, C_FUTEX, C_POLL, C_WRITE, C_WAIT, C_COUNT };
enum { E_TS, E_PID, E_TID, E_NAME, E_RET, E_ERR, E_DUR, E_ONGOING, E_FD_KIND, E_REQUEST,
       E_REQUEST_NAME, E_FD, E_COUNT };

typedef struct {
    PyObject *threads, *new_thread, *specific, *plain, *not_failures, *followed, *ends_fd,
             *read_kinds;
    PyTypeObject *stats;
    PyObject *classes[C_COUNT];
    Py_ssize_t m[M_COUNT], e[E_COUNT], max_failures;
} Ctx;

/* "?" and "" (an ioctl key's defaults), "accept", "close", "file" (feed_strings) */
extern PyObject *S_UNKNOWN_KIND, *S_EMPTY, *S_ACCEPT, *S_CLOSE, *S_FILE_KIND;
int feed_strings(void);

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

int read_ctx(PyObject *ctx, Ctx *c);
PyObject *field(PyObject *o, Py_ssize_t off);           /* borrowed; NULL: unset */
void set_field(PyObject *o, Py_ssize_t off, PyObject *v);
int put_field(PyObject *o, Py_ssize_t off, PyObject *v);  /* steals v */
PyObject *plus_one(PyObject *x);
int count(PyObject *counter, PyObject *key);            /* counter[key] += 1 */
int count_failure(Ctx *c, PyObject *t, PyObject *name, PyObject *err);
int less(PyObject *a, PyObject *b);
PyObject *thread_of(Ctx *c, PyObject *pid, PyObject *tid);
int feed_call(Ctx *c, PyObject *t, PyObject *e, int k);
int call_class(Ctx *c, PyObject *e);                    /* C_* of e's class, or C_COUNT */
int fd_unfollowed(Ctx *c, PyObject *pid, PyObject *fd);
/* the module's functions (module.c lists them) */
PyObject *feed_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *feed_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
#endif
