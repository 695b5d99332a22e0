/* What rows.c (a block of trace rows read for the analysis) shares with
 * analysis/accumulate/csrc/feed.c (which feeds it to the accumulator). */
#ifndef HANGTRACE_ROWS_H
#define HANGTRACE_ROWS_H
#include "text.h"

enum { ROW_SC, ROW_RD, ROW_IO, ROW_EVENT };

typedef struct {
    int32_t a, b;                       /* [a, b) in the block; a < 0: null */
} Span;

/* A row: a call read in place (ROW_SC, ROW_RD, ROW_IO: a Syscall, ReadCall or IoctlCall,
 * its fields below), or another line's event (ROW_EVENT: RowBlock.events[index]) */
typedef struct {
    int32_t start, end;                 /* the line in the block */
    int kind;
    Py_ssize_t index;
    double ts, dur;
    long long pid, tid, ret, fd, request;
    Span name, err, fd_kind, request_name;
    char ret_null, dur_null, fd_null, ongoing;
} Row;

typedef struct {
    PyObject_HEAD
    PyObject *data;                     /* the block (bytes) */
    PyObject *events;                   /* the ROW_EVENT rows' events (list) */
    PyObject *decode;                   /* a line of the block -> its event */
    PyObject *end;                      /* the end record, or NULL */
    Row *rows;
    Py_ssize_t n, cap;
} RowBlock;

extern PyTypeObject *RowBlock_Type;       /* a heap type (PyType_FromSpec) */
PyObject *row_event(RowBlock *pb, Py_ssize_t i);        /* the event of row i (new ref) */
PyObject *parse_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
int rows_init(PyObject *m);
#endif
