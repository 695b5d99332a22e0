/* Compiled twins of hangtrace's hottest pure-Python functions (tracer/strace/fastpath.py).
 *
 * Each function gives exactly what its Python twin gives, or says it cannot (UNHANDLED, None)
 * and the caller runs the Python twin: tests compare both on real logs and traces.
 *
 *   split_line(text)            strace/lines.py py_split_line, for complete, unfinished and
 *                               resumed calls of ASCII lines; every other line goes to the
 *                               Python twin (set_fallback), or gives UNHANDLED without one
 *   scrub(args)                 events.py scrub_args (string literals -> "..."), ASCII text
 *   first_arg(args)             strace/args.py first_arg, ASCII text
 *   convert_calls(texts, start, ctx, out)
 *                               strace/batch.py's fast path: complete calls from line to event,
 *                               or to its trace row (rowtext.c)
 *   convert_block(block, start, ctx, out)
 *                               convert_calls's rows from a bytes block of lines, the
 *                               commonest calls written from the line's bytes (block.c)
 *   RowBuffer()                 rows in one buffer kept from use to use (rowbuf.c)
 *   scan_block(block, counter, want_self)
 *                               strace_scan.py's first pass over a bytes block: tid columns
 *                               counted, lines counted, the lines worth parsing
 *   find_bytes(haystack, needle) bytes.find, by memmem (scan.c)
 *   feed_calls(events, start, ctx, cur), feed_rows(block, start, ctx, cur)
 *                               analysis/accumulate/calls.py's per-call accumulation for a
 *                               run of calls, or of a RowBlock's rows
 *                               (analysis/accumulate/csrc/feed.c, rowfeed.c)
 *   parse_rows(block, ...)      a block of trace rows read for the analysis: calls read in
 *                               place (tracefile/csrc/rows.c), a RowBlock
 *
 * The files: text.c (ASCII text), numbers.c (float() of log numbers), lines.c (strace
 * lines), calls.c and calls.h (complete calls made events), block.c (their rows from a
 * block's bytes), rowtext.c (trace rows), rowbuf.c (a buffer of them), scan.c (first pass),
 * fast.h; tracefile/csrc/rows.c and rows.h (trace rows read in place);
 * analysis/accumulate/csrc/feed.c, rowfeed.c and feed.h (calls into statistics). msgspec
 * (tracer/tracefile/codec.py) writes and reads the other rows. Built by scripts/build_fast.py
 * with the machine's C compiler into one module;
 * SOURCE_HASH (of these files) lets fastpath.py refuse a module built from another version.
 */
#include "fast.h"

#ifndef SOURCE_HASH
#define SOURCE_HASH "unknown"
#endif

PyObject *UNHANDLED;
PyObject *S_CALL, *S_RESUMED, *S_UNFINISHED;
PyObject *S_DIR, *S_FILE, *S_FD, *S_FD_KIND, *S_TAG;
/* the Python twins, called for what the C code leaves (set_fallback) */
PyObject *FB_SPLIT, *FB_SCRUB, *FB_FIRST_ARG;

PyObject *fallback(PyObject *fn, PyObject *arg)
{
    if (!fn) {
        Py_INCREF(UNHANDLED);
        return UNHANDLED;
    }
    return PyObject_CallOneArg(fn, arg);
}

/* ------------------------------------------------------------------ module */
static PyMethodDef methods[] = {
    {"split_line", (PyCFunction)split_line, METH_O, "lines.py py_split_line, common shapes"},
    {"scrub", (PyCFunction)scrub, METH_O, "events.scrub_args"},
    {"first_arg", (PyCFunction)first_arg, METH_O, "strace/args.py first_arg"},
    {"convert_calls", (PyCFunction)(void (*)(void))convert_calls, METH_FASTCALL,
     "events of complete calls"},
    {"convert_block", (PyCFunction)(void (*)(void))convert_block, METH_FASTCALL,
     "the rows of complete calls read from a bytes block"},
    {"set_fallback", (PyCFunction)(void (*)(void))set_fallback, METH_FASTCALL,
     "the Python twin to call for what C leaves"},
    {"scan_block", (PyCFunction)(void (*)(void))scan_block, METH_FASTCALL, "first pass"},
    {"find_bytes", (PyCFunction)(void (*)(void))find_bytes, METH_FASTCALL,
     "haystack.find(needle) of bytes-like objects"},
    {"feed_calls", (PyCFunction)(void (*)(void))feed_calls, METH_FASTCALL,
     "calls into their threads' statistics"},
    {"feed_rows", (PyCFunction)(void (*)(void))feed_rows, METH_FASTCALL,
     "a RowBlock into the threads' statistics"},
    {"parse_rows", (PyCFunction)(void (*)(void))parse_rows, METH_FASTCALL,
     "a block of trace rows read for the analysis"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    UNHANDLED = PyObject_CallObject((PyObject *)&PyBaseObject_Type, NULL);
    S_CALL = PyUnicode_InternFromString("call");
    S_RESUMED = PyUnicode_InternFromString("resumed");
    S_UNFINISHED = PyUnicode_InternFromString("unfinished");
    S_DIR = PyUnicode_InternFromString("dir");
    S_FILE = PyUnicode_InternFromString("file");
    S_FD = PyUnicode_InternFromString("fd");
    S_FD_KIND = PyUnicode_InternFromString("fd_kind");
    S_TAG = PyUnicode_InternFromString("TAG");
    if (!UNHANDLED || !S_CALL || !S_RESUMED || !S_UNFINISHED || !S_DIR || !S_FILE || !S_FD
            || !S_FD_KIND || !S_TAG)
        return NULL;
    Py_INCREF(UNHANDLED);
    if (rowbuf_init(m) < 0)
        return NULL;
    if (PyModule_AddObject(m, "UNHANDLED", UNHANDLED) < 0 || rows_init(m) < 0
            || PyModule_AddStringConstant(m, "SOURCE_HASH", SOURCE_HASH) < 0)
        return NULL;
    return m;
}

