/* What the files of the compiled helpers share (see module.c for what the module offers).
 * Every function here is hidden in the module (built with -fvisibility=hidden). */
#ifndef HANGTRACE_FAST_H
#define HANGTRACE_FAST_H
#include "text.h"

/* module.c: the "cannot" marker, interned strings, the Python twins to fall back to */
extern PyObject *UNHANDLED;
extern PyObject *S_CALL, *S_RESUMED, *S_UNFINISHED;
extern PyObject *S_DIR, *S_FILE, *S_FD, *S_FD_KIND, *S_TAG;
extern PyObject *FB_SPLIT, *FB_SCRUB, *FB_FIRST_ARG;
PyObject *fallback(PyObject *fn, PyObject *arg);

/* calls.c: where an ioctl's request ends in its arguments a[rs:end]: "_IOC(...)" whole, else ", " */
Py_ssize_t ioctl_request_end(const char *a, Py_ssize_t rs, Py_ssize_t end);

/* lines.c: strace lines. parse_fields reads the common shapes of one ASCII line (s[0:n],
 * a trailing "\r\n" allowed) into a Line of byte ranges and numbers, no Python object made:
 * LINE_OK, LINE_NONE (not strace output: split_line gives None), LINE_UNHANDLED (the Python
 * parse's), or -1 with an exception. line_tuple makes split_line's tuple of a LINE_OK line. */
#define LINE_NONE 0
#define LINE_OK 1
#define LINE_UNHANDLED 2
enum { K_CALL, K_RESUMED, K_UNFINISHED };
typedef struct {
    Py_ssize_t n;                       /* the line's length without its "\r\n" */
    int has_tid, has_ts, tod, kind, has_ret, ret_hex, ret_fits, has_dur, errno_err;
    long long tid, ret;                 /* ret: its value when ret_fits (64 bits, signed) */
    double ts, dur;
    Py_ssize_t ts_a, ts_b, dur_a, dur_b;        /* their texts (has_ts, has_dur) */
    Py_ssize_t na, nb;                  /* the name: s[na:nb] */
    Py_ssize_t as, ae;                  /* the arguments (empty for a resumed half cut) */
    Py_ssize_t rs, re;                  /* the result's token (has_ret) */
    Py_ssize_t es, ee;                  /* the error (es < 0: none; errno_err: ret_text's) */
    Py_ssize_t xs, xe;                  /* ret_text (xs < 0: none) */
} Line;
int parse_fields(const char *s, Py_ssize_t n, Line *L);
PyObject *line_tuple(const char *s, const Line *L);
PyObject *split_line(PyObject *self, PyObject *text);
PyObject *split_line_c(PyObject *text);
PyObject *scrub(PyObject *self, PyObject *text);
PyObject *first_arg(PyObject *self, PyObject *text);
/* the next string literal scrub replaces in s[from:n]: 1 and [*a, *b), or 0 */
int next_literal(const char *s, Py_ssize_t from, Py_ssize_t n, Py_ssize_t *a, Py_ssize_t *b);
/* the length of first_arg's answer for the ASCII text s[0:n] */
Py_ssize_t first_arg_len(const char *s, Py_ssize_t n);

/* rowtext.c: an event's trace row written from its fields into t, as msgspec writes it (1),
 * or 0; row_bytes adds a row written elsewhere; rows_taken: t's rows as bytes (t emptied) */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Text;
int row_text(Text *t, const char *tag, PyObject *const *vals, const char *shape);
int row_bytes(Text *t, const char *s, Py_ssize_t n);
PyObject *rows_taken(Text *t);
/* a row field by field (rowtext.c's comment): 1 written, 0 not certain here, -1 error */
int row_start(Text *t, const char *tag);
int row_double(Text *t, double x);
int row_decimal(Text *t, const char *s, Py_ssize_t a, Py_ssize_t b, double x);
int row_ll(Text *t, long long v);
int row_null(Text *t);
int row_ascii(Text *t, const char *s, Py_ssize_t n);
int row_scrubbed(Text *t, const char *s, Py_ssize_t n);
int row_value(Text *t, PyObject *o, char k);
int row_end(Text *t);

/* rowbuf.c: RowBuffer, rows kept in one buffer from use to use; its Text (NULL with an
 * exception: not one, or viewed) */
extern PyTypeObject *RowBufType;
int rowbuf_init(PyObject *m);           /* RowBufType made, the module's RowBuffer */
Text *rowbuf_text(PyObject *o);

/* calls.c: complete calls from line to event; block.c: from a bytes block to their rows */
PyObject *convert_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *convert_block(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *set_fallback(PyObject *self, PyObject *const *argv, Py_ssize_t argc);

/* scan.c */
PyObject *scan_block(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *find_bytes(PyObject *self, PyObject *const *argv, Py_ssize_t argc);

/* analysis/accumulate/csrc/feed.c: a run of calls into their threads' statistics */
PyObject *feed_calls(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
PyObject *feed_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc);

/* tracefile/csrc/rows.c: a block of trace rows read for the analysis (rows.h) */
PyObject *parse_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc);
int rows_init(PyObject *m);
#endif
