/* The C API the compiled helpers use, the same with the full API and the limited one.
 *
 * setup.py builds the helpers either against the full API of one CPython (a cp3X wheel) or
 * with Py_LIMITED_API=0x030A0000 (HANGTRACE_ABI3=1: one abi3 wheel for CPython 3.10 and
 * later). Under the limited API the full API's macros become the functions it offers (the
 * same answers where the helpers use them: the object's type is checked first, the index
 * is in range), PyObject_Vectorcall a call with a tuple, and what the limited API lacks is
 * said where it is used: ascii_data (text.h), ascii_str and py_int's int(text, base) (text.c), the
 * heap types (PyType_FromSpec: rowbuf.c, rows.c), the slot offsets (feed.c), and, below
 * 3.11, the buffer protocol (HX_BUFFERS 0: bytes and bytearray only; RowBuffer's rows then
 * read as a copy, tobytes()). */
#ifndef HANGTRACE_CAPI_H
#define HANGTRACE_CAPI_H

#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 < 0x030B0000
#define HX_BUFFERS 0                    /* no Py_buffer, no bf_getbuffer slot before 3.11 */
#else
#define HX_BUFFERS 1
#endif

#ifdef Py_LIMITED_API
#define PyTuple_GET_ITEM(t, i) PyTuple_GetItem((t), (i))
#define PyTuple_GET_SIZE(t) PyTuple_Size(t)
#define PyTuple_SET_ITEM(t, i, v) PyTuple_SetItem((t), (i), (v))
#define PyList_GET_ITEM(l, i) PyList_GetItem((l), (i))
#define PyList_GET_SIZE(l) PyList_Size(l)
#define PyBytes_AS_STRING(b) PyBytes_AsString(b)
#define PyBytes_GET_SIZE(b) PyBytes_Size(b)
#define PyFloat_AS_DOUBLE(f) PyFloat_AsDouble(f)
#define PyDict_GET_SIZE(d) PyDict_Size(d)
#define PyUnicode_GET_LENGTH(s) PyUnicode_GetLength(s)
#define PyObject_CallOneArg(f, a) PyObject_CallFunctionObjArgs((f), (a), NULL)
/* f(*args[:n]) through a tuple (PyObject_Vectorcall is limited only from 3.12) */
static inline PyObject *hx_call(PyObject *f, PyObject *const *args, size_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(t, (Py_ssize_t)i, args[i]);
    }
    PyObject *r = PyObject_Call(f, t, NULL);
    Py_DECREF(t);
    return r;
}
#define PyObject_Vectorcall(f, args, n, kw) hx_call((f), (args), (n))
/* a type's tp_free (no PyTypeObject fields in the limited API) */
#define HX_FREE(o) ((freefunc)PyType_GetSlot(Py_TYPE((PyObject *)(o)), Py_tp_free))((void *)(o))
#else
#define HX_FREE(o) Py_TYPE((PyObject *)(o))->tp_free((PyObject *)(o))
#endif

#ifndef Py_SETREF
#define Py_SETREF(dst, src) do { PyObject *_hx_old = (PyObject *)(dst); \
        (dst) = (src); Py_DECREF(_hx_old); } while (0)
#endif
#ifndef Py_XSETREF
#define Py_XSETREF(dst, src) do { PyObject *_hx_old = (PyObject *)(dst); \
        (dst) = (src); Py_XDECREF(_hx_old); } while (0)
#endif

/* a bytes-like argument read in place, held until hx_bytes_release (Python code may run
 * meanwhile: a held bytearray cannot be resized): with the buffer protocol any; else bytes,
 * or a bytearray held through a memoryview of it (PyMemoryView_FromObject counts an export
 * as a Py_buffer does; its bytes then read with PyByteArray_AsString, no copy) */
typedef struct {
    const char *buf;
    Py_ssize_t len;
#if HX_BUFFERS
    Py_buffer view;
#else
    PyObject *held;
#endif
} HxBytes;

static inline int hx_is_bytes_like(PyObject *o)
{
#if HX_BUFFERS
    return PyObject_CheckBuffer(o);
#else
    return PyBytes_Check(o) || PyByteArray_Check(o);
#endif
}

static inline int hx_bytes_get(PyObject *o, HxBytes *b)
{
#if HX_BUFFERS
    if (PyObject_GetBuffer(o, &b->view, PyBUF_SIMPLE) < 0)
        return -1;
    b->buf = b->view.buf;
    b->len = b->view.len;
    return 0;
#else
    if (PyBytes_Check(o)) {
        Py_INCREF(o);
        b->held = o;
        b->buf = PyBytes_AsString(o);
        b->len = PyBytes_Size(o);
    } else if (PyByteArray_Check(o)) {
        if (!(b->held = PyMemoryView_FromObject(o)))
            return -1;
        b->buf = PyByteArray_AsString(o);
        b->len = PyByteArray_Size(o);
    } else {
        PyErr_SetString(PyExc_TypeError, "a bytes or bytearray object is required");
        return -1;
    }
    return 0;
#endif
}

static inline void hx_bytes_release(HxBytes *b)
{
#if HX_BUFFERS
    PyBuffer_Release(&b->view);
#else
    Py_CLEAR(b->held);
#endif
}
#endif
