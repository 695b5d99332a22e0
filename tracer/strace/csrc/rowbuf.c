#include "fast.h"

/* ------------------------------------------------------------------ RowBuffer */
/* RowBuffer(): trace rows gathered in one growing buffer, kept from use to use (the
 * importer's rows of one block after another: no new memory, no copy to hand them over).
 * convert_block writes into it (rowbuf_text); add(data) appends bytes; clear() empties it,
 * keeping its memory; it is a read-only bytes-like object (the buffer protocol) of its rows,
 * which cannot change while a view of them is held (add, clear and convert_block raise
 * BufferError then). */

typedef struct {
    PyObject_HEAD
    Text text;
    Py_ssize_t exports;                 /* views of it held */
} RowBuf;

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
    Py_buffer view;
    if (unviewed(b) < 0 || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int rc = row_bytes(&b->text, view.buf, view.len);
    PyBuffer_Release(&view);
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

static int rowbuf_getbuffer(RowBuf *b, Py_buffer *view, int flags)
{
    static char empty[1];
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

static void rowbuf_dealloc(RowBuf *b)
{
    PyMem_Free(b->text.p);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyMethodDef rowbuf_methods[] = {
    {"add", (PyCFunction)rowbuf_add, METH_O, "append bytes"},
    {"clear", (PyCFunction)rowbuf_clear, METH_NOARGS, "empty it, keeping its memory"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods rowbuf_sequence = {.sq_length = (lenfunc)rowbuf_len};

static PyBufferProcs rowbuf_buffer = {
    .bf_getbuffer = (getbufferproc)rowbuf_getbuffer,
    .bf_releasebuffer = (releasebufferproc)rowbuf_releasebuffer,
};

PyTypeObject RowBufType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracer.strace._fast.RowBuffer",
    .tp_basicsize = sizeof(RowBuf),
    .tp_dealloc = (destructor)rowbuf_dealloc,
    .tp_as_sequence = &rowbuf_sequence,
    .tp_as_buffer = &rowbuf_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "trace rows in one buffer kept from use to use (rowbuf.c)",
    .tp_methods = rowbuf_methods,
    .tp_new = PyType_GenericNew,
};

Text *rowbuf_text(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &RowBufType)) {
        PyErr_SetString(PyExc_TypeError, "a RowBuffer");
        return NULL;
    }
    return unviewed((RowBuf *)o) < 0 ? NULL : &((RowBuf *)o)->text;
}
