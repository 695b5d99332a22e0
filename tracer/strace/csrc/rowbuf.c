#include "fast.h"

/* ------------------------------------------------------------------ RowBuffer */
/* RowBuffer(): trace rows gathered in one growing buffer, kept from use to use (the
 * importer's rows of one block after another: no new memory, no copy to hand them over).
 * convert_block writes into it (rowbuf_text); add(data) appends bytes; clear() empties it,
 * keeping its memory; it is a read-only bytes-like object (the buffer protocol) of its rows,
 * which cannot change while a view of them is held (add, clear and convert_block raise
 * BufferError then). Built for the limited API of 3.10 (capi.h HX_BUFFERS 0: a type cannot
 * export a buffer there), it is no bytes-like object: tobytes() gives its rows as bytes, a
 * copy (a memoryview of its memory would be unsafe: memoryview(view) or a slice of it outlives
 * a release() and reads what the buffer moved or freed). */

typedef struct {
    PyObject_HEAD
    Text text;
    Py_ssize_t exports;                 /* views of it held */
} RowBuf;

PyTypeObject *RowBufType;

static int unviewed(RowBuf *b)
{
    if (b->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "RowBuffer: a view of its rows is held");
        return -1;
    }
    return 0;
}

static PyObject *rowbuf_add(RowBuf *b, PyObject *data)
{
    HxBytes view;
    if (unviewed(b) < 0 || hx_bytes_get(data, &view) < 0)
        return NULL;
    int rc = row_bytes(&b->text, view.buf, view.len);
    hx_bytes_release(&view);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *rowbuf_clear(RowBuf *b, PyObject *unused)
{
    if (unviewed(b) < 0)
        return NULL;
    b->text.len = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t rowbuf_len(RowBuf *b)
{
    return b->text.len;
}

static char empty[1];

#if HX_BUFFERS
static int rowbuf_getbuffer(RowBuf *b, Py_buffer *view, int flags)
{
    if (PyBuffer_FillInfo(view, (PyObject *)b, b->text.p ? b->text.p : empty, b->text.len, 1,
                          flags) < 0)
        return -1;
    b->exports++;
    return 0;
}

static void rowbuf_releasebuffer(RowBuf *b, Py_buffer *view)
{
    b->exports--;
}
#else
static PyObject *rowbuf_tobytes(RowBuf *b, PyObject *unused)
{
    return PyBytes_FromStringAndSize(b->text.p ? b->text.p : empty, b->text.len);
}
#endif

static void rowbuf_dealloc(RowBuf *b)
{
    PyTypeObject *tp = Py_TYPE((PyObject *)b);
    PyMem_Free(b->text.p);
    HX_FREE(b);
    Py_DECREF(tp);
}

static PyMethodDef rowbuf_methods[] = {
    {"add", (PyCFunction)rowbuf_add, METH_O, "append bytes"},
    {"clear", (PyCFunction)rowbuf_clear, METH_NOARGS, "empty it, keeping its memory"},
#if !HX_BUFFERS
    {"tobytes", (PyCFunction)rowbuf_tobytes, METH_NOARGS, "its rows as bytes (a copy)"},
#endif
    {NULL, NULL, 0, NULL},
};

static PyType_Slot rowbuf_slots[] = {
    {Py_tp_dealloc, (void *)rowbuf_dealloc},
    {Py_sq_length, (void *)rowbuf_len},
#if HX_BUFFERS
    {Py_bf_getbuffer, (void *)rowbuf_getbuffer},
    {Py_bf_releasebuffer, (void *)rowbuf_releasebuffer},
#endif
    {Py_tp_doc, (void *)"trace rows in one buffer kept from use to use (rowbuf.c)"},
    {Py_tp_methods, rowbuf_methods},
    {Py_tp_new, (void *)PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec rowbuf_spec = {
    .name = "tracer.strace._fast.RowBuffer",
    .basicsize = sizeof(RowBuf),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = rowbuf_slots,
};

int rowbuf_init(PyObject *m)
{
    RowBufType = (PyTypeObject *)PyType_FromSpec(&rowbuf_spec);
    if (!RowBufType)
        return -1;
    Py_INCREF((PyObject *)RowBufType);
    return PyModule_AddObject(m, "RowBuffer", (PyObject *)RowBufType);
}

Text *rowbuf_text(PyObject *o)
{
    if (!PyObject_TypeCheck(o, RowBufType)) {
        PyErr_SetString(PyExc_TypeError, "a RowBuffer");
        return NULL;
    }
    return unviewed((RowBuf *)o) < 0 ? NULL : &((RowBuf *)o)->text;
}
