/* Text and numbers in C for every folder of the compiled helpers (tracer/csrc: text.c and
 * numbers.c): ASCII scans, Python str and int from byte ranges, Clinger's exact decimal to
 * double. What the strace importer's csrc (fast.h), the trace reader's (tracefile/csrc) and
 * the accumulator's (analysis/accumulate/csrc) share, so none of them includes another's. */
#ifndef HANGTRACE_TEXT_H
#define HANGTRACE_TEXT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "capi.h"

/* text.c: ASCII text */
Py_ssize_t find_char(const char *s, Py_ssize_t from, Py_ssize_t n, char c);
Py_ssize_t find_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w, Py_ssize_t wl);
Py_ssize_t rfind_str(const char *s, Py_ssize_t from, Py_ssize_t n, const char *w,
                     Py_ssize_t wl);
int ends_with(const char *s, Py_ssize_t a, Py_ssize_t b, const char *w);
PyObject *ascii_str(const char *s, Py_ssize_t a, Py_ssize_t b);
/* an ASCII str's bytes, read in place (*n its length), or NULL (no exception) for any other
 * object: a str with a character past 127, or not a str */
static inline const char *ascii_data(PyObject *o, Py_ssize_t *n)
{
    if (!PyUnicode_Check(o))
        return NULL;
#ifdef Py_LIMITED_API
    /* an ASCII str's UTF-8 is its own data (no copy); as many bytes as characters: ASCII */
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(o, &len);
    if (!p) {                           /* a lone surrogate: not ASCII */
        PyErr_Clear();
        return NULL;
    }
    if (len != PyUnicode_GetLength(o))
        return NULL;
    *n = len;
    return p;
#else
    if (!PyUnicode_IS_ASCII(o))
        return NULL;
    *n = PyUnicode_GET_LENGTH(o);
    return (const char *)PyUnicode_DATA(o);
#endif
}
PyObject *py_int(const char *s, Py_ssize_t a, Py_ssize_t b, int base);

/* numbers.c: float() of the numbers strace logs hold */
int clinger(const char *s, Py_ssize_t a, Py_ssize_t b, double *out);
PyObject *py_float(const char *s, Py_ssize_t a, Py_ssize_t b, double *out);
#endif
