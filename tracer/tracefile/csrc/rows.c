#include "rows.h"

/* ------------------------------------------------------------------ parse_rows */
/* parse_rows(block, line, bad, end_cls, decode, ts_min, ts_max) -> RowBlock or None
 *
 * tracefile/format.py TraceReader.batches's reading of a block of trace lines for the
 * analysis, without an event per row: a row of a call (tags "sc", "rd", "io") in the exact
 * shape the writer gives it (no whitespace, every field, numbers and strings as below) is
 * read here into a Row (its values; its strings as spans of the block); any other line is
 * line(its bytes) (codec.RowCodec.line: its event). None, for the reader to read the block
 * as it always did, where a line is bad (line gave bad) or blank: whatever a row of that
 * shape holds, msgspec reads it so (every field checked as the classes declare it: Time in
 * [ts_min, ts_max], Int in 64 bits, strings ASCII), so both readings of such a block give
 * the same events. decode(line) makes a row's event when it is asked for (RowBlock's
 * row_event); end_cls: the end record's class (RowBlock.end, not an event). */

#define INT_DIGITS 18                   /* at most: any such int is an Int (64 bits) */

typedef struct {
    const char *s;
    Py_ssize_t i, n;                    /* the cursor and the end of the line */
} Cursor;

static int lit(Cursor *c, const char *w, Py_ssize_t wl)
{
    if (c->n - c->i < wl || memcmp(c->s + c->i, w, (size_t)wl) != 0)
        return 0;
    c->i += wl;
    return 1;
}

static int comma(Cursor *c)
{
    if (c->i >= c->n || c->s[c->i] != ',')
        return 0;
    c->i++;
    return 1;
}

/* whether any of the 8 bytes of w is below 0x20, above 0x7e, '"' or '\\' (SWAR) */
static int special8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
    uint64_t low = w - ones * 0x20;                     /* high bit: byte < 0x20 (or >= 0x80) */
    uint64_t del = (w & ~high) + ones * 0x01;           /* high bit: byte & 0x7f == 0x7f */
    return (((quote - ones) & ~quote) | ((slash - ones) & ~slash) | low | w | del) & high
           ? 1 : 0;
}

/* a JSON string of printable ASCII; escapes only where plain is 0 (\" \\ \/ \b \f \n \r \t:
 * never \u) */
static int string(Cursor *c, Span *out, int plain)
{
    if (c->i >= c->n || c->s[c->i] != '"')
        return 0;
    Py_ssize_t a = ++c->i;
    for (;;) {
        while (c->n - c->i >= 8) {              /* eight plain bytes at a time */
            uint64_t w;
            memcpy(&w, c->s + c->i, 8);
            if (special8(w))
                break;
            c->i += 8;
        }
        if (c->i >= c->n)
            return 0;
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            out->a = (int32_t)a;
            out->b = (int32_t)c->i++;
            return 1;
        }
        if (ch < 0x20 || ch > 0x7e)
            return 0;
        if (ch == '\\') {
            if (plain || ++c->i >= c->n || !c->s[c->i] || !strchr("\"\\/bfnrt", c->s[c->i]))
                return 0;
        }
        c->i++;
    }
}

static int null(Cursor *c)
{
    return lit(c, "null", 4);
}

/* -?(0|[1-9][0-9]*) of at most INT_DIGITS digits */
static int integer(Cursor *c, long long *out)
{
    Py_ssize_t i = c->i;
    int neg = i < c->n && c->s[i] == '-';
    i += neg;
    Py_ssize_t first = i;
    long long v = 0;
    for (; i < c->n && c->s[i] >= '0' && c->s[i] <= '9'; i++)
        v = v * 10 + (c->s[i] - '0');
    Py_ssize_t digits = i - first;
    if (digits < 1 || digits > INT_DIGITS || (digits > 1 && c->s[first] == '0'))
        return 0;
    if (i < c->n && (c->s[i] == '.' || c->s[i] == 'e' || c->s[i] == 'E'))
        return 0;
    *out = neg ? -v : v;
    c->i = i;
    return 1;
}

/* -?(0|[1-9][0-9]*)\.[0-9]+([eE][+-]?[0-9]+)? or -?[1-9]e..., as the writer writes a float:
 * the double Clinger's fast path gives (numbers.c), which is the correctly rounded one */
static int number(Cursor *c, double *out)
{
    Py_ssize_t a = c->i, i = a;
    if (i < c->n && c->s[i] == '-')
        i++;
    Py_ssize_t first = i;
    while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
        i++;
    if (i == first || (i - first > 1 && c->s[first] == '0'))
        return 0;
    int point = i < c->n && c->s[i] == '.', exp = 0;
    if (point) {
        Py_ssize_t f = ++i;
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
            i++;
        if (i == f)
            return 0;
    }
    if (i < c->n && (c->s[i] == 'e' || c->s[i] == 'E')) {
        exp = 1;
        i++;
        if (i < c->n && (c->s[i] == '+' || c->s[i] == '-'))
            i++;
        Py_ssize_t f = i;
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9')
            i++;
        if (i == f)
            return 0;
    }
    if ((!point && !exp) || !clinger(c->s, a, i, out))   /* an int: msgspec's own reading */
        return 0;
    c->i = i;
    return 1;
}

static int opt_int(Cursor *c, long long *v, char *is_null)
{
    *is_null = (char)null(c);
    return *is_null || integer(c, v);
}

static int opt_str(Cursor *c, Span *s, int plain)
{
    if (null(c)) {
        s->a = s->b = -1;
        return 1;
    }
    return string(c, s, plain);
}

/* one call row of the writer's shape into r (1), or 0 */
static int call_row(Cursor *c, Row *r, double ts_min, double ts_max)
{
    Span args, target;
    if (!lit(c, "[\"", 2) || c->n - c->i < 4 || c->s[c->i + 2] != '"' || c->s[c->i + 3] != ',')
        return 0;
    const char *tag = c->s + c->i;
    r->kind = tag[0] == 's' && tag[1] == 'c' ? ROW_SC : tag[0] == 'r' && tag[1] == 'd' ? ROW_RD
              : tag[0] == 'i' && tag[1] == 'o' ? ROW_IO : -1;
    if (r->kind < 0)
        return 0;
    c->i += 4;
    if (!number(c, &r->ts) || !(r->ts >= ts_min && r->ts <= ts_max) || !comma(c)
            || !integer(c, &r->pid) || !comma(c) || !integer(c, &r->tid)
            || !comma(c) || !string(c, &r->name, 1) || !comma(c)
            || !string(c, &args, 0) || !comma(c) || !opt_int(c, &r->ret, &r->ret_null)
            || !comma(c) || !opt_str(c, &r->err, 1) || !comma(c))
        return 0;
    r->dur_null = (char)null(c);
    if ((!r->dur_null && !number(c, &r->dur)) || !comma(c)
            || !opt_int(c, &r->fd, &r->fd_null) || !comma(c)
            || !opt_str(c, &r->fd_kind, 1) || !comma(c) || !opt_str(c, &target, 0)
            || !comma(c))
        return 0;
    if (lit(c, "true", 4))
        r->ongoing = 1;
    else if (lit(c, "false", 5))
        r->ongoing = 0;
    else
        return 0;
    long long nbytes;
    if (r->kind == ROW_RD && (!comma(c) || !integer(c, &nbytes)))
        return 0;
    if (r->kind == ROW_IO && (!comma(c) || !integer(c, &r->request) || !comma(c)
                              || !opt_str(c, &r->request_name, 1)))
        return 0;
    return lit(c, "]", 1) && c->i == c->n;
}

/* ------------------------------------------------------------------ RowBlock */
static Row *spare_rows;                 /* one freed array, kept for the next block */
static Py_ssize_t spare_cap;

static void rowblock_dealloc(RowBlock *pb)
{
    Py_XDECREF(pb->data);
    Py_XDECREF(pb->events);
    Py_XDECREF(pb->decode);
    Py_XDECREF(pb->end);
    if (pb->rows) {
        if (!spare_rows || pb->cap > spare_cap) {
            PyMem_Free(spare_rows);
            spare_rows = pb->rows;
            spare_cap = pb->cap;
        } else {
            PyMem_Free(pb->rows);
        }
    }
    PyTypeObject *tp = Py_TYPE((PyObject *)pb);
    HX_FREE(pb);
    Py_DECREF(tp);
}

PyObject *row_event(RowBlock *pb, Py_ssize_t i)
{
    Row *r = &pb->rows[i];
    if (r->kind == ROW_EVENT) {
        PyObject *e = PyList_GET_ITEM(pb->events, r->index);
        Py_INCREF(e);
        return e;
    }
    PyObject *line = PyBytes_FromStringAndSize(PyBytes_AS_STRING(pb->data) + r->start,
                                               r->end - r->start);
    if (!line)
        return NULL;
    PyObject *e = PyObject_CallOneArg(pb->decode, line);
    Py_DECREF(line);
    return e;
}

static Py_ssize_t rowblock_len(RowBlock *pb)
{
    return pb->n;
}

static PyObject *rowblock_item(RowBlock *pb, Py_ssize_t i)
{
    if (i < 0 || i >= pb->n) {
        PyErr_SetString(PyExc_IndexError, "RowBlock index out of range");
        return NULL;
    }
    return row_event(pb, i);
}


static PyObject *rowblock_end(RowBlock *pb, void *closure)
{
    PyObject *e = pb->end ? pb->end : Py_None;
    Py_INCREF(e);
    return e;
}

static PyObject *rowblock_lines(RowBlock *pb, void *closure)
{
    return PyLong_FromSsize_t(pb->n + (pb->end != NULL));
}

static PyGetSetDef rowblock_getset[] = {
    {"end", (getter)rowblock_end, NULL, "the end record the block holds, or None", NULL},
    {"lines", (getter)rowblock_lines, NULL, "its rows, the end record's included", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot rowblock_slots[] = {
    {Py_tp_dealloc, (void *)rowblock_dealloc},
    {Py_sq_length, (void *)rowblock_len},
    {Py_sq_item, (void *)rowblock_item},
    {Py_tp_getset, rowblock_getset},
    {Py_tp_doc, (void *)"A block of trace rows read for the analysis (rows.c parse_rows): its "
                        "events by index, read when asked for."},
    {0, NULL},
};

static PyType_Spec rowblock_spec = {
    .name = "tracer.strace._fast.RowBlock",
    .basicsize = sizeof(RowBlock),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = rowblock_slots,
};

PyTypeObject *RowBlock_Type;

int rows_init(PyObject *m)
{
    RowBlock_Type = (PyTypeObject *)PyType_FromSpec(&rowblock_spec);
    if (!RowBlock_Type)
        return -1;
    Py_INCREF((PyObject *)RowBlock_Type);
    return PyModule_AddObject(m, "RowBlock", (PyObject *)RowBlock_Type);
}

static int grow(RowBlock *pb)
{
    Py_ssize_t cap = pb->cap ? pb->cap * 2 : 4096;
    Row *rows = PyMem_Realloc(pb->rows, (size_t)cap * sizeof(Row));
    if (!rows) {
        PyErr_NoMemory();
        return -1;
    }
    pb->rows = rows;
    pb->cap = cap;
    return 0;
}

PyObject *parse_rows(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 7 || !PyBytes_Check(argv[0]) || !PyType_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "parse_rows(block, line, bad, end_cls, decode, ts_min, ts_max)");
        return NULL;
    }
    PyObject *block = argv[0], *line = argv[1], *bad = argv[2], *end_cls = argv[3];
    double ts_min = PyFloat_AsDouble(argv[5]), ts_max = PyFloat_AsDouble(argv[6]);
    if (PyErr_Occurred())
        return NULL;
    const char *s = PyBytes_AS_STRING(block);
    Py_ssize_t size = PyBytes_GET_SIZE(block);
    if (size >= INT32_MAX) {
        Py_RETURN_NONE;
    }
    RowBlock *pb = PyObject_New(RowBlock, RowBlock_Type);
    if (!pb)
        return NULL;
    pb->data = block;
    Py_INCREF(block);
    pb->decode = argv[4];
    Py_INCREF(argv[4]);
    pb->events = PyList_New(0);
    pb->end = NULL;
    pb->n = 0;
    pb->rows = spare_rows;
    pb->cap = spare_cap;
    spare_rows = NULL;
    spare_cap = 0;
    if (!pb->events)
        goto error;
    for (Py_ssize_t p = 0; p < size;) {
        const char *nl = memchr(s + p, '\n', (size_t)(size - p));
        Py_ssize_t e = nl ? nl - s : size;
        if (e == p)                     /* a blank line: the reader's own reading */
            goto refuse;
        if (pb->n == pb->cap && grow(pb) < 0)
            goto error;
        Row *r = &pb->rows[pb->n];
        r->start = (int32_t)p;
        r->end = (int32_t)e;
        Cursor c = {s, p, e};
        if (!call_row(&c, r, ts_min, ts_max)) {
            PyObject *text = PyBytes_FromStringAndSize(s + p, e - p);
            PyObject *ev = text ? PyObject_CallOneArg(line, text) : NULL;
            Py_XDECREF(text);
            if (!ev)
                goto error;
            if (ev == bad) {
                Py_DECREF(ev);
                goto refuse;
            }
            if ((PyObject *)Py_TYPE(ev) == end_cls) {
                Py_XSETREF(pb->end, ev);
                p = e + 1;
                continue;
            }
            r->kind = ROW_EVENT;
            r->index = PyList_GET_SIZE(pb->events);
            int rc = PyList_Append(pb->events, ev);
            Py_DECREF(ev);
            if (rc < 0)
                goto error;
        }
        pb->n++;
        p = e + 1;
    }
    return (PyObject *)pb;
refuse:
    Py_DECREF(pb);
    Py_RETURN_NONE;
error:
    Py_DECREF(pb);
    return NULL;
}
