/* One run of convert_calls (calls.c: a list of str lines) or convert_block (block.c: a bytes
 * block of lines): ctx read once, the counters the converter gets back, where events or rows
 * go. conv_take takes one line's split_line tuple as convert_calls always did. */
#ifndef HANGTRACE_CALLS_H
#define HANGTRACE_CALLS_H
#include "fast.h"

/* Where the events go: appended to a list, or (encode_row given) written as their trace
 * rows (rowtext.c row_text; an event it cannot write made and written by encode_row): into
 * own, whose bytes are appended to the list at the end, or into a RowBuffer's (rowbuf.c) */
typedef struct {
    PyObject *out, *encode_row;
    int rows;
    Text *text;                         /* where the rows are written: &own, or a RowBuffer's */
    Text own;
    Py_ssize_t start;                   /* text's length before the run (kept on an error) */
} Emit;

typedef struct {
    Emit em;
    PyObject *tid_pid, *names, *special, *builders, *fd_first, *dir_calls, *fd_cache,
             *write_calls, *read_calls, *ioctl_cache, *nv_cache, *pending, *entered;
    PyObject *sc_cls, *wr_cls, *rd_cls, *io_cls;
    int has_fd;
    Py_ssize_t base_lines;              /* the converter's lines before this run */
    Py_ssize_t lines, made;             /* lines taken, events made */
    int has_dur, tail;                  /* tail: the last line taken an entry half */
    double last_ts;
    PyObject *last_entry;               /* the tid of the last entry half taken (a reference) */
} Conv;

/* ctx (calls.c's comment) read into c; out a list, or a RowBuffer (rows only): 0, or -1 with
 * an exception */
int conv_start(Conv *c, PyObject *ctx, PyObject *out, const char *usage);
/* one line's split_line tuple: 1 taken, 0 Python's line, -1 error */
int conv_take(Conv *c, PyObject *t);
/* a call taken elsewhere (block.c): the counters a taken call moves */
void conv_counted(Conv *c, double ts, int has_dur);
/* the run's answer (next: where it stopped), c freed; NULL on error */
PyObject *conv_end(Conv *c, Py_ssize_t next);
void conv_drop(Conv *c);                /* c freed after an error */
/* the event cls(*vals) (tag, the fields' shape: rowtext.c): its row written, or made and
 * appended (or written by encode_row) */
int emit(Emit *em, PyObject *cls, const char *tag, const char *shape, PyObject *const *vals,
         Py_ssize_t n);
#endif
