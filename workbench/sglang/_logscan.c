/* The compiled line sorter and bulk-line readers of the log parser (see workbench/sglang/logparse.py).
 *
 * Each function reads a str of one-byte kind (ASCII or latin-1: what a server writes; sort also
 * takes the UTF-8 bytes of any text) and gives what the Python path gives for it, or None where
 * it would not: a str of another kind, a line whose reading it does not know. The caller then
 * takes the Python path, so the two never differ.
 *
 *   sort(text)          each line of text (which ends with a newline) sorted the way _parse sorts
 *                       it: by what follows its first "] " (Decode batch, Prefill batch, the
 *                       uvicorn "INFO:  " line, anything else); and whether each kind of bulk
 *                       line is plain (every line starts with its stamp and holds one record,
 *                       so _bulk would change none)
 *   decode_shape(text)  _DECODE_SHAPE's groups of each line, as float() gives them
 *   stamps(text)        _STAMP_BULK's group of each line
 *   lines_with(text, literals)  the lines holding one of the literals (the rare lines' regex then
 *                       reads those lines only)
 *
 * In a str of one-byte kind, re's \d is [0-9] and \w is what str.isalnum() says, or '_'.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { K_DECODE, K_PREFILL, K_OTHER, K_INFO };
static unsigned char is_word[256];

static inline int is_digit(Py_UCS1 c) { return c >= '0' && c <= '9'; }

/* A one-byte str from n bytes (ASCII where they are: a str has one form for its characters). */
static PyObject *text_of(const Py_UCS1 *src, Py_ssize_t n, int ascii)
{
    if (!ascii)
        return PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, src, n);
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL && n)
        memcpy(PyUnicode_1BYTE_DATA(s), src, (size_t)n);
    return s;
}

/* 1: a str of one-byte kind, not empty; 0: another (the caller says None); -1: not a str. */
static int one_byte(PyObject *arg, const Py_UCS1 **d, Py_ssize_t *n)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "a str is expected");
        return -1;
    }
    if (PyUnicode_KIND(arg) != PyUnicode_1BYTE_KIND || PyUnicode_GET_LENGTH(arg) == 0)
        return 0;
    *d = PyUnicode_1BYTE_DATA(arg);
    *n = PyUnicode_GET_LENGTH(arg);
    return 1;
}

static inline int has(const Py_UCS1 *d, Py_ssize_t p, Py_ssize_t e, const char *lit, Py_ssize_t n)
{
    return p + n <= e && memcmp(d + p, lit, (size_t)n) == 0;
}

/* What follows the line's first "] " (the line is [p, e), its newline at e). */
static int line_kind(const Py_UCS1 *d, Py_ssize_t p, Py_ssize_t e)
{
    for (Py_ssize_t q = p; q + 1 < e; q++) {
        const Py_UCS1 *hit = memchr(d + q, ']', (size_t)(e - 1 - q));
        if (hit == NULL)
            return K_OTHER;
        q = hit - d;
        if (d[q + 1] != ' ')
            continue;
        if (has(d, q, e, "] Decode batch", 14))
            return K_DECODE;
        if (has(d, q, e, "] Prefill batch", 15))
            return K_PREFILL;
        if (has(d, q, e, "] INFO:  ", 9))
            return K_INFO;
        return K_OTHER;
    }
    return K_OTHER;
}

/* A bulk line that starts with "[2" (its stamp's year) and holds " batch" once: one record. */
static int plain(const Py_UCS1 *d, Py_ssize_t b, Py_ssize_t e)
{
    if (e - b < 2 || d[b] != '[' || d[b + 1] != '2')
        return 0;
    int seen = 0;
    for (Py_ssize_t q = b + 1; q + 5 <= e; q++) {
        const Py_UCS1 *hit = memchr(d + q, 'b', (size_t)(e - q));
        if (hit == NULL)
            break;
        q = hit - d;
        if (d[q - 1] == ' ' && has(d, q, e, "batch", 5) && ++seen > 1)
            return 0;
    }
    return 1;
}

/* The text to sort: a str of one-byte kind, or the UTF-8 bytes of one (any buffer). */
typedef struct {
    const Py_UCS1 *d;
    Py_ssize_t n;
    int utf8, ascii;
    Py_buffer view;
} source_t;

/* 1: got it; 0: a str one_byte does not read (None); -1: an error. */
static int source(PyObject *arg, source_t *s)
{
    s->view.obj = NULL;
    if (PyUnicode_Check(arg)) {
        int ok = one_byte(arg, &s->d, &s->n);
        s->utf8 = 0;
        s->ascii = ok > 0 && PyUnicode_IS_ASCII(arg);
        return ok;
    }
    if (PyObject_GetBuffer(arg, &s->view, PyBUF_SIMPLE) < 0)
        return -1;
    s->d = s->view.buf;
    s->n = s->view.len;
    s->utf8 = 1;
    s->ascii = 0;
    return 1;
}

/* Text of n bytes of the source (UTF-8 decoded as the parser decodes it: errors replaced). An
 * invalid sequence never takes in an ASCII byte, so decoding lines joined by newlines gives the
 * decoded lines joined by newlines. */
static PyObject *text_from(const source_t *s, const Py_UCS1 *src, Py_ssize_t n)
{
    if (s->utf8)
        return PyUnicode_DecodeUTF8((const char *)src, n, "replace");
    return text_of(src, n, s->ascii);
}

/* Where the line from p ends (its terminator's first byte), and the terminator's length: "\n",
 * or with carriage returns, "\r\n" or a lone "\r" (the parser reads both as "\n"). */
static Py_ssize_t line_end(const Py_UCS1 *d, Py_ssize_t p, Py_ssize_t n, int cr, int *len)
{
    if (!cr) {
        *len = 1;
        return (const Py_UCS1 *)memchr(d + p, '\n', (size_t)(n - p)) - d;
    }
    while (d[p] != '\n' && d[p] != '\r')
        p++;
    *len = d[p] == '\r' && p + 1 < n && d[p + 1] == '\n' ? 2 : 1;
    return p;
}

/* sort(text) -> (decode, decode_rows, decode_plain, prefill, prefill_rows, prefill_plain, other,
 * other_rows, other_starts, line_starts, line_ends) | None. text ends with a newline. The three
 * texts are their lines joined by newlines; *_rows are the lines' indices, other_starts where
 * each other line starts in other, line_starts and line_ends where each line is in text (all
 * int64 bytes). */
static PyObject *sort(PyObject *self, PyObject *arg)
{
    source_t src;
    int ok = source(arg, &src);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const Py_UCS1 *d = src.d;
    Py_ssize_t n = src.n;
    PyObject *out = NULL, *starts = NULL, *ends = NULL, *ostarts = NULL;
    PyObject *text[3] = {NULL, NULL, NULL}, *rows[3] = {NULL, NULL, NULL};
    unsigned char *kind = NULL;
    Py_UCS1 *buf = NULL;
    if (n == 0 || d[n - 1] != '\n') {
        out = Py_NewRef(Py_None);
        goto done;
    }
    int cr = memchr(d, '\r', (size_t)n) != NULL, len;
    Py_ssize_t lines = 0;
    for (Py_ssize_t p = 0; p < n; lines++)
        p = line_end(d, p, n, cr, &len) + len;

    starts = PyBytes_FromStringAndSize(NULL, lines * 8);
    ends = PyBytes_FromStringAndSize(NULL, lines * 8);
    kind = PyMem_Malloc((size_t)lines);
    Py_ssize_t count[3] = {0, 0, 0}, size[3] = {0, 0, 0};
    int plains[2] = {1, 1};
    if (starts == NULL || ends == NULL || kind == NULL) {
        if (kind == NULL)
            PyErr_NoMemory();
        goto done;
    }
    int64_t *st = (int64_t *)PyBytes_AS_STRING(starts), *en = (int64_t *)PyBytes_AS_STRING(ends);
    Py_ssize_t p = 0;
    for (Py_ssize_t j = 0; j < lines; j++) {
        Py_ssize_t e = line_end(d, p, n, cr, &len);
        int k = line_kind(d, p, e);
        st[j] = p;
        en[j] = e;
        kind[j] = (unsigned char)k;
        if (k != K_INFO) {
            count[k]++;
            size[k] += e - p + 1;
        }
        if (k < K_OTHER && plains[k])
            plains[k] = plain(d, p, e);
        p = e + len;
    }
    Py_ssize_t most = 0;
    for (int k = 0; k < 3; k++) {
        rows[k] = PyBytes_FromStringAndSize(NULL, count[k] * 8);
        if (rows[k] == NULL)
            goto done;
        if (size[k] > most)
            most = size[k];
    }
    ostarts = PyBytes_FromStringAndSize(NULL, count[K_OTHER] * 8);
    buf = PyMem_Malloc((size_t)most + 1);
    if (ostarts == NULL || buf == NULL) {
        if (buf == NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (int k = 0; k < 3; k++) {
        int64_t *r = (int64_t *)PyBytes_AS_STRING(rows[k]);
        int64_t *os = (int64_t *)PyBytes_AS_STRING(ostarts);
        Py_ssize_t w = 0, c = 0;
        for (Py_ssize_t j = 0; j < lines; j++) {
            if (kind[j] != k)
                continue;
            if (c)
                buf[w++] = '\n';
            if (k == K_OTHER)
                os[c] = w;
            memcpy(buf + w, d + st[j], (size_t)(en[j] - st[j]));
            w += en[j] - st[j];
            r[c++] = j;
        }
        text[k] = text_from(&src, buf, w);
        if (text[k] == NULL)
            goto done;
    }
    if (src.utf8 && count[K_OTHER] && !PyUnicode_IS_ASCII(text[K_OTHER])) {
        /* where each other line starts in its decoded text (bytes and characters part ways) */
        int64_t *os = (int64_t *)PyBytes_AS_STRING(ostarts);
        Py_ssize_t tn = PyUnicode_GET_LENGTH(text[K_OTHER]), c = 1;
        int tk = PyUnicode_KIND(text[K_OTHER]);
        const void *td = PyUnicode_DATA(text[K_OTHER]);
        os[0] = 0;
        for (Py_ssize_t at = 0; at < tn; at++)
            if (PyUnicode_READ(tk, td, at) == '\n')
                os[c++] = at + 1;
    }
    out = Py_BuildValue("(OOOOOOOOOOO)", text[0], rows[0], plains[0] ? Py_True : Py_False, text[1], rows[1],
                        plains[1] ? Py_True : Py_False, text[2], rows[2], ostarts, starts, ends);
done:
    PyMem_Free(kind);
    PyMem_Free(buf);
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(ostarts);
    for (int k = 0; k < 3; k++) {
        Py_XDECREF(text[k]);
        Py_XDECREF(rows[k]);
    }
    if (src.view.obj != NULL)
        PyBuffer_Release(&src.view);
    return out;
}

/* [0-9]+ (dots: [0-9.]+) from *p, greedy; 0 where there is none. */
static int run(const Py_UCS1 *d, Py_ssize_t *p, Py_ssize_t e, int dots, Py_ssize_t *a, Py_ssize_t *b)
{
    Py_ssize_t q = *p;
    while (q < e && (is_digit(d[q]) || (dots && d[q] == '.')))
        q++;
    if (q == *p)
        return 0;
    *a = *p;
    *b = q;
    *p = q;
    return 1;
}

static int lit(const Py_UCS1 *d, Py_ssize_t *p, Py_ssize_t e, const char *s)
{
    Py_ssize_t n = (Py_ssize_t)strlen(s);
    if (!has(d, *p, e, s, n))
        return 0;
    *p += n;
    return 1;
}

/* _DECODE_SHAPE at p: where its match ends (0: no match), its seven number groups' spans (a == b:
 * the group did not take part) and the graph flag. Every group is followed by a literal its characters cannot start, and the
 * optional groups start with a letter no later literal starts with, so the first reading is the
 * regex's. */
static Py_ssize_t shape_at(const Py_UCS1 *d, Py_ssize_t p, Py_ssize_t e, Py_ssize_t *a, Py_ssize_t *b, int *graph)
{
    for (int g = 0; g < 7; g++)
        a[g] = b[g] = 0;
    if (!(lit(d, &p, e, "#running-req: ") && run(d, &p, e, 0, &a[0], &b[0])
          && lit(d, &p, e, ", #token: ") && run(d, &p, e, 0, &a[1], &b[1])
          && lit(d, &p, e, ", token usage: ") && run(d, &p, e, 1, &a[2], &b[2]) && lit(d, &p, e, ", ")))
        return 0;
    if (lit(d, &p, e, "accept len: ")) {
        if (!(run(d, &p, e, 1, &a[3], &b[3]) && lit(d, &p, e, ", ")))
            return 0;
        if (lit(d, &p, e, "accept rate: ") && !(run(d, &p, e, 1, &a[4], &b[4]) && lit(d, &p, e, ", ")))
            return 0;
    }
    if (!(lit(d, &p, e, "cuda") || lit(d, &p, e, "cpu") || lit(d, &p, e, "npu") || lit(d, &p, e, "musa")))
        return 0;
    if (!lit(d, &p, e, " graph: "))
        return 0;
    if (lit(d, &p, e, "True"))
        *graph = 1;
    else if (lit(d, &p, e, "False"))
        *graph = 0;
    else
        return 0;
    if (!(lit(d, &p, e, ", gen throughput (token/s): ") && run(d, &p, e, 1, &a[5], &b[5])
          && lit(d, &p, e, ", #queue-req: ") && run(d, &p, e, 0, &a[6], &b[6])))
        return 0;
    /* (?![\w.+-]) after the greedy digits (a shorter run is followed by a digit) */
    if (p < e && (is_word[d[p]] || d[p] == '.' || d[p] == '+' || d[p] == '-'))
        return 0;
    return p;
}

/* Whether [a, b) holds lit. */
static int holds(const Py_UCS1 *d, Py_ssize_t a, Py_ssize_t b, const char *lit)
{
    Py_ssize_t n = (Py_ssize_t)strlen(lit);
    for (Py_ssize_t q = a; q + n <= b; q++) {
        const Py_UCS1 *hit = memchr(d + q, lit[0], (size_t)(b - n + 1 - q));
        if (hit == NULL)
            return 0;
        q = hit - d;
        if (memcmp(d + q, lit, (size_t)n) == 0)
            return 1;
    }
    return 0;
}

/* The fields of hybrid pools and DSpark that the parser reads in their exact form (Columns._unusual).
 * None starts or ends in a way the shape's own text could, so a line holds one only in the text
 * before or after the shape's match. */
static const char *const unusual[] = {"#full token", "usage: full=", "block accept len"};

/* float() of a group's text; -1 where it is not a number float() reads (the caller says None). */
static int number(const Py_UCS1 *d, Py_ssize_t a, Py_ssize_t b, double *v)
{
    char s[64];
    if (b - a >= (Py_ssize_t)sizeof s)
        return -1;
    memcpy(s, d + a, (size_t)(b - a));
    s[b - a] = 0;
    *v = PyOS_string_to_double(s, NULL, NULL);
    if (*v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* decode_shape(text) -> (values, graph) | None: values the seven number columns, one after the
 * other (a float64 bytearray, NaN where an optional group is absent), graph a byte per line. None
 * also where a line holds a field the parser reads in its exact form (the text is unusual). */
static PyObject *decode_shape(PyObject *self, PyObject *arg)
{
    const Py_UCS1 *d;
    Py_ssize_t n;
    int ok = one_byte(arg, &d, &n);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    Py_ssize_t lines = 1;
    for (const Py_UCS1 *p = d; (p = memchr(p, '\n', (size_t)(d + n - p))) != NULL; p++)
        lines++;
    PyObject *values = PyByteArray_FromStringAndSize(NULL, lines * 7 * 8);
    PyObject *graph = PyBytes_FromStringAndSize(NULL, lines);
    if (values == NULL || graph == NULL)
        goto fail;
    double *v = (double *)PyByteArray_AS_STRING(values);
    char *gr = PyBytes_AS_STRING(graph);
    Py_ssize_t p = 0;
    for (Py_ssize_t i = 0; i < lines; i++) {
        const Py_UCS1 *nl = memchr(d + p, '\n', (size_t)(n - p));
        Py_ssize_t e = nl ? nl - d : n, a[7], b[7];
        int g = 0;
        Py_ssize_t at = p, end = 0;
        while (at < e) {                              /* findall: the first place it matches */
            const Py_UCS1 *hit = memchr(d + at, '#', (size_t)(e - at));
            if (hit == NULL)
                break;
            at = hit - d;
            if ((end = shape_at(d, at, e, a, b, &g)) != 0)
                break;
            at++;
        }
        if (!end)
            goto none;
        for (int u = 0; u < 3; u++)
            if (holds(d, p, at, unusual[u]) || holds(d, end, e, unusual[u]))
                goto none;
        for (int c = 0; c < 7; c++) {
            if (a[c] == b[c])
                v[c * lines + i] = Py_NAN;
            else if (number(d, a[c], b[c], &v[c * lines + i]) < 0)
                goto none;
        }
        gr[i] = (char)g;
        p = e + 1;
    }
    PyObject *out = PyTuple_Pack(2, values, graph);
    Py_DECREF(values);
    Py_DECREF(graph);
    return out;
none:
    Py_DECREF(values);
    Py_DECREF(graph);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(values);
    Py_XDECREF(graph);
    return NULL;
}

/* stamps(text) -> list[str] | None: each line's "[YYYY-MM-DD HH:MM:SS...]" text, or None where a
 * line does not start with one. */
static PyObject *stamps(PyObject *self, PyObject *arg)
{
    const Py_UCS1 *d;
    Py_ssize_t n;
    int ok = one_byte(arg, &d, &n);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    Py_ssize_t p = 0;
    for (;;) {
        const Py_UCS1 *nl = memchr(d + p, '\n', (size_t)(n - p));
        Py_ssize_t e = nl ? nl - d : n, q = p + 20;
        if (q > e || d[p] != '[')
            goto none;
        for (int j = 0; j < 19; j++) {
            Py_UCS1 c = d[p + 1 + j];
            if (shape[j] == 'd' ? !is_digit(c) : c != (Py_UCS1)shape[j])
                goto none;
        }
        while (q < e && d[q] != ']' && d[q] != '[')
            q++;
        if (q == e || d[q] != ']')
            goto none;
        PyObject *s = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, d + p + 1, q - p - 1);
        if (s == NULL || PyList_Append(out, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(s);
        if (nl == NULL)
            return out;
        p = e + 1;
    }
none:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* lines_with(text, literals) -> list[int] | None: the index of each line of text (lines joined by
 * newlines) that holds one of the literals (each two characters or more, none with a newline),
 * in order. Two characters at a time are looked up in a table of the literals' first two. */
static PyObject *lines_with(PyObject *self, PyObject *args)
{
    PyObject *arg, *lits;
    if (!PyArg_ParseTuple(args, "OO!", &arg, &PyTuple_Type, &lits))
        return NULL;
    const Py_UCS1 *d;
    Py_ssize_t n, nl = PyTuple_GET_SIZE(lits);
    int ok = one_byte(arg, &d, &n);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    enum { MOST = 64 };
    const Py_UCS1 *ld[MOST];
    Py_ssize_t ll[MOST];
    static uint64_t table[65536 / 64];
    if (nl > MOST)
        Py_RETURN_NONE;
    memset(table, 0, sizeof table);
    for (Py_ssize_t k = 0; k < nl; k++) {
        PyObject *lit = PyTuple_GET_ITEM(lits, k);
        if (!PyUnicode_Check(lit) || PyUnicode_KIND(lit) != PyUnicode_1BYTE_KIND || PyUnicode_GET_LENGTH(lit) < 2)
            Py_RETURN_NONE;
        ld[k] = PyUnicode_1BYTE_DATA(lit);
        ll[k] = PyUnicode_GET_LENGTH(lit);
        unsigned key = ld[k][0] | (unsigned)ld[k][1] << 8;
        table[key >> 6] |= (uint64_t)1 << (key & 63);
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t line = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if (d[i] == '\n') {
            line++;
            continue;
        }
        unsigned key = d[i] | (unsigned)d[i + 1] << 8;
        if (!(table[key >> 6] >> (key & 63) & 1))
            continue;
        int hit = 0;
        for (Py_ssize_t k = 0; k < nl && !hit; k++)
            hit = i + ll[k] <= n && memcmp(d + i, ld[k], (size_t)ll[k]) == 0;
        if (!hit)
            continue;
        PyObject *v = PyLong_FromSsize_t(line);
        if (v == NULL || PyList_Append(out, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
        const Py_UCS1 *next = memchr(d + i, '\n', (size_t)(n - i));      /* the line is in: on to the next */
        if (next == NULL)
            break;
        i = next - d;
        line++;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"sort", sort, METH_O, "Each line of text sorted by what follows its first \"] \"."},
    {"decode_shape", decode_shape, METH_O, "The common decode shape's number columns and graph flags."},
    {"stamps", stamps, METH_O, "Each line's leading stamp."},
    {"lines_with", lines_with, METH_VARARGS, "The lines that hold one of the literals."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_logscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__logscan(void)
{
    for (int c = 0; c < 256; c++)
        is_word[c] = (unsigned char)(Py_UNICODE_ISALNUM((Py_UCS4)c) || c == '_');
    return PyModule_Create(&module);
}
