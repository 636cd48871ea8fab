/* The compiled JSON writer of bulk log lines (see workbench/sglang/logjson.py).
 *
 * A line is matched against a shape's program and, when every literal and value fits, its JSON
 * record is written from a template. A program is rows of (op, arg). Matching ops read the line
 * left to right:
 *   M_LIT   literal `arg` exactly;
 *   M_TIME  a stamp YYYY-MM-DD HH:MM:SS with optional [.,]digits, into slot `arg`;
 *   M_RANK  rank tags up to the ']' (letters, digits, '_' and spaces; stripped, not empty);
 *   M_INT   0 or [1-9][0-9]{0,14}: a count Python's int(float(text)) gives back digit for digit;
 *   M_FLOAT -?(0|[1-9][0-9]*).[0-9]+ with at most 15 significant digits and, below 1, at most three
 *           zeros after the point before the first digit: the decimals whose repr(float(text)) is
 *           the text without its trailing zeros (15 digits map to distinct doubles, and repr writes
 *           such values without an exponent);
 *   M_BOOL  True or False.
 * The line must end where the program does. Writing ops: E_LIT a literal, E_RAW a slot's text,
 * E_FLOAT a float slot as repr writes it, E_BOOL true/false, E_LINE the line's number. A line
 * that does not match writes nothing and is left to the Python path, so what is written is
 * json.dumps of the record byte for byte.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { M_LIT, M_TIME, M_RANK, M_INT, M_FLOAT, M_BOOL };
enum { E_LIT, E_RAW, E_FLOAT, E_BOOL, E_LINE };
#define SLOTS 32                 /* values a line can hold; the last is where the line ended */

typedef struct {
    const int32_t *mops, *eops, *lit_off, *lit_len;
    Py_ssize_t nm, ne;
    const uint8_t *lits;
} program_t;

static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* The slots of the line from p (end: the data's end); 0 where it does not fit or goes on after
 * the program. No literal or value takes a newline, so a line stops at its own. */
static int match(const uint8_t *d, Py_ssize_t p, Py_ssize_t end, const program_t *g,
                 Py_ssize_t *s0, Py_ssize_t *s1)
{
    for (Py_ssize_t k = 0; k < g->nm; k++) {
        int op = g->mops[2 * k], arg = g->mops[2 * k + 1];
        if (op == M_LIT) {
            Py_ssize_t n = g->lit_len[arg];
            if (p + n > end || memcmp(d + p, g->lits + g->lit_off[arg], (size_t)n) != 0)
                return 0;
            p += n;
        } else if (op == M_TIME) {
            static const char shape[] = "dddd-dd-dd dd:dd:dd";
            if (p + 19 > end)
                return 0;
            for (int j = 0; j < 19; j++) {
                uint8_t c = d[p + j];
                if (shape[j] == 'd' ? !is_digit(c) : c != (uint8_t)shape[j])
                    return 0;
            }
            Py_ssize_t q = p + 19;
            if (q + 1 < end && (d[q] == '.' || d[q] == ',') && is_digit(d[q + 1])) {
                q++;
                while (q < end && is_digit(d[q]))
                    q++;
            }
            s0[arg] = p;
            s1[arg] = q;
            p = q;
        } else if (op == M_RANK) {
            Py_ssize_t q = p;
            while (q < end && d[q] != ']') {
                uint8_t c = d[q];
                if (!(is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ' '))
                    return 0;
                q++;
            }
            Py_ssize_t a = p, b = q;
            while (a < b && d[a] == ' ')
                a++;
            while (b > a && d[b - 1] == ' ')
                b--;
            if (a == b)
                return 0;
            s0[arg] = a;
            s1[arg] = b;
            p = q;
        } else if (op == M_INT) {
            Py_ssize_t q = p;
            while (q < end && is_digit(d[q]))
                q++;
            Py_ssize_t n = q - p;
            if (n == 0 || n > 15 || (n > 1 && d[p] == '0'))
                return 0;
            s0[arg] = p;
            s1[arg] = q;
            p = q;
        } else if (op == M_FLOAT) {
            Py_ssize_t q = p;
            if (q < end && d[q] == '-')
                q++;
            Py_ssize_t a = q;
            while (q < end && is_digit(d[q]))
                q++;
            Py_ssize_t ni = q - a;
            if (ni == 0 || (ni > 1 && d[a] == '0') || q >= end || d[q] != '.')
                return 0;
            q++;
            Py_ssize_t f = q;
            while (q < end && is_digit(d[q]))
                q++;
            if (q == f)
                return 0;
            Py_ssize_t last = q;                 /* the fraction without its trailing zeros */
            while (last > f && d[last - 1] == '0')
                last--;
            Py_ssize_t sig;
            if (ni == 1 && d[a] == '0') {        /* 0.xxx: significant digits start at the first non-zero */
                Py_ssize_t lead = f;
                while (lead < last && d[lead] == '0')
                    lead++;
                if (lead < last && lead - f > 3)
                    return 0;                    /* below 1e-4: repr writes an exponent */
                sig = last - lead;
            } else {
                sig = ni + (last - f);
            }
            if (sig > 15)
                return 0;
            s0[arg] = p;
            s1[arg] = last;
            p = q;
        } else if (op == M_BOOL) {
            if (p + 4 <= end && memcmp(d + p, "True", 4) == 0) {
                s0[arg] = 1;
                p += 4;
            } else if (p + 5 <= end && memcmp(d + p, "False", 5) == 0) {
                s0[arg] = 0;
                p += 5;
            } else {
                return 0;
            }
        } else {
            return 0;
        }
    }
    if (p < end && d[p] != '\n')
        return 0;
    s1[SLOTS - 1] = p;
    return 1;
}

/* The exact size of the matched line's JSON. */
static Py_ssize_t line_size(const uint8_t *d, const program_t *g, const Py_ssize_t *s0, const Py_ssize_t *s1,
                            int64_t line)
{
    Py_ssize_t n = 1;                            /* the newline */
    for (Py_ssize_t k = 0; k < g->ne; k++) {
        int op = g->eops[2 * k], arg = g->eops[2 * k + 1];
        if (op == E_LIT)
            n += g->lit_len[arg];
        else if (op == E_RAW || op == E_FLOAT)
            n += s1[arg] - s0[arg] + (op == E_FLOAT && d[s1[arg] - 1] == '.');
        else if (op == E_BOOL)
            n += s0[arg] ? 4 : 5;
        else
            for (uint64_t v = (uint64_t)line; ; v /= 10) {
                n++;
                if (v < 10)
                    break;
            }
    }
    return n;
}

/* Writes the matched line's JSON at out + w; returns the new w. */
static Py_ssize_t write_line(const uint8_t *d, const program_t *g, const Py_ssize_t *s0,
                             const Py_ssize_t *s1, int64_t line, uint8_t *out, Py_ssize_t w)
{
    for (Py_ssize_t k = 0; k < g->ne; k++) {
        int op = g->eops[2 * k], arg = g->eops[2 * k + 1];
        if (op == E_LIT) {
            memcpy(out + w, g->lits + g->lit_off[arg], (size_t)g->lit_len[arg]);
            w += g->lit_len[arg];
        } else if (op == E_RAW || op == E_FLOAT) {
            Py_ssize_t n = s1[arg] - s0[arg];
            memcpy(out + w, d + s0[arg], (size_t)n);
            w += n;
            if (op == E_FLOAT && d[s1[arg] - 1] == '.')
                out[w++] = '0';                  /* nothing left of the fraction: x.0 */
        } else if (op == E_BOOL) {
            if (s0[arg]) {
                memcpy(out + w, "true", 4);
                w += 4;
            } else {
                memcpy(out + w, "false", 5);
                w += 5;
            }
        } else {                                 /* E_LINE */
            char buf[24];
            int m = 0;
            uint64_t v = (uint64_t)line;
            do {
                buf[m++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            while (m)
                out[w++] = (uint8_t)buf[--m];
        }
    }
    out[w++] = '\n';
    return w;
}

typedef struct {
    Py_buffer b;
    int held;
} buf_t;

static int take(PyObject *obj, buf_t *t, int writable, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, &t->b, (writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    t->held = 1;
    if (t->b.len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items", what, t->b.len,
                     itemsize);
        return -1;
    }
    return 0;
}

static void release(buf_t *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].b);
}

/* emit(data, todo, line_no, starts, first, mops, eops, lit_off, lit_len, lits, out, done, ends)
 *   -> (bytes written, lines written)
 * JSON of every line of data (lines split at \n) whose todo is set and that matches the program,
 * one per line, in line order; their indices go to done, where each one's text ends in out to
 * ends, and their todo is cleared. The first pass over data notes where each line starts in
 * starts; a later one (another program for the lines left) reads it and visits only those. */
static PyObject *emit(PyObject *self, PyObject *args)
{
    PyObject *o[13];
    int first;
    if (!PyArg_ParseTuple(args, "OOOOpOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &first, &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11], &o[12]))
        return NULL;
    buf_t b[13] = {{{0}}};
    static const struct { int writable; Py_ssize_t size; const char *name; } spec[13] = {
        {0, 1, "data"}, {1, 1, "todo"}, {0, 8, "line_no"}, {1, 8, "starts"}, {0, 0, ""}, {0, 8, "mops"},
        {0, 8, "eops"}, {0, 4, "lit_off"}, {0, 4, "lit_len"}, {0, 1, "lits"}, {1, 1, "out"}, {1, 8, "done"},
        {1, 8, "ends"}};
    for (int i = 0; i < 13; i++) {
        if (i == 4)
            continue;
        if (take(o[i], &b[i], spec[i].writable, spec[i].size, spec[i].name) < 0) {
            release(b, 13);
            return NULL;
        }
    }
    const uint8_t *d = b[0].b.buf;
    uint8_t *todo = b[1].b.buf;
    const int64_t *line_no = b[2].b.buf;
    int64_t *starts = b[3].b.buf, *done = b[11].b.buf, *ends = b[12].b.buf;
    uint8_t *out = b[10].b.buf;
    Py_ssize_t n = b[0].b.len, lines = b[1].b.len, cap = b[10].b.len;
    program_t g = {b[5].b.buf, b[6].b.buf, b[7].b.buf, b[8].b.buf, b[5].b.len / 8, b[6].b.len / 8, b[9].b.buf};
    int bad = b[2].b.len / 8 < lines || b[3].b.len / 8 < lines || b[11].b.len / 8 < lines || b[12].b.len / 8 < lines;
    for (Py_ssize_t k = 0; k < g.nm && !bad; k++) {
        int op = g.mops[2 * k], arg = g.mops[2 * k + 1];
        bad = op < M_LIT || op > M_BOOL || (op == M_LIT ? (arg < 0 || (Py_ssize_t)arg * 4 >= b[7].b.len ||
                             (Py_ssize_t)arg * 4 >= b[8].b.len || g.lit_off[arg] < 0 || g.lit_len[arg] < 0 ||
                             g.lit_off[arg] + g.lit_len[arg] > b[9].b.len) : (arg < 0 || arg >= SLOTS - 1));
    }
    for (Py_ssize_t k = 0; k < g.ne && !bad; k++) {
        int op = g.eops[2 * k], arg = g.eops[2 * k + 1];
        bad = op < E_LIT || op > E_LINE || (op == E_LIT ? (arg < 0 || (Py_ssize_t)arg * 4 >= b[7].b.len ||
                             (Py_ssize_t)arg * 4 >= b[8].b.len || g.lit_off[arg] < 0 || g.lit_len[arg] < 0 ||
                             g.lit_off[arg] + g.lit_len[arg] > b[9].b.len) : (arg < 0 || arg >= SLOTS - 1));
    }
    if (bad) {
        release(b, 13);
        PyErr_SetString(PyExc_ValueError, "emit: arrays shorter than the lines, or a program out of range");
        return NULL;
    }
    Py_ssize_t s0[SLOTS] = {0}, s1[SLOTS] = {0};
    Py_ssize_t w = 0, nd = 0, p = 0;
    int full = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < lines; i++) {
        if (first)
            starts[i] = p;
        else if (!todo[i])
            continue;
        else
            p = starts[i];
        Py_ssize_t end = -1;
        if (todo[i] && p <= n && match(d, p, n, &g, s0, s1)) {
            end = s1[SLOTS - 1];
            if (w + line_size(d, &g, s0, s1, line_no[i]) > cap) {
                full = 1;
                break;
            }
            w = write_line(d, &g, s0, s1, line_no[i], out, w);
            done[nd] = i;
            ends[nd] = w;
            nd++;
            todo[i] = 0;
        } else if (first) {
            const uint8_t *nl = p < n ? memchr(d + p, '\n', (size_t)(n - p)) : NULL;
            end = nl ? nl - d : n;
        }
        p = end + 1;
    }
    Py_END_ALLOW_THREADS
    release(b, 13);
    if (full) {
        PyErr_SetString(PyExc_ValueError, "emit: the output buffer is too small");
        return NULL;
    }
    return Py_BuildValue("nn", w, nd);
}

/* merge(b0, e0, n0, b1, e1, n1, b2, e2, n2, out) -> bytes written
 * Lines of up to three texts into out in line order: text k's line j ends at ek[j] and has the
 * number nk[j] (ascending). Each run of one text's lines is one block copy. */
static PyObject *merge(PyObject *self, PyObject *args)
{
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9]))
        return NULL;
    buf_t b[10] = {{{0}}};
    for (int i = 0; i < 10; i++) {
        int writable = i == 9;
        Py_ssize_t size = (i == 9 || i % 3 == 0) ? 1 : 8;
        if (take(o[i], &b[i], writable, size, i == 9 ? "out" : i % 3 == 0 ? "text" : "lines") < 0) {
            release(b, 10);
            return NULL;
        }
    }
    const uint8_t *t[3];
    const int64_t *e[3], *num[3];
    Py_ssize_t m[3], at[3] = {0, 0, 0}, total = 0;
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        t[k] = b[3 * k].b.buf;
        e[k] = b[3 * k + 1].b.buf;
        num[k] = b[3 * k + 2].b.buf;
        m[k] = b[3 * k + 2].b.len / 8;
        bad |= b[3 * k + 1].b.len / 8 != m[k] || (m[k] && (e[k][m[k] - 1] > b[3 * k].b.len));
        for (Py_ssize_t j = 1; j < m[k] && !bad; j++)
            bad = e[k][j] < e[k][j - 1] || num[k][j] < num[k][j - 1];
        bad |= m[k] && e[k][0] < 0;
        total += m[k] ? e[k][m[k] - 1] : 0;
    }
    uint8_t *out = b[9].b.buf;
    if (bad || total > b[9].b.len) {
        release(b, 10);
        PyErr_SetString(PyExc_ValueError, "merge: line ends or numbers out of order, or the output too small");
        return NULL;
    }
    Py_ssize_t w = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        int best = -1;
        for (int k = 0; k < 3; k++)
            if (at[k] < m[k] && (best < 0 || num[k][at[k]] < num[best][at[best]]))
                best = k;
        if (best < 0)
            break;
        int64_t lim = INT64_MAX;
        for (int k = 0; k < 3; k++)
            if (k != best && at[k] < m[k] && num[k][at[k]] < lim)
                lim = num[k][at[k]];
        Py_ssize_t j = at[best];
        while (j < m[best] && num[best][j] <= lim)
            j++;
        Py_ssize_t a = at[best] ? e[best][at[best] - 1] : 0, z = e[best][j - 1];
        memcpy(out + w, t[best] + a, (size_t)(z - a));
        w += z - a;
        at[best] = j;
    }
    Py_END_ALLOW_THREADS
    release(b, 10);
    return PyLong_FromSsize_t(w);
}

static PyMethodDef methods[] = {
    {"emit", emit, METH_VARARGS, "JSON of the lines a program matches (see the module's source)."},
    {"merge", merge, METH_VARARGS, "Lines of up to three JSON texts in line order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_logjson", "The compiled JSON writer of bulk log lines.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__logjson(void) { return PyModule_Create(&module); }
