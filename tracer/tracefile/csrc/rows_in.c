#include "fast.h"

#define MAX_FIELDS 32

/* slot_offsets(cls, names) -> offsets of the object slots that hold those fields, or None:
 * what decode_rows needs to fill an instance of a slots dataclass without running its
 * __init__ (which only stores each field: the caller checks there is no __post_init__). */
PyObject *slot_offsets(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyType_Check(argv[0]) || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "slot_offsets(cls, names)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(argv[1]);
    if (n > MAX_FIELDS)
        Py_RETURN_NONE;
    PyObject *out = PyTuple_New(n);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttr(argv[0], PyTuple_GET_ITEM(argv[1], i));
        if (!d) {
            Py_DECREF(out);
            return NULL;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type);
        PyMemberDef *m = ok ? ((PyMemberDescrObject *)d)->d_member : NULL;
        ok = m && m->type == T_OBJECT_EX && !(m->flags & READONLY);
        PyObject *off = ok ? PyLong_FromSsize_t(m->offset) : NULL;
        Py_DECREF(d);
        if (!off) {
            Py_DECREF(out);
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        PyTuple_SET_ITEM(out, i, off);
    }
    return out;
}

/* What decode_rows knows of one tag of its table, read once per call */
typedef struct {
    char tag[16];
    Py_ssize_t taglen, nf, tuple_at;
    PyObject *cls;                      /* borrowed from the table */
    int direct;                         /* fill the slots at off[] */
    Py_ssize_t off[MAX_FIELDS];
    char codes[MAX_FIELDS];             /* validate.type_codes: what each field may hold */
} Spec;

#define MAX_SPECS 16

typedef struct {
    Spec specs[MAX_SPECS];
    int n;
} Specs;

static Spec *find_spec(Specs *ss, PyObject *table, const char *tag, Py_ssize_t len)
{
    for (int i = 0; i < ss->n; i++)
        if (ss->specs[i].taglen == len && memcmp(ss->specs[i].tag, tag, (size_t)len) == 0)
            return &ss->specs[i];
    if (len >= 16 || ss->n >= MAX_SPECS)
        return NULL;
    PyObject *key = ascii_str(tag, 0, len);
    PyObject *spec = key ? PyDict_GetItemWithError(table, key) : NULL;
    Py_XDECREF(key);
    if (!spec || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5)
        return NULL;
    Spec *sp = &ss->specs[ss->n];
    sp->nf = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 1));
    sp->tuple_at = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
    if (PyErr_Occurred() || sp->nf <= 0 || sp->nf > MAX_FIELDS)
        return NULL;
    PyObject *codes = PyTuple_GET_ITEM(spec, 4);
    if (!PyUnicode_Check(codes) || !PyUnicode_IS_ASCII(codes)
            || PyUnicode_GET_LENGTH(codes) != sp->nf)
        return NULL;
    memcpy(sp->codes, PyUnicode_DATA(codes), (size_t)sp->nf);
    sp->cls = PyTuple_GET_ITEM(spec, 0);
    PyObject *offsets = PyTuple_GET_ITEM(spec, 3);
    sp->direct = PyType_Check(sp->cls) && PyTuple_Check(offsets)
                 && PyTuple_GET_SIZE(offsets) == sp->nf;
    for (Py_ssize_t j = 0; sp->direct && j < sp->nf; j++) {
        sp->off[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, j));
        if (sp->off[j] <= 0)
            sp->direct = 0;
    }
    if (PyErr_Occurred())
        return NULL;
    memcpy(sp->tag, tag, (size_t)len);
    sp->taglen = len;
    ss->n++;
    return sp;
}

/* v is a list whose items are all exactly of type tp (no subclass: bool is not an int) */
static int list_of(PyObject *v, PyTypeObject *tp)
{
    if (!PyList_CheckExact(v))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++)
        if (!Py_IS_TYPE(PyList_GET_ITEM(v, i), tp))
            return 0;
    return 1;
}

/* Does v hold what validate.row_decoder accepts for a field of this code? When not, the row
 * goes to Python, which refuses it (a corrupt line) or reads it: the two always agree. */
static int check_value(PyObject *v, char code)
{
    if (v == Py_None && (code == 'I' || code == 'F' || code == 'S' || code == 'B'))
        return 1;
    switch (code) {
    case 'i': case 'I':
        return PyLong_CheckExact(v);
    case 'f': case 'F':
        if (PyFloat_CheckExact(v)) {
            double x = PyFloat_AS_DOUBLE(v);
            return x >= -1e308 && x <= 1e308;
        }
        if (PyLong_CheckExact(v)) {
            double x = PyLong_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) {     /* too large for a double */
                PyErr_Clear();
                return 0;
            }
            return x >= -1e308 && x <= 1e308;
        }
        return 0;
    case 's': case 'S':
        return PyUnicode_CheckExact(v);
    case 'b': case 'B':
        return PyBool_Check(v);
    case 't': case 'L':             /* a list of strings ('t': made a tuple by the caller) */
        return list_of(v, &PyUnicode_Type);
    case 'n':                       /* a list of ints */
        return list_of(v, &PyLong_Type);
    }
    return 0;
}

/* one row s[a:b] -> an event, or NULL (no exception) when it is for Python */
static PyObject *decode_one(const char *s, Py_ssize_t a, Py_ssize_t b, PyObject *table,
                            Specs *ss, Memo *memo)
{
    if (b - a < 4 || s[a] != '[' || s[a + 1] != '"')
        return NULL;
    Py_ssize_t q = find_char(s, a + 2, b, '"');
    if (q < 0 || q + 1 >= b)
        return NULL;
    Spec *sp = find_spec(ss, table, s + a + 2, q - (a + 2));
    if (!sp)
        return NULL;
    Py_ssize_t nf = sp->nf, tuple_at = sp->tuple_at;
    PyObject *vals[MAX_FIELDS];
    Py_ssize_t k = 0;
    Cur c = {s, q + 1, b, memo};
    PyObject *ev = NULL;
    while (k < nf) {
        if (c.i >= c.n || s[c.i] != ',')
            goto done;
        c.i++;
        PyObject *v = json_value(&c, 0);
        if (!v)
            goto done;
        if (!check_value(v, sp->codes[k])) {
            Py_DECREF(v);
            goto done;
        }
        if (k == tuple_at && PyList_CheckExact(v)) {
            PyObject *t = PyList_AsTuple(v);
            Py_DECREF(v);
            if (!t)
                goto done;
            v = t;
        }
        vals[k++] = v;
    }
    if (c.i + 1 != c.n || s[c.i] != ']')
        goto done;
    if (sp->direct) {
        PyTypeObject *tp = (PyTypeObject *)sp->cls;
        PyObject *obj = tp->tp_alloc(tp, 0);
        if (!obj)
            goto done;
        for (Py_ssize_t j = 0; j < k; j++)
            *(PyObject **)((char *)obj + sp->off[j]) = vals[j];      /* stolen */
        /* Its fields are strings, numbers and lists of them: it can be in no reference cycle,
         * so the cyclic collector need not visit it (as CPython untracks such tuples). */
        if (PyObject_IS_GC(obj))
            PyObject_GC_UnTrack(obj);
        return obj;
    }
    ev = PyObject_Vectorcall(sp->cls, vals, (size_t)k, NULL);
done:
    for (Py_ssize_t j = 0; j < k; j++)
        Py_DECREF(vals[j]);
    return ev;
}

PyObject *decode_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !(PyUnicode_Check(argv[0]) || PyBytes_Check(argv[0]))
            || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_rows(block, table)");
        return NULL;
    }
    PyObject *block = argv[0], *table = argv[1];
    const char *s;
    Py_ssize_t n;
    int ascii = 1;
    if (PyBytes_Check(block)) {          /* bytes straight from the file: no decoding step */
        s = PyBytes_AS_STRING(block);
        n = PyBytes_GET_SIZE(block);
        uint64_t any = 0, w;
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) {        /* 8 bytes at a time: is any high bit set */
            memcpy(&w, s + i, 8);
            any |= w;
        }
        for (; i < n; i++)
            any |= (unsigned char)s[i];
        ascii = !(any & 0x8080808080808080ULL);
    } else {
        s = (const char *)PyUnicode_DATA(block);
        n = PyUnicode_GET_LENGTH(block);
        ascii = PyUnicode_IS_ASCII(block);
    }
    if (!ascii) {
        PyErr_SetString(PyExc_ValueError, "decode_rows: the block must be ASCII");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    Py_ssize_t a = 0, odd = 0;
    Specs specs;
    specs.n = 0;
    Memo *memo = PyMem_Calloc(1, sizeof(Memo));
    if (!memo) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    while (a < n) {
        Py_ssize_t e = find_char(s, a, n, '\n');
        Py_ssize_t b = e < 0 ? n : e;
        PyObject *item = decode_one(s, a, b, table, &specs, memo);
        if (!item) {
            odd++;
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError)
                        && !PyErr_ExceptionMatches(PyExc_TypeError)
                        && !PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    Py_DECREF(out);
                    memo_clear(memo);
                    PyMem_Free(memo);
                    return NULL;
                }
                PyErr_Clear();
            }
            item = ascii_str(s, a, e < 0 ? n : e + 1);   /* the line, for Python */
            if (!item) {
                Py_DECREF(out);
                memo_clear(memo);
                PyMem_Free(memo);
                return NULL;
            }
        }
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            memo_clear(memo);
            PyMem_Free(memo);
            return NULL;
        }
        if (e < 0)
            break;
        a = e + 1;
    }
    memo_clear(memo);
    PyMem_Free(memo);
    return Py_BuildValue("(Nn)", out, odd);
}

