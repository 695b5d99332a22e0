#include "fast.h"

/* ------------------------------------------------------------------ scan_block */
/* scan_block(block, counter, want_self) -> (prefixed, lines, candidates): strace_scan.py's first
 * pass over a bytes (or bytearray) block of whole lines. Adds 1 per line to counter[tid column bytes] (the column as
 * the regex (?:\[pid +)?(\d+)[ \]] at the line start reads it) and returns the number of such
 * lines, the number of lines, and the offsets of the lines worth parsing: those whose call
 * (after the pid column, a timestamp, an strace -n number and "<... ") is clone, clone3, fork,
 * vfork, getpid, tgkill, execve, execveat, and gettid and set_tid_address when want_self,
 * and strace's "[strace: ]Process N ..." messages (glued in a line too: "strace: Process "
 * or "^CProcess " anywhere in it). Every line parse_line reads as such a call or message
 * is among them. */
static const char *const SCAN_NAMES[] = {"clone", "clone3", "fork", "vfork", "getpid", "gettid",
                                         "set_tid_address", "tgkill", "execve", "execveat",
                                         NULL};
static const Py_ssize_t SCAN_LENS[] = {5, 6, 4, 5, 6, 6, 15, 6, 6, 8};

static int flush_tid(PyObject *counter, const char *s, Py_ssize_t a, Py_ssize_t len,
                     Py_ssize_t run)
{
    PyObject *key = PyBytes_FromStringAndSize(s + a, len);
    if (!key)
        return -1;
    PyObject *old = PyDict_GetItemWithError(counter, key);
    long long base = old ? PyLong_AsLongLong(old) : 0;
    PyObject *val = PyErr_Occurred() ? NULL : PyLong_FromLongLong(base + run);
    int rc = val ? PyDict_SetItem(counter, key, val) : -1;
    Py_DECREF(key);
    Py_XDECREF(val);
    return rc;
}

static int is_process_message(const char *s, Py_ssize_t i, Py_ssize_t e)
{
    return (e - i >= 16 && memcmp(s + i, "strace: Process ", 16) == 0)
           || (e - i >= 8 && memcmp(s + i, "Process ", 8) == 0);
}

/* The head parse_line reads (lines.py: a pid column or "[pid N]", a timestamp, an strace -n
 * number), skipped the same way, then the message or the call name: the same lines after
 * the same prefixes as the Python twin finds ("1234  Process 5 attached" too). It may say
 * yes to more lines than parse_line reads as such, never to fewer. */
static int worth_parsing(const char *s, Py_ssize_t p, Py_ssize_t e, int want_self,
                         Py_ssize_t proc)
{
    /* strace's message anywhere: also where it cut a line (scan.py _line_at joins the two),
     * or old strace's glued after the echo of Ctrl-C ("...NULL^CProcess 15176 detached");
     * proc: the first "Process " at or after p in the block (-1: none) */
    Py_ssize_t m = e - p >= 10 && proc >= 0 && proc + 8 <= e ? proc : -1;
    while (m >= 0) {                    /* one pass: each "Process " and what comes before it */
        if ((m - p >= 8 && memcmp(s + m - 8, "strace: ", 8) == 0)
                || (m - p >= 2 && s[m - 2] == '^' && s[m - 1] == 'C'))
            return 1;
        m = m + 8 < e ? find_str(s, m + 8, e, "Process ", 8) : -1;
    }
    if (is_process_message(s, p, e))
        return 1;
    Py_ssize_t i = p;
    if (i < e && s[i] == '[' && e - i >= 5 && memcmp(s + i, "[pid ", 5) == 0) {
        Py_ssize_t r = find_char(s, i, e, ']');
        if (r < 0)
            return 0;
        i = r + 1;
    } else if (i < e && s[i] >= '0' && s[i] <= '9') {
        Py_ssize_t k = i;
        while (k < e && s[k] >= '0' && s[k] <= '9')
            k++;
        if (k < e && s[k] == ' ')
            i = k;                      /* a pid column; else a timestamp, read below */
    }
    while (i < e && s[i] == ' ')
        i++;
    if (i < e && s[i] >= '0' && s[i] <= '9') {
        Py_ssize_t sp = find_char(s, i, e, ' ');
        if (sp < 0)
            return 0;
        i = sp + 1;
        while (i < e && s[i] == ' ')
            i++;
    }
    if (is_process_message(s, i, e))
        return 1;
    if (i < e && s[i] == '[') {         /* strace -n */
        Py_ssize_t r = find_str(s, i, e, "] ", 2);
        if (r < 0)
            return 0;
        i = r + 2;
        if (is_process_message(s, i, e))
            return 1;
    }
    if (e - i >= 5 && memcmp(s + i, "<... ", 5) == 0)
        i += 5;
    if (i >= e || !strchr("cefgstv", s[i]))
        return 0;                       /* (no name below starts otherwise) */
    for (int k = 0; SCAN_NAMES[k]; k++) {
        if (!want_self && (k == 5 || k == 6))
            continue;                   /* gettid, set_tid_address */
        Py_ssize_t l = SCAN_LENS[k];
        if (e - i > l && s[i] == SCAN_NAMES[k][0] && memcmp(s + i, SCAN_NAMES[k], (size_t)l) == 0
                && (s[i + l] == '(' || s[i + l] == ' '))
            return 1;
    }
    return 0;
}

/* the first "Process " in s[from:n], or -1 */
static Py_ssize_t next_process(const char *s, Py_ssize_t from, Py_ssize_t n)
{
    const char *m = from < n ? memmem(s + from, (size_t)(n - from), "Process ", 8) : NULL;
    return m ? m - s : -1;
}

PyObject *scan_block(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    HxBytes view;                       /* bytes, or a bytearray (held, not resized) */
    if (argc != 3 || !hx_is_bytes_like(argv[0]) || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "scan_block(block, counter, want_self)");
        return NULL;
    }
    int want_self = PyObject_IsTrue(argv[2]);
    if (want_self < 0 || hx_bytes_get(argv[0], &view) < 0)
        return NULL;
    const char *s = view.buf;
    Py_ssize_t n = view.len;
    PyObject *counter = argv[1];
    PyObject *cand = PyList_New(0);
    if (!cand) {
        hx_bytes_release(&view);
        return NULL;
    }
    /* consecutive lines of one tid are counted before one dict update */
    Py_ssize_t last_a = -1, last_len = 0, run = 0, total = 0, lines = 0;
    Py_ssize_t i = 0, proc = next_process(s, 0, n);
    while (i < n) {
        const char *nl = memchr(s + i, '\n', (size_t)(n - i));
        Py_ssize_t e = nl ? nl - s : n;
        lines++;
        Py_ssize_t ds = -1, de = -1;
        if (s[i] == '[') {
            if (e - i >= 5 && memcmp(s + i, "[pid", 4) == 0 && s[i + 4] == ' ') {
                Py_ssize_t j = i + 4;
                while (j < e && s[j] == ' ')
                    j++;
                Py_ssize_t k = j;
                while (k < e && s[k] >= '0' && s[k] <= '9')
                    k++;
                if (k > j && k < e && (s[k] == ' ' || s[k] == ']')) {
                    ds = j;
                    de = k;
                }
            }
        } else {
            Py_ssize_t k = i;
            while (k < e && s[k] >= '0' && s[k] <= '9')
                k++;
            if (k > i && k < e && (s[k] == ' ' || s[k] == ']')) {
                ds = i;
                de = k;
            }
        }
        if (ds >= 0) {
            total++;
            if (last_a >= 0 && de - ds == last_len
                    && memcmp(s + ds, s + last_a, (size_t)last_len) == 0) {
                run++;
            } else {
                if (last_a >= 0 && flush_tid(counter, s, last_a, last_len, run) < 0)
                    goto error;
                last_a = ds;
                last_len = de - ds;
                run = 1;
            }
        }
        if (proc >= 0 && proc < i)
            proc = next_process(s, i, n);
        if (worth_parsing(s, i, e, want_self, proc)) {
            PyObject *o = PyLong_FromSsize_t(i);
            if (!o || PyList_Append(cand, o) < 0) {
                Py_XDECREF(o);
                goto error;
            }
            Py_DECREF(o);
        }
        if (!nl)
            break;
        i = e + 1;
    }
    if (last_a >= 0 && flush_tid(counter, s, last_a, last_len, run) < 0)
        goto error;
    PyObject *r = Py_BuildValue("(nnO)", total, lines, cand);
    Py_DECREF(cand);
    hx_bytes_release(&view);
    return r;
error:
    Py_DECREF(cand);
    hx_bytes_release(&view);
    return NULL;
}


/* find_bytes(haystack, needle) -> haystack.find(needle) for bytes-like objects (memmem: the
 * scan's search for a multiarch directory in every block, where bytes.find's skip loop stops
 * at every '/' of a log full of paths) */
PyObject *find_bytes(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    HxBytes hay, needle;
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "find_bytes(haystack, needle)");
        return NULL;
    }
    if (hx_bytes_get(argv[0], &hay) < 0)
        return NULL;
    if (hx_bytes_get(argv[1], &needle) < 0) {
        hx_bytes_release(&hay);
        return NULL;
    }
    const char *m = needle.len == 0 ? hay.buf
                    : memmem(hay.buf, (size_t)hay.len, needle.buf, (size_t)needle.len);
    Py_ssize_t at = m ? m - (const char *)hay.buf : -1;
    hx_bytes_release(&hay);
    hx_bytes_release(&needle);
    return PyLong_FromSsize_t(at);
}
