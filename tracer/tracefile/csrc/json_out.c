#include "fast.h"

/* ------------------------------------------------------------------ encode_row */

int buf_grow(Buf *b, Py_ssize_t more)
{
    if (b->n + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap * 2 + more + 64;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

int buf_add(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static const char HEX[] = "0123456789abcdef";

static int add_u(Buf *b, Py_UCS4 c)
{
    char e[6] = {'\\', 'u', HEX[(c >> 12) & 15], HEX[(c >> 8) & 15], HEX[(c >> 4) & 15],
                 HEX[c & 15]};
    return buf_add(b, e, 6);
}

/* json's encode_basestring_ascii */
int add_json_str(Buf *b, PyObject *str)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    if (buf_grow(b, n + 2) < 0 || buf_add(b, "\"", 1) < 0)
        return -1;
    if (PyUnicode_IS_ASCII(str)) {       /* runs of plain characters in one copy */
        const char *a = (const char *)data;
        Py_ssize_t i = 0;
        while (i < n) {
            Py_ssize_t j = i;
            while (j < n && a[j] >= ' ' && a[j] <= '~' && a[j] != '\\' && a[j] != '"')
                j++;
            if (j > i && buf_add(b, a + i, j - i) < 0)
                return -1;
            if (j >= n)
                break;
            const char *esc = NULL;
            switch (a[j]) {
            case '\\': esc = "\\\\"; break;
            case '"': esc = "\\\""; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            }
            if (esc ? buf_add(b, esc, 2) < 0 : add_u(b, (Py_UCS4)(unsigned char)a[j]) < 0)
                return -1;
            i = j + 1;
        }
        return buf_add(b, "\"", 1);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            char ch = (char)c;
            if (buf_add(b, &ch, 1) < 0)
                return -1;
            continue;
        }
        const char *esc = NULL;
        switch (c) {
        case '\\': esc = "\\\\"; break;
        case '"': esc = "\\\""; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        }
        if (esc) {
            if (buf_add(b, esc, 2) < 0)
                return -1;
        } else if (c >= 0x10000) {
            Py_UCS4 v = c - 0x10000;
            if (add_u(b, 0xd800 | ((v >> 10) & 0x3ff)) < 0 || add_u(b, 0xdc00 | (v & 0x3ff)) < 0)
                return -1;
        } else if (add_u(b, c) < 0) {
            return -1;
        }
    }
    return buf_add(b, "\"", 1);
}

/* 1: added; 0: a value json.dumps would write some other way (caller falls back); -1 error */
int add_value(Buf *b, PyObject *v, int depth)
{
    if (v == Py_None)
        return buf_add(b, "null", 4) < 0 ? -1 : 1;
    if (v == Py_True)
        return buf_add(b, "true", 4) < 0 ? -1 : 1;
    if (v == Py_False)
        return buf_add(b, "false", 5) < 0 ? -1 : 1;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow == 0) {
            if (x == -1 && PyErr_Occurred())
                return -1;
            char tmp[32];
            int k = 32;
            unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
            do {
                tmp[--k] = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (x < 0)
                tmp[--k] = '-';
            return buf_add(b, tmp + k, 32 - k) < 0 ? -1 : 1;
        }
        PyObject *r = PyObject_Str(v);
        if (!r)
            return -1;
        int rc = buf_add(b, PyUnicode_AsUTF8(r), PyUnicode_GET_LENGTH(r));
        Py_DECREF(r);
        return rc < 0 ? -1 : 1;
    }
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (!isfinite(x))
            return 0;
        char tmp[48];
        int k = fast_repr(x, tmp);
        if (k > 0)
            return buf_add(b, tmp, k) < 0 ? -1 : 1;
        char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!r)
            return -1;
        int rc = buf_add(b, r, (Py_ssize_t)strlen(r));
        PyMem_Free(r);
        return rc < 0 ? -1 : 1;
    }
    if (PyUnicode_CheckExact(v))
        return add_json_str(b, v) < 0 ? -1 : 1;
    if (depth == 0 && (PyTuple_CheckExact(v) || PyList_CheckExact(v))) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(v);
        if (buf_add(b, "[", 1) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(v, i);
            if (!PyUnicode_CheckExact(item))
                return 0;
            if ((i && buf_add(b, ",", 1) < 0) || add_json_str(b, item) < 0)
                return -1;
        }
        return buf_add(b, "]", 1) < 0 ? -1 : 1;
    }
    return 0;
}

/* encode_row(prefix, names, fallback, event): partial(encode_row, prefix, names, fallback) is
 * a row formatter for one class; fallback(event) writes the rows it cannot */
PyObject *encode_row(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 4 || !PyUnicode_Check(argv[0]) || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "encode_row(prefix, names, fallback, event)");
        return NULL;
    }
    PyObject *obj = argv[3], *names = argv[1];
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(argv[0], &plen);
    if (!prefix)
        return NULL;
    Buf b = {NULL, 0, 0};
    int rc = buf_add(&b, prefix, plen);
    Py_ssize_t k = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; rc >= 0 && i < k; i++) {
        PyObject *v = PyObject_GetAttr(obj, PyTuple_GET_ITEM(names, i));
        if (!v) {
            rc = -1;
            break;
        }
        if (i)
            rc = buf_add(&b, ",", 1);
        if (rc >= 0) {
            rc = add_value(&b, v, 0);
            if (rc == 0) {
                Py_DECREF(v);
                PyMem_Free(b.p);
                if (argv[2] == Py_None)
                    Py_RETURN_NONE;
                return PyObject_CallOneArg(argv[2], obj);
            }
        }
        Py_DECREF(v);
    }
    if (rc >= 0)
        rc = buf_add(&b, "]\n", 2);
    PyObject *r = rc < 0 ? NULL : ascii_str(b.p, 0, b.n);
    PyMem_Free(b.p);
    return r;
}

