/* Compiled twins of hangtrace's hottest pure-Python functions (tracer/tracefile/fastpath.py).
 *
 * Each function gives exactly what its Python twin gives, or says it cannot (UNHANDLED, None)
 * and the caller runs the Python twin: tests compare both on real logs and traces.
 *
 *   split_line(text)            strace/lines.py py_split_line, for complete, unfinished and
 *                               resumed calls of ASCII lines; every other line goes to the
 *                               Python twin (set_fallback), or gives UNHANDLED without one
 *   scrub(args)                 events.py scrub_args (string literals -> "..."), ASCII text
 *   first_arg(args)             strace/args.py first_arg, ASCII text
 *   encode_row(prefix, names, fallback, event)
 *                               json.dumps([TAG, *fields], separators=(",", ":")) + "\n" for
 *                               rows of None/bool/int/float/str/tuple-or-list of str;
 *                               fallback(event) for anything else (None: returns None)
 *   float_repr(x)               repr(x), as encode_row writes floats
 *   decode_rows(block, table)   the rows of an ASCII block (str or bytes) of trace lines: an event for each
 *                               row whose tag is in table ({tag: (class, nfields, tuple_index,
 *                               slot offsets or None)}) and whose values are JSON scalars or
 *                               arrays of them: class(*values), or its slots filled directly
 *                               (slot_offsets); the line's text for every other line.
 *                               Returns (that list, how many lines it holds as text)
 *   scan_block(block, counter, want_self)
 *                               strace_scan.py's first pass over a bytes block: tid columns
 *                               counted, lines counted, the lines worth parsing
 *
 * The files: text.c (ASCII text), numbers.c (float/repr), lines.c (strace lines), json_out.c and
 * calls.c (trace rows written), json_in.c and rows_in.c (trace rows read), scan.c (first
 * pass), fast.h. Built by scripts/build_fast.py with the machine's C compiler into one module;
 * SOURCE_HASH (of these files) lets fastpath.py refuse a module built from another version.
 */
#include "fast.h"

#ifndef SOURCE_HASH
#define SOURCE_HASH "unknown"
#endif

PyObject *UNHANDLED;
PyObject *S_CALL, *S_RESUMED, *S_UNFINISHED;
PyObject *S_DIR, *S_FILE, *S_FD, *S_FD_KIND, *S_WR, *S_RD, *S_IO;
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
static PyObject *float_repr(PyObject *self, PyObject *v)
{
    /* repr of a float as encode_row writes it (tests compare it with repr) */
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    char tmp[48];
    int k = fast_repr(x, tmp);
    if (k > 0)
        return ascii_str(tmp, 0, k);
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!r)
        return NULL;
    PyObject *o = PyUnicode_FromString(r);
    PyMem_Free(r);
    return o;
}

static PyMethodDef methods[] = {
    {"float_repr", (PyCFunction)float_repr, METH_O, "repr(float), as encode_row writes it"},
    {"split_line", (PyCFunction)split_line, METH_O, "lines.py py_split_line, common shapes"},
    {"scrub", (PyCFunction)scrub, METH_O, "events.scrub_args"},
    {"first_arg", (PyCFunction)first_arg, METH_O, "strace/args.py first_arg"},
    {"convert_calls", (PyCFunction)(void (*)(void))convert_calls, METH_FASTCALL,
     "rows of complete calls"},
    {"set_fallback", (PyCFunction)(void (*)(void))set_fallback, METH_FASTCALL,
     "the Python twin to call for what C leaves"},
    {"encode_row", (PyCFunction)(void (*)(void))encode_row, METH_FASTCALL, "a trace row"},
    {"decode_rows", (PyCFunction)(void (*)(void))decode_rows, METH_FASTCALL, "trace rows"},
    {"slot_offsets", (PyCFunction)(void (*)(void))slot_offsets, METH_FASTCALL,
     "where a slots dataclass keeps its fields"},
    {"scan_block", (PyCFunction)(void (*)(void))scan_block, METH_FASTCALL, "first pass"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    for (int c = 0; c < 0x20; c++)
        STOP[c] = 1;
    STOP['"'] = STOP['\\'] = 1;
    UNHANDLED = PyObject_CallObject((PyObject *)&PyBaseObject_Type, NULL);
    S_CALL = PyUnicode_InternFromString("call");
    S_RESUMED = PyUnicode_InternFromString("resumed");
    S_UNFINISHED = PyUnicode_InternFromString("unfinished");
    S_DIR = PyUnicode_InternFromString("dir");
    S_FILE = PyUnicode_InternFromString("file");
    S_FD = PyUnicode_InternFromString("fd");
    S_FD_KIND = PyUnicode_InternFromString("fd_kind");
    S_WR = PyUnicode_InternFromString("[\"wr\",");
    S_RD = PyUnicode_InternFromString("[\"rd\",");
    S_IO = PyUnicode_InternFromString("[\"io\",");
    if (!UNHANDLED || !S_CALL || !S_RESUMED || !S_UNFINISHED)
        return NULL;
    Py_INCREF(UNHANDLED);
    if (PyModule_AddObject(m, "UNHANDLED", UNHANDLED) < 0
            || PyModule_AddStringConstant(m, "SOURCE_HASH", SOURCE_HASH) < 0)
        return NULL;
    return m;
}

