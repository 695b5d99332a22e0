#include "fast.h"

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


/* repr(x) without David Gay's dtoa for the floats strace logs are made of: microsecond
 * timestamps and durations. For 1e-6 <= |x| < 2**33 the candidate is x rounded to 6 decimals;
 * when it parses back to exactly x it is repr's string: every string that parses to x lies
 * within one ulp (< 1e-6 here) of it, so no other multiple of 1e-6 does, and a string with
 * fewer significant digits than the candidate is such a multiple. Layout as repr ('r' format):
 * exponent form when the decimal point is at or left of the 4th place or right of the 16th.
 * Returns the length written to out (>= 32 bytes), 0 when the caller must use repr. */
int fast_repr(double x, char *out)
{
    double ax = fabs(x);
    if (!(ax >= 1e-6 && ax < 8589934592.0))
        return 0;
    long long N = llround(ax * 1e6);
    char dig[24];
    int nd = 0;
    long long t = N;
    while (t) {
        dig[nd++] = (char)('0' + t % 10);
        t /= 10;
    }
    if (nd == 0)
        return 0;
    for (int i = 0; i < nd / 2; i++) {        /* most significant first */
        char c = dig[i];
        dig[i] = dig[nd - 1 - i];
        dig[nd - 1 - i] = c;
    }
    int decpt = nd - 6;                        /* digits before the decimal point */
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    int k = 0;
    if (x < 0)
        out[k++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[k++] = dig[0];
        if (nd > 1) {
            out[k++] = '.';
            memcpy(out + k, dig + 1, (size_t)(nd - 1));
            k += nd - 1;
        }
        int e = decpt - 1;
        out[k++] = 'e';
        out[k++] = e < 0 ? '-' : '+';
        if (e < 0)
            e = -e;
        if (e >= 100)
            out[k++] = (char)('0' + e / 100);
        out[k++] = (char)('0' + (e / 10) % 10);
        out[k++] = (char)('0' + e % 10);
    } else if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[k++] = '0';
        memcpy(out + k, dig, (size_t)nd);
        k += nd;
    } else if (decpt >= nd) {
        memcpy(out + k, dig, (size_t)nd);
        k += nd;
        for (int i = nd; i < decpt; i++)
            out[k++] = '0';
        out[k++] = '.';
        out[k++] = '0';
    } else {
        memcpy(out + k, dig, (size_t)decpt);
        k += decpt;
        out[k++] = '.';
        memcpy(out + k, dig + decpt, (size_t)(nd - decpt));
        k += nd - decpt;
    }
    out[k] = 0;
    /* the candidate's value is N / 10**6; N < 2**53 and 10**6 are exact doubles, so one
     * division rounds it correctly (as strtod of the candidate would) */
    return ((double)N / 1e6 == ax) ? k : 0;
}

