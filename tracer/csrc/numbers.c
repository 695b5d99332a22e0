#include "text.h"

/* Decimal "digits[.digits][e[+-]digits]" -> the correctly rounded double, when the digits
 * (an integer <= 2**53, so exactly representable) and the power of ten (|k| <= 22, exact too)
 * let one
 * IEEE multiplication or division do it (Clinger's fast path): the same double strtod gives.
 * 1: *out set; 0: not this shape. */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
                               1e22};

int clinger(const char *s, Py_ssize_t a, Py_ssize_t b, double *out)
{
    Py_ssize_t i = a;
    int neg = 0;
    if (i < b && s[i] == '-') {
        neg = 1;
        i++;
    }
    Py_ssize_t first = i;
    while (i < b && s[i] == '0')             /* leading zeros are not significant */
        i++;
    unsigned long long m = 0;                /* unsigned: no overflow, only wrapping */
    int digits = 0, frac = 0;
    for (; i < b && s[i] >= '0' && s[i] <= '9'; i++, digits++)
        m = m * 10 + (unsigned)(s[i] - '0');
    if (digits > 16)
        return 0;
    int any = i > first;
    if (i < b && s[i] == '.') {
        i++;
        if (!digits)                         /* 0.000274: the zeros after the point */
            for (; i < b && s[i] == '0'; i++, frac++)
                any = 1;
        for (; i < b && s[i] >= '0' && s[i] <= '9'; i++, digits++, frac++) {
            if (digits >= 16)
                return 0;
            m = m * 10 + (unsigned)(s[i] - '0');
        }
        any = any || frac > 0;
    }
    if (!any || m > (1ULL << 53))        /* an exact double: at most 2**53 */
        return 0;
    int e = 0;
    if (i < b && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < b && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= b)
            return 0;
        for (; i < b && s[i] >= '0' && s[i] <= '9'; i++) {
            e = e * 10 + (s[i] - '0');
            if (e > 400)
                return 0;
        }
        if (eneg)
            e = -e;
    }
    if (i != b)
        return 0;
    int k = e - frac;
    double v = (double)m;
    if (k >= 0 && k <= 22)
        v *= POW10[k];
    else if (k < 0 && k >= -22)
        v /= POW10[-k];
    else
        return 0;
    *out = neg ? -v : v;
    return 1;
}

PyObject *py_float(const char *s, Py_ssize_t a, Py_ssize_t b, double *out)
{
    char buf[64];
    if (b > a && s[a] != '-' && clinger(s, a, b, out))
        return Py_True;
    int plain = b - a > 0 && b - a < (Py_ssize_t)sizeof(buf);
    for (Py_ssize_t i = a; plain && i < b; i++)
        plain = (s[i] >= '0' && s[i] <= '9') || s[i] == '.';
    if (plain) {
        memcpy(buf, s + a, (size_t)(b - a));
        buf[b - a] = 0;
        char *end = NULL;
        double v = PyOS_string_to_double(buf, &end, NULL);
        if (v == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return NULL;
            PyErr_Clear();             /* no number at all: float() raises ValueError */
            return NULL;
        }
        if (end == buf + (b - a)) {
            *out = v;
            return Py_True;            /* a marker: *out holds the value */
        }
        return NULL;                   /* "1.2.3": float() raises ValueError */
    }
    PyObject *sub = ascii_str(s, a, b);
    if (!sub)
        return NULL;
    PyObject *r = PyFloat_FromString(sub);
    Py_DECREF(sub);
    if (!r) {
        if (PyErr_ExceptionMatches(PyExc_ValueError))
            PyErr_Clear();
        return NULL;
    }
    *out = PyFloat_AS_DOUBLE(r);
    Py_DECREF(r);
    return Py_True;
}
