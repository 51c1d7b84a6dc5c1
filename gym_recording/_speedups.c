/*
 * gym_recording._speedups: the recorded step in C, for the commonest layouts.
 *
 * StepRecorder(slow, on_flags, rewards) records steps for the step a TraceRecordingWrapper
 * installs: after the env's step, recorder.record(action, result) records it and returns
 * result. When result is a 5-tuple whose observation and action match the layout the
 * recording configured (a C-contiguous ndarray of the expected dtype and shape, and a scalar
 * of the expected type or such an array), it appends their bytes/values to the recording's
 * buffers itself. Anything else -- another layout, a legacy 4-tuple, a full buffer, no open
 * episode -- goes to slow(action, result), the recording's general Python path, before
 * anything is stored; so does every step until configure() is called with a layout.
 * (The env's step is called from Python, not from here: calling a Python function from C
 * enters the interpreter anew, which costs more per step than the Python frame that calls
 * both.)
 *
 * It stores exactly what the Python path stores: the same bytes in the same bytearrays, the
 * same objects in the same lists. tests/test_hot_path.py runs every layout both ways.
 *
 * write_files(directory, files, mode, published) writes files atomically (POSIX only): the
 * same protocol as the atomicwrites path of gym_recording._storage (temporary file, write,
 * fsync, rename, fsync of the directory), with the GIL released once for the whole call. On
 * the background writer thread each GIL release and retake can stall the thread stepping the
 * env; atomicwrites makes about fifteen per file, this one per batch. A batch's files go
 * together: all written and fsynced (on Linux their writeback started together, for one
 * journal commit), then renamed in order, the directory synced after those that ask for it.
 * start_write_files(directory, files, mode) runs the same on a POSIX thread of its own, which
 * never takes the GIL; the WriteTask it returns reports the result at wait(published).
 *
 * encode_spans(spans, parts, ...) writes a batch JSON of the common layout (every episode a
 * row range of three arrays): the per-episode loop of gym_recording._format.encode_columns,
 * the same bytes (tests/test_format_encode.py checks both ways).
 *
 * decode_plain(...) and plain_episode(...) are the reader's side: a batch of plain episodes
 * as the writer lays them out decoded at once, and their Episode objects built (see their
 * section; tests/test_reader_batch_c.py holds them to the Python path).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <string.h>

#ifndef _WIN32
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

typedef struct {
    PyObject *buf;          /* bytearray receiving the rows; NULL if not configured */
    PyArray_Descr *descr;   /* the expected dtype */
    int ndim;
    npy_intp shape[NPY_MAXDIMS];
    Py_ssize_t nbytes;      /* bytes per row */
} ArraySpec;

typedef struct {
    PyObject_HEAD
    PyObject *slow;
    PyObject *on_flags;
    PyObject *rewards;      /* list */
    Py_ssize_t room;        /* steps the buffer may hold; -1 while no episode is open */
    int fast;               /* a layout is configured */
    ArraySpec obs;
    PyObject *a_type;       /* scalar actions: their exact type ... */
    PyObject *a_list;       /* ... and the list they go to */
    ArraySpec act;          /* array actions */
} StepRecorder;

static void
spec_clear(ArraySpec *s)
{
    Py_CLEAR(s->buf);
    Py_CLEAR(s->descr);
    s->ndim = 0;
    s->nbytes = 0;
}

/* Whether v is an ndarray (exactly) of the spec's dtype and shape, C-contiguous. */
static inline int
array_matches(PyObject *v, const ArraySpec *s)
{
    if (Py_TYPE(v) != &PyArray_Type) {
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)v;
    if (PyArray_NDIM(a) != s->ndim || !PyArray_IS_C_CONTIGUOUS(a)) {
        return 0;
    }
    const npy_intp *dims = PyArray_DIMS(a);
    for (int i = 0; i < s->ndim; i++) {
        if (dims[i] != s->shape[i]) {
            return 0;
        }
    }
    PyArray_Descr *d = PyArray_DESCR(a);
    return d == s->descr || PyArray_EquivTypes(d, s->descr);
}

static inline int
append_row(PyObject *buf, const void *src, Py_ssize_t n)
{
    Py_ssize_t len = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, len + n) < 0) {
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(buf) + len, src, (size_t)n);
    return 0;
}

/* f(a, b), its result dropped: 0, or -1 with an exception. */
static inline int
call2(PyObject *f, PyObject *a, PyObject *b)
{
    PyObject *argv[2] = {a, b};
    PyObject *r = PyObject_Vectorcall(f, argv, 2, NULL);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* record(action, result): store the step (result is what env.step(action) returned), or hand
   it to slow; return the result (a new reference), or NULL with an exception. */
static PyObject *
recorder_record(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    StepRecorder *self = (StepRecorder *)op;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "record() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *action = args[0];
    PyObject *result = args[1];
    if (!self->fast || !PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 5 ||
        PyList_GET_SIZE(self->rewards) >= self->room) {
        goto slow;
    }
    PyObject *obs = PyTuple_GET_ITEM(result, 0);
    PyObject *reward = PyTuple_GET_ITEM(result, 1);
    PyObject *terminated = PyTuple_GET_ITEM(result, 2);
    PyObject *truncated = PyTuple_GET_ITEM(result, 3);
    /* Every check before anything is stored: a mismatch leaves the buffers as they were. */
    int scalar_action = self->a_list != NULL && (PyObject *)Py_TYPE(action) == self->a_type;
    if (!scalar_action && !(self->act.buf != NULL && array_matches(action, &self->act))) {
        goto slow;
    }
    if (!array_matches(obs, &self->obs)) {
        goto slow;
    }
    if (scalar_action) {
        if (PyList_Append(self->a_list, action) < 0) {
            return NULL;
        }
    }
    else if (append_row(self->act.buf, PyArray_DATA((PyArrayObject *)action),
                        self->act.nbytes) < 0) {
        return NULL;
    }
    if (append_row(self->obs.buf, PyArray_DATA((PyArrayObject *)obs), self->obs.nbytes) < 0 ||
        PyList_Append(self->rewards, reward) < 0) {
        return NULL;
    }
    if (terminated != Py_False || truncated != Py_False) {
        int t = PyObject_IsTrue(terminated);
        int u = t < 0 ? -1 : PyObject_IsTrue(truncated);
        if (u < 0) {
            return NULL;
        }
        if ((t || u) && call2(self->on_flags, terminated, truncated) < 0) {
            return NULL;
        }
    }
    Py_INCREF(result);
    return result;

slow:
    if (call2(self->slow, action, result) < 0) {
        return NULL;
    }
    Py_INCREF(result);
    return result;
}

static int
spec_set(ArraySpec *s, PyObject *buf, PyObject *dtype, PyObject *shape, const char *what)
{
    spec_clear(s);
    if (buf == Py_None) {
        return 0;
    }
    if (!PyByteArray_CheckExact(buf) || !PyArray_DescrCheck(dtype) || !PyTuple_Check(shape) ||
        PyTuple_GET_SIZE(shape) > NPY_MAXDIMS) {
        PyErr_Format(PyExc_TypeError,
                     "configure(): expected a bytearray, a numpy dtype and a shape tuple for %s",
                     what);
        return -1;
    }
    Py_ssize_t nbytes = (Py_ssize_t)PyDataType_ELSIZE((PyArray_Descr *)dtype);
    s->ndim = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < s->ndim; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (d < 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "configure(): negative dimension for %s", what);
            }
            s->ndim = 0;
            return -1;
        }
        s->shape[i] = (npy_intp)d;
        nbytes *= d;
    }
    if (nbytes <= 0) {
        PyErr_Format(PyExc_ValueError, "configure(): rows of %s must not be empty", what);
        s->ndim = 0;
        return -1;
    }
    s->nbytes = nbytes;
    Py_INCREF(buf);
    s->buf = buf;
    Py_INCREF(dtype);
    s->descr = (PyArray_Descr *)dtype;
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure(o_buf, o_dtype, o_shape, a_type, a_list, a_buf, a_dtype, a_shape)\n\n"
"Set the layout stepped in C: observations as rows of o_buf (a bytearray) of o_dtype and\n"
"o_shape; actions either of exact type a_type appended to a_list, or rows of a_buf. With\n"
"o_buf None, or neither kind of action, every step goes to slow.");

static PyObject *
recorder_configure(PyObject *op, PyObject *args)
{
    StepRecorder *self = (StepRecorder *)op;
    PyObject *o_buf, *o_dtype, *o_shape, *a_type, *a_list, *a_buf, *a_dtype, *a_shape;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:configure", &o_buf, &o_dtype, &o_shape, &a_type,
                          &a_list, &a_buf, &a_dtype, &a_shape)) {
        return NULL;
    }
    self->fast = 0;
    Py_CLEAR(self->a_type);
    Py_CLEAR(self->a_list);
    if (spec_set(&self->obs, o_buf, o_dtype, o_shape, "observations") < 0 ||
        spec_set(&self->act, a_buf, a_dtype, a_shape, "actions") < 0) {
        spec_clear(&self->obs);
        spec_clear(&self->act);
        return NULL;
    }
    if (a_list != Py_None) {
        if (!PyList_CheckExact(a_list) || !PyType_Check(a_type)) {
            PyErr_SetString(PyExc_TypeError, "configure(): expected a type and a list");
            spec_clear(&self->obs);
            spec_clear(&self->act);
            return NULL;
        }
        Py_INCREF(a_type);
        self->a_type = a_type;
        Py_INCREF(a_list);
        self->a_list = a_list;
    }
    self->fast = self->obs.buf != NULL && (self->a_list != NULL || self->act.buf != NULL);
    Py_RETURN_NONE;
}

static PyObject *
recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *slow, *on_flags, *rewards;
    static char *kwlist[] = {"slow", "on_flags", "rewards", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!:StepRecorder", kwlist, &slow, &on_flags,
                                     &PyList_Type, &rewards)) {
        return NULL;
    }
    StepRecorder *self = (StepRecorder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(slow);
    self->slow = slow;
    Py_INCREF(on_flags);
    self->on_flags = on_flags;
    Py_INCREF(rewards);
    self->rewards = rewards;
    self->room = -1;
    return (PyObject *)self;
}

static int
recorder_traverse(PyObject *op, visitproc visit, void *arg)
{
    StepRecorder *self = (StepRecorder *)op;
    Py_VISIT(self->slow);
    Py_VISIT(self->on_flags);
    Py_VISIT(self->rewards);
    Py_VISIT(self->obs.buf);
    Py_VISIT(self->obs.descr);
    Py_VISIT(self->a_type);
    Py_VISIT(self->a_list);
    Py_VISIT(self->act.buf);
    Py_VISIT(self->act.descr);
    return 0;
}

static int
recorder_clear(PyObject *op)
{
    StepRecorder *self = (StepRecorder *)op;
    self->fast = 0;
    Py_CLEAR(self->slow);
    Py_CLEAR(self->on_flags);
    Py_CLEAR(self->rewards);
    spec_clear(&self->obs);
    Py_CLEAR(self->a_type);
    Py_CLEAR(self->a_list);
    spec_clear(&self->act);
    return 0;
}

static void
recorder_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    recorder_clear(op);
    Py_TYPE(op)->tp_free(op);
}

PyDoc_STRVAR(record_doc,
"record(action, result)\n\n"
"Record the step that env.step(action) returned result for, or hand it to slow; return\n"
"result.");

static PyMethodDef recorder_methods[] = {
    {"record", (PyCFunction)(void (*)(void))recorder_record, METH_FASTCALL, record_doc},
    {"configure", recorder_configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef recorder_members[] = {
    {"room", T_PYSSIZET, offsetof(StepRecorder, room), 0,
     "Steps the buffer may hold before the general path must run; -1 without an episode."},
    {"fast", T_INT, offsetof(StepRecorder, fast), READONLY, "Whether a layout is configured."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(recorder_doc,
"StepRecorder(slow, on_flags, rewards)\n\n"
"Records steps in the layout configure() sets; see record().");

static PyTypeObject StepRecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gym_recording._speedups.StepRecorder",
    .tp_basicsize = sizeof(StepRecorder),
    .tp_dealloc = recorder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = recorder_doc,
    .tp_traverse = recorder_traverse,
    .tp_clear = recorder_clear,
    .tp_methods = recorder_methods,
    .tp_members = recorder_members,
    .tp_new = recorder_new,
};

/* ------------------------------------------------------------------ encode_spans */

/* A growing byte buffer for encode_spans. */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int
out_grow(Out *o, Py_ssize_t n)
{
    if (o->len + n <= o->cap) {
        return 0;
    }
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(o->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static inline int
out_put(Out *o, const char *s, Py_ssize_t n)
{
    if (out_grow(o, n) < 0) {
        return -1;
    }
    memcpy(o->p + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static inline int
out_ll(Out *o, long long v)
{
    char s[24];
    char *e = s + sizeof s, *p = e;
    /* Digits from the right; the magnitude as unsigned, so that LLONG_MIN works too. */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    return out_put(o, p, e - p);
}

/* str(obj) for an int (any size), as %d and str() print it. */
static int
out_int_obj(Out *o, PyObject *v)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (!overflow) {
        return out_ll(o, x);
    }
    PyObject *s = PyObject_Str(v);
    if (s == NULL) {
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    int r = u == NULL ? -1 : out_put(o, u, n);
    Py_DECREF(s);
    return r;
}

/* repr(float(v)), as _format._json_float writes a time. */
static int
out_float_obj(Out *o, PyObject *v)
{
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    /* The recording's times are whole microseconds (the double nearest to one): between
     * 1e-4 (below, repr writes an exponent) and 2**32 (below, doubles are closer than 1 us
     * apart), repr(d) is then the microseconds' decimal without its trailing zeros -- any
     * shorter decimal is another microsecond, hence another double -- written here without
     * the general shortest-digits search. tests/test_format_encode.py compares with repr. */
    if (d >= 1e-4 && d < 4294967296.0) {
        double us = nearbyint(d * 1e6);
        if (us / 1e6 == d) {
            long long u = (long long)us;
            char s[32];
            char *e = s + sizeof s, *p = e;
            long long frac = u % 1000000, whole = u / 1000000;
            int digits = 6;
            while (digits > 1 && frac % 10 == 0) {  /* trailing zeros, but keep one digit */
                frac /= 10;
                digits--;
            }
            for (int i = 0; i < digits; i++) {
                *--p = (char)('0' + frac % 10);
                frac /= 10;
            }
            *--p = '.';
            do {
                *--p = (char)('0' + whole % 10);
                whole /= 10;
            } while (whole);
            return out_put(o, p, e - p);
        }
    }
    char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) {
        return -1;
    }
    int r = out_put(o, s, (Py_ssize_t)strlen(s));
    PyMem_Free(s);
    return r;
}

enum {
    S_OBS_START, S_OBS_STOP, S_ACT_START, S_ACT_STOP, S_TERMINATED, S_TRUNCATED, S_SEED,
    S_STARTED_AT, S_ENDED_AT, S_PART, S_CONTINUES, S_COUNT
};
static const char *span_attr_names[S_COUNT] = {
    "obs_start", "obs_stop", "act_start", "act_stop", "terminated", "truncated", "seed",
    "started_at", "ended_at", "part", "continues",
};
static PyObject *span_attrs[S_COUNT];

/* Where a span type keeps its attributes: the offsets of its slots (EpisodeSpan is a dataclass
   with slots), or type NULL to read them with getattr. Taken once per encode_spans call. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[S_COUNT];
} SpanSlots;

static void
span_slots_of(PyTypeObject *type, SpanSlots *slots)
{
    slots->type = NULL;
    for (int k = 0; k < S_COUNT; k++) {
        /* The class attribute: for a slot, its member descriptor. */
        PyObject *d = PyObject_GetAttr((PyObject *)type, span_attrs[k]);
        if (d == NULL) {
            PyErr_Clear();  /* then getattr on each span raises the error */
            return;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type);
        if (ok) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            ok = m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED);
            slots->off[k] = m->offset;
        }
        Py_DECREF(d);
        if (!ok) {
            return;
        }
    }
    slots->type = type;
}

/* The span's attributes as new references in v[0..S_COUNT-1]: 0, or -1 with an exception
   (and none held). */
static int
span_values(PyObject *span, const SpanSlots *slots, PyObject **v)
{
    for (int k = 0; k < S_COUNT; k++) {
        PyObject *x = NULL;
        if (Py_TYPE(span) == slots->type) {
            x = *(PyObject **)((char *)span + slots->off[k]);
            Py_XINCREF(x);
        }
        if (x == NULL) {  /* another type, or an unset slot (getattr raises its error) */
            x = PyObject_GetAttr(span, span_attrs[k]);
        }
        if (x == NULL) {
            for (int j = 0; j < k; j++) {
                Py_DECREF(v[j]);
            }
            return -1;
        }
        v[k] = x;
    }
    return 0;
}

/* A span's int attribute as a C long long (the row numbers of a batch: small). */
static int
span_ll(PyObject *v, long long *x)
{
    *x = PyLong_AsLongLong(v);
    return *x == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The number of constant pieces of an episode object's JSON (see encode_spans). */
#define N_PARTS 13

static int
encode_span(Out *o, PyObject *span, const SpanSlots *slots, const char *const *part,
            const Py_ssize_t *plen, const long long *base)
{
    PyObject *v[S_COUNT];
    if (span_values(span, slots, v) < 0) {
        return -1;
    }
    int r = -1;
    long long obs_start, obs_stop, act_start, act_stop, n_part;
    if (span_ll(v[S_OBS_START], &obs_start) < 0 || span_ll(v[S_OBS_STOP], &obs_stop) < 0 ||
        span_ll(v[S_ACT_START], &act_start) < 0 || span_ll(v[S_ACT_STOP], &act_stop) < 0 ||
        span_ll(v[S_PART], &n_part) < 0) {
        goto done;
    }
    const long long a_base = base[0], a_row = base[1], o_base = base[2], o_row = base[3],
                    r_base = base[4];
    const long long n_act = act_stop - act_start, n_obs = obs_stop - obs_start;
    /* The numbers between the pieces, in order (the flags, seed and times follow). */
    const long long nums[9] = {
        n_act, a_base + act_start * a_row, n_act * a_row,
        n_obs, o_base + obs_start * o_row, n_obs * o_row,
        n_act, r_base + act_start * 8, n_act * 8,
    };
    for (int i = 0; i < 9; i++) {
        if (out_put(o, part[i], plen[i]) < 0 || out_ll(o, nums[i]) < 0) {
            goto done;
        }
    }
    int terminated = PyObject_IsTrue(v[S_TERMINATED]);
    int truncated = PyObject_IsTrue(v[S_TRUNCATED]);
    int continues = PyObject_IsTrue(v[S_CONTINUES]);
    if (terminated < 0 || truncated < 0 || continues < 0) {
        goto done;
    }
    if (out_put(o, part[9], plen[9]) < 0 ||
        out_put(o, terminated ? "true" : "false", terminated ? 4 : 5) < 0 ||
        out_put(o, part[10], plen[10]) < 0 ||
        out_put(o, truncated ? "true" : "false", truncated ? 4 : 5) < 0 ||
        out_put(o, part[11], plen[11]) < 0) {
        goto done;
    }
    if (v[S_SEED] == Py_None) {
        if (out_put(o, "null", 4) < 0) {
            goto done;
        }
    }
    else {
        PyObject *seed = PyNumber_Index(v[S_SEED]);  /* int(seed), as the Python encoder */
        if (seed == NULL) {
            goto done;
        }
        int e = out_int_obj(o, seed);
        Py_DECREF(seed);
        if (e < 0) {
            goto done;
        }
    }
    if (out_put(o, part[12], plen[12]) < 0) {
        goto done;
    }
    if (v[S_STARTED_AT] != Py_None &&
        (out_put(o, ",\"started_at\":", 14) < 0 || out_float_obj(o, v[S_STARTED_AT]) < 0)) {
        goto done;
    }
    if (v[S_ENDED_AT] != Py_None &&
        (out_put(o, ",\"ended_at\":", 12) < 0 || out_float_obj(o, v[S_ENDED_AT]) < 0)) {
        goto done;
    }
    if (n_part && (out_put(o, ",\"part\":", 8) < 0 || out_ll(o, n_part) < 0)) {
        goto done;
    }
    if (continues && out_put(o, ",\"continues\":true", 17) < 0) {
        goto done;
    }
    r = out_put(o, "}", 1);
done:
    for (int k = 0; k < S_COUNT; k++) {
        Py_DECREF(v[k]);
    }
    return r;
}

PyDoc_STRVAR(encode_spans_doc,
"encode_spans(spans, parts, a_base, a_row, o_base, o_row, r_base, /)\n\n"
"The batch JSON of episodes that are row ranges of three arrays (actions, observations,\n"
"rewards; see gym_recording._format.encode_columns, which this does in C): b'{\"episodes\":['\n"
"and, for each EpisodeSpan, the 13 bytes pieces of parts with its numbers between them, its\n"
"flags, seed and times, ']}'.");

static PyObject *
encode_spans(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *spans, *parts;
    long long base[5];
    if (!PyArg_ParseTuple(args, "O!O!LLLLL:encode_spans", &PyList_Type, &spans, &PyTuple_Type,
                          &parts, &base[0], &base[1], &base[2], &base[3], &base[4])) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(parts) != N_PARTS) {
        PyErr_Format(PyExc_ValueError, "encode_spans(): expected %d parts, got %zd", N_PARTS,
                     PyTuple_GET_SIZE(parts));
        return NULL;
    }
    const char *part[N_PARTS];
    Py_ssize_t plen[N_PARTS];
    for (int i = 0; i < N_PARTS; i++) {
        PyObject *p = PyTuple_GET_ITEM(parts, i);
        if (!PyBytes_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "encode_spans(): expected parts to be bytes");
            return NULL;
        }
        part[i] = PyBytes_AS_STRING(p);
        plen[i] = PyBytes_GET_SIZE(p);
    }
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    if (out_put(&o, "{\"episodes\":[", 13) < 0) {
        goto done;
    }
    SpanSlots slots = {NULL, {0}};
    if (PyList_GET_SIZE(spans)) {
        span_slots_of(Py_TYPE(PyList_GET_ITEM(spans, 0)), &slots);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans); i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        Py_INCREF(span);
        int e = (i && out_put(&o, ",", 1) < 0) ||
                encode_span(&o, span, &slots, part, plen, base) < 0;
        Py_DECREF(span);
        if (e) {
            goto done;
        }
    }
    if (out_put(&o, "]}", 2) < 0) {
        goto done;
    }
    result = PyBytes_FromStringAndSize(o.p, o.len);
done:
    PyMem_Free(o.p);
    return result;
}

/* ------------------------------------------------------------------ pack_list */

PyDoc_STRVAR(pack_list_doc,
"pack_list(values, stop, kind, /) -> bytearray | None\n\n"
"values[:stop] as raw native bytes: kind 'd' if every one is an exact float (C doubles),\n"
"kind 'q' if every one is an exact int within int64 (a bool is not). None otherwise (the\n"
"caller converts with NumPy, which gives the same values for these). The recording's\n"
"rewards and Discrete actions are lists of Python numbers; this stacks them ~10x faster.");

static PyObject *
pack_list(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values;
    Py_ssize_t stop;
    int kind;
    if (!PyArg_ParseTuple(args, "O!nC:pack_list", &PyList_Type, &values, &stop, &kind)) {
        return NULL;
    }
    if (kind != 'd' && kind != 'q') {
        PyErr_SetString(PyExc_ValueError, "pack_list(): expected kind 'd' or 'q'");
        return NULL;
    }
    if (stop < 0 || stop > PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_IndexError, "pack_list(): stop out of range");
        return NULL;
    }
    if (stop > PY_SSIZE_T_MAX / 8) {
        return PyErr_NoMemory();
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, stop * 8);
    if (out == NULL) {
        return NULL;
    }
    char *p = PyByteArray_AS_STRING(out);
    /* No Python code runs in the loop: the list cannot change under it. */
    for (Py_ssize_t i = 0; i < stop; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (kind == 'd') {
            if (!PyFloat_CheckExact(v)) {
                goto decline;
            }
            double d = PyFloat_AS_DOUBLE(v);
            memcpy(p + 8 * i, &d, 8);
        }
        else {
            if (!PyLong_CheckExact(v)) {
                goto decline;
            }
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow) {
                goto decline;
            }
            int64_t q = (int64_t)x;
            memcpy(p + 8 * i, &q, 8);
        }
    }
    return out;
decline:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

#ifndef _WIN32
/* ------------------------------------------------------------------ write_files */

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

typedef struct {
    const char *tmp;        /* the temporary name, in the directory */
    const char *name;       /* the final name */
    struct iovec *iov;      /* the file's bytes */
    int n;
    int sync_dir;           /* fsync the directory after this file's rename */
    int fd;
} GroupFile;

/* Write the iovecs to fd whole: 0, or an errno. */
static int
writev_all(int fd, struct iovec *iov, int n, Py_ssize_t *written)
{
    int i = 0;
    while (i < n) {
        int group = n - i < IOV_MAX ? n - i : IOV_MAX;
        ssize_t w = writev(fd, iov + i, group);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (w == 0) {  /* the group's chunks were all empty, or no progress (an error) */
            int end = i + group;
            while (i < end && iov[i].iov_len == 0) {
                i++;
            }
            if (i < end) {
                return EIO;
            }
            continue;
        }
        *written += w;
        /* skip what was written; a short write leaves the rest of an iovec */
        while (i < n && (size_t)w >= iov[i].iov_len) {
            w -= (ssize_t)iov[i].iov_len;
            i++;
        }
        if (i < n && w > 0) {
            iov[i].iov_base = (char *)iov[i].iov_base + w;
            iov[i].iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Bytes per window of a streamed file (write_file). Measured on this project's 2-core VM with
 * 600 MB of 5 MB files: 1 MiB windows were no faster than none, 2 MiB ones 1.2x-1.4x faster. */
#define STREAM_WINDOW ((size_t)2 << 20)
#define STREAM_IOV 64

/* Write the iovecs to a new file fd whole: 0, or an errno. A file of two windows or more is
 * streamed: written a window at a time, the writeback of each window started as soon as it is
 * written (sync_file_range), so that the disk writes one window while the next is copied into
 * the page cache, and the fsync that follows waits for the last window only. Only a hint:
 * the file is fsynced as any other. */
static int
write_file(int fd, struct iovec *iov, int n, Py_ssize_t *written)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        total += iov[i].iov_len;
    }
    if (total >= 2 * STREAM_WINDOW) {
        struct iovec win[STREAM_IOV];
        int i = 0;
        size_t used = 0;  /* bytes of iov[i] already in earlier windows */
        off_t pos = 0;    /* the window's offset in the (new, empty) file */
        while (i < n) {
            int k = 0;
            size_t len = 0;
            while (i < n && k < STREAM_IOV && len < STREAM_WINDOW) {
                size_t take = iov[i].iov_len - used;
                if (take > STREAM_WINDOW - len) {
                    take = STREAM_WINDOW - len;
                }
                win[k].iov_base = (char *)iov[i].iov_base + used;
                win[k].iov_len = take;
                k++;
                len += take;
                used += take;
                if (used == iov[i].iov_len) {
                    i++;
                    used = 0;
                }
            }
            int err = writev_all(fd, win, k, written);
            if (err) {
                return err;
            }
            (void)sync_file_range(fd, pos, (off_t)len, SYNC_FILE_RANGE_WRITE);
            pos += (off_t)len;
        }
        return 0;
    }
#endif
    return writev_all(fd, iov, n, written);
}

/* The whole protocol for files f[0..nf), without the GIL: every temporary file created and
 * written, every one fsynced, then each renamed in order, the directory fsynced after those
 * that ask for it. Returns 0, or an errno with *failed_at the file the failing call was about
 * and *failed what: 't' its temporary file, 'n' its final name, 'd' the directory, 's' the
 * directory's fsync after the file was renamed (it is visible, but not durable).
 * *published counts the files renamed (and synced, where asked) before any failure; the
 * temporary files of the others are removed. */
static int
write_group_nogil(const char *dir, GroupFile *f, int nf, mode_t mode, int *published,
                  int *failed_at, char *failed, Py_ssize_t *written)
{
    int err = 0, opened = 0, renamed = 0, i;
    *published = 0;
    *failed_at = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        *failed = 'd';
        return errno;
    }
    for (i = 0; i < nf; i++) {
        *failed_at = i;
        f[i].fd = openat(dfd, f[i].tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                         mode);
        if (f[i].fd < 0) {
            *failed = 't';
            err = errno;
            goto fail;
        }
        opened = i + 1;
        *failed = 'n';  /* from here on, failures are about the file being written */
        if ((err = write_file(f[i].fd, f[i].iov, f[i].n, written)) != 0) {
            goto fail;
        }
    }
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    /* Start every file's writeback before the first fsync: their blocks are then allocated
     * in one journal transaction, which that fsync commits, instead of one commit per file.
     * Only a hint: each file is still fsynced below. */
    if (nf > 1) {
        for (i = nf - 1; i >= 0; i--) {
            (void)sync_file_range(f[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        }
    }
#endif
    for (i = 0; i < nf; i++) {
        *failed_at = i;
        *failed = 'n';
        if (fsync(f[i].fd) < 0) {
            err = errno;
            goto fail;
        }
        int fd = f[i].fd;
        f[i].fd = -1;
        if (close(fd) < 0) {
            err = errno;
            goto fail;
        }
    }
    for (i = 0; i < nf; i++) {
        *failed_at = i;
        if (renameat(dfd, f[i].tmp, dfd, f[i].name) < 0) {
            *failed = 'n';
            err = errno;
            goto fail;
        }
        renamed = i + 1;
        if (f[i].sync_dir && fsync(dfd) < 0) {  /* the renames so far are durable */
            *failed = 's';
            err = errno;
            goto fail;
        }
        *published = i + 1;
    }
    if (close(dfd) < 0) {
        *failed_at = nf - 1;
        *failed = 'd';
        return errno;
    }
    return 0;

fail:
    /* nothing more is published: remove the temporary files not renamed (best effort) */
    for (i = renamed; i < opened; i++) {
        if (f[i].fd >= 0) {
            close(f[i].fd);
        }
        unlinkat(dfd, f[i].tmp, 0);
    }
    close(dfd);
    return err;
}

/* The bytes of one file (a sequence of buffers) as iovecs into iov, their views kept in bufs
 * (*got of them: the caller releases them). 0, or -1 with an exception. */
static int
gather_chunks(PyObject *chunks, Py_buffer **bufs, struct iovec **iov, int *n, Py_ssize_t *got)
{
    PyObject *seq = PySequence_Fast(chunks, "chunks must be a sequence of buffers");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "write_files: too many chunks");
        Py_DECREF(seq);
        return -1;
    }
    *bufs = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Py_buffer));
    *iov = PyMem_Calloc(k ? (size_t)k : 1, sizeof(struct iovec));
    if (*bufs == NULL || *iov == NULL) {
        PyErr_NoMemory();
        Py_DECREF(seq);
        return -1;
    }
    for (*got = 0; *got < k; (*got)++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, *got), &(*bufs)[*got],
                               PyBUF_SIMPLE) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        (*iov)[*got].iov_base = (*bufs)[*got].buf;
        (*iov)[*got].iov_len = (size_t)(*bufs)[*got].len;
    }
    *n = (int)k;
    Py_DECREF(seq);
    return 0;
}

/* A group of files to write (what write_files and start_write_files parse and gather), and
 * what writing it returned. Owned by one write_files call, or by a WriteTask. */
typedef struct {
    PyObject *dir;          /* bytes */
    PyObject **tmps;        /* bytes, nf of them */
    PyObject **names;       /* bytes */
    GroupFile *f;
    Py_buffer **bufs;       /* each file's chunks' views, got[i] of them */
    Py_ssize_t *got;
    int nf;
    int mode;
    /* the result of group_run */
    int err, n_published, failed_at;
    char failed;
    Py_ssize_t written;
} Group;

/* Release everything g holds (with the GIL); safe to call twice. */
static void
group_clear(Group *g)
{
    for (int i = 0; i < g->nf; i++) {
        if (g->bufs != NULL && g->got != NULL) {
            for (Py_ssize_t j = 0; j < g->got[i]; j++) {
                PyBuffer_Release(&g->bufs[i][j]);
            }
            PyMem_Free(g->bufs[i]);
        }
        if (g->f != NULL) {
            PyMem_Free(g->f[i].iov);
        }
        if (g->tmps != NULL) {
            Py_XDECREF(g->tmps[i]);
        }
        if (g->names != NULL) {
            Py_XDECREF(g->names[i]);
        }
    }
    PyMem_Free(g->f);
    PyMem_Free(g->bufs);
    PyMem_Free(g->got);
    PyMem_Free(g->tmps);
    PyMem_Free(g->names);
    Py_CLEAR(g->dir);
    g->f = NULL;
    g->bufs = NULL;
    g->got = NULL;
    g->tmps = NULL;
    g->names = NULL;
    g->nf = 0;
}

/* Parse write_files' arguments into g (zeroed): 0, or -1 with an exception (then
 * group_clear). */
static int
group_parse(Group *g, PyObject *dir, PyObject *files, int mode, const char *fname)
{
    int result = -1;
    if (!PyUnicode_FSConverter(dir, &g->dir)) {
        return -1;
    }
    PyObject *seq = PySequence_Fast(files, "files must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(seq);
    if (nf < 1 || nf > 64) {
        PyErr_Format(PyExc_ValueError, "%s: expected 1 to 64 files, got %zd", fname, nf);
        goto done;
    }
    g->tmps = PyMem_Calloc((size_t)nf, sizeof(PyObject *));
    g->names = PyMem_Calloc((size_t)nf, sizeof(PyObject *));
    g->f = PyMem_Calloc((size_t)nf, sizeof(GroupFile));
    g->bufs = PyMem_Calloc((size_t)nf, sizeof(Py_buffer *));
    g->got = PyMem_Calloc((size_t)nf, sizeof(Py_ssize_t));
    if (g->tmps == NULL || g->names == NULL || g->f == NULL || g->bufs == NULL ||
        g->got == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    g->nf = (int)nf;
    g->mode = mode;
    for (int i = 0; i < g->nf; i++) {
        PyObject *chunks;
        int sync_dir;
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyErr_Format(PyExc_TypeError,
                         "%s: each file is (tmp_name, name, chunks, sync_dir), got %.100s",
                         fname, Py_TYPE(item)->tp_name);
            goto done;
        }
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(item, 0), &g->tmps[i]) ||
            !PyUnicode_FSConverter(PyTuple_GET_ITEM(item, 1), &g->names[i])) {
            goto done;
        }
        chunks = PyTuple_GET_ITEM(item, 2);
        if ((sync_dir = PyObject_IsTrue(PyTuple_GET_ITEM(item, 3))) < 0) {
            goto done;
        }
        g->f[i].tmp = PyBytes_AS_STRING(g->tmps[i]);
        g->f[i].name = PyBytes_AS_STRING(g->names[i]);
        g->f[i].sync_dir = sync_dir;
        g->f[i].fd = -1;
        if (gather_chunks(chunks, &g->bufs[i], &g->f[i].iov, &g->f[i].n, &g->got[i]) < 0) {
            goto done;
        }
    }
    result = 0;

done:
    Py_DECREF(seq);
    return result;
}

/* Write the group, without the GIL (any thread). */
static void
group_run(Group *g)
{
    g->written = 0;
    g->err = write_group_nogil(PyBytes_AS_STRING(g->dir), g->f, g->nf, (mode_t)g->mode,
                               &g->n_published, &g->failed_at, &g->failed, &g->written);
}

/* After group_run, with the GIL: append the names published to the list `published`, and
 * return the bytes written, or NULL with an OSError naming what failed. */
static PyObject *
group_result(Group *g, PyObject *published)
{
    for (int i = 0; i < g->n_published; i++) {
        PyObject *s = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(g->names[i]),
                                                       PyBytes_GET_SIZE(g->names[i]));
        if (s == NULL || PyList_Append(published, s) < 0) {
            Py_XDECREF(s);
            return NULL;
        }
        Py_DECREF(s);
    }
    if (g->err) {
        /* filename: what the failing call was about; for the directory's fsync after a rename,
           the directory, and filename2 the file renamed. */
        char failed = g->failed;
        PyObject *about = failed == 't'                   ? g->tmps[g->failed_at]
                          : failed == 'd' || failed == 's' ? g->dir
                                                           : g->names[g->failed_at];
        PyObject *name = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(about),
                                                          PyBytes_GET_SIZE(about));
        PyObject *name2 = failed != 's' || name == NULL
                              ? NULL
                              : PyUnicode_DecodeFSDefaultAndSize(
                                    PyBytes_AS_STRING(g->names[g->failed_at]),
                                    PyBytes_GET_SIZE(g->names[g->failed_at]));
        if (name != NULL && (failed != 's' || name2 != NULL)) {
            errno = g->err;
            PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, name, name2);
        }
        Py_XDECREF(name);
        Py_XDECREF(name2);
        return NULL;
    }
    return PyLong_FromSsize_t(g->written);
}

PyDoc_STRVAR(write_files_doc,
"write_files(directory, files, mode, published) -> int\n\n"
"Write several files atomically and publish them in order, with the GIL released once.\n"
"``files`` is a sequence of ``(tmp_name, name, chunks, sync_dir)``. Every temporary file is\n"
"created (O_EXCL, permission bits ``mode``) and written (a file of 4 MiB or more streamed,\n"
"its writeback started every 2 MiB), then every one fsynced (on Linux their writeback is\n"
"started together first, so that one journal commit covers them), then each renamed to its\n"
"name in order, the directory fsynced after each whose ``sync_dir`` is true. Appends to the\n"
"list ``published`` each name renamed (and synced, where asked) before any failure; the\n"
"temporary files of the others are removed. Returns the number of bytes written. Raises\n"
"OSError naming what failed: its temporary file when that could not be created, the\n"
"directory when it could not be opened or synced, else the file's name.");

static PyObject *
write_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *dir, *files, *published, *result = NULL;
    int mode;
    Group g;
    memset(&g, 0, sizeof(g));
    if (!PyArg_ParseTuple(args, "OOiO!:write_files", &dir, &files, &mode, &PyList_Type,
                          &published)) {
        return NULL;
    }
    if (group_parse(&g, dir, files, mode, "write_files") == 0) {
        Py_BEGIN_ALLOW_THREADS
        group_run(&g);
        Py_END_ALLOW_THREADS
        result = group_result(&g, published);
    }
    group_clear(&g);
    return result;
}

/* ------------------------------------------------------------------ WriteTask
 *
 * start_write_files(directory, files, mode) -> WriteTask: write_files on a thread of its own
 * (a POSIX thread, not a Python one). It never takes the GIL, so it costs the thread stepping
 * the env nothing: no GIL handoff to start it (a Python thread needs the GIL to run up to its
 * first blocking call, which the stepping thread may hold for up to the interpreter's switch
 * interval), none when it ends. task.wait(published) joins it and returns what write_files
 * would have returned (or raises what it would have raised). Until then the task holds the
 * chunks' buffers. Signals are blocked in the thread, so they go to the interpreter's threads.
 */

typedef struct {
    PyObject_HEAD
    Group g;
    pthread_t thread;
    pid_t owner;            /* the process that started the thread */
    int running;            /* the thread was started and not joined */
    int waited;             /* wait() returned or raised: the group is released */
} WriteTask;

static void *
write_task_main(void *arg)
{
    group_run(&((WriteTask *)arg)->g);
    return NULL;
}

/* Join the thread: 0, or -1 in a process forked while it ran (the thread is not in this
 * process: the write goes on in the parent, and nothing of it can be waited for here). */
static int
write_task_join(WriteTask *self)
{
    if (self->running) {
        if (getpid() != self->owner) {
            return -1;
        }
        Py_BEGIN_ALLOW_THREADS
        (void)pthread_join(self->thread, NULL);
        Py_END_ALLOW_THREADS
        self->running = 0;
    }
    return 0;
}

static void
write_task_dealloc(WriteTask *self)
{
    (void)write_task_join(self);  /* the thread reads the buffers: they outlive it */
    group_clear(&self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(write_task_wait_doc,
"wait(published) -> int\n\n"
"Wait for the write to end; then as write_files: append the names published to the list\n"
"``published`` and return the bytes written, or raise its OSError. Once only.");

static PyObject *
write_task_wait(WriteTask *self, PyObject *published)
{
    if (!PyList_Check(published)) {
        PyErr_Format(PyExc_TypeError, "wait: published must be a list, got %.100s",
                     Py_TYPE(published)->tp_name);
        return NULL;
    }
    if (self->waited) {
        PyErr_SetString(PyExc_ValueError, "wait: this write was waited for already");
        return NULL;
    }
    if (write_task_join(self) < 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "wait: this write runs in process %ld, which this one was forked from; "
                     "a forked process cannot wait for it (record in the child with a "
                     "TraceRecording of its own)", (long)self->owner);
        return NULL;
    }
    self->waited = 1;
    PyObject *result = group_result(&self->g, published);
    group_clear(&self->g);
    return result;
}

static PyMethodDef write_task_methods[] = {
    {"wait", (PyCFunction)write_task_wait, METH_O, write_task_wait_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WriteTaskType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gym_recording._speedups.WriteTask",
    .tp_doc = "A write_files call running on a thread of its own (see start_write_files).",
    .tp_basicsize = sizeof(WriteTask),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)write_task_dealloc,
    .tp_methods = write_task_methods,
};

PyDoc_STRVAR(start_write_files_doc,
"start_write_files(directory, files, mode) -> WriteTask\n\n"
"write_files(directory, files, mode, ...) started on a thread of its own, which never takes\n"
"the GIL; ``task.wait(published)`` ends it as write_files would have. If no thread can be\n"
"started, the write is done here (without the GIL) and wait() only reports it.");

static PyObject *
start_write_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *dir, *files;
    int mode;
    if (!PyArg_ParseTuple(args, "OOi:start_write_files", &dir, &files, &mode)) {
        return NULL;
    }
    WriteTask *self = PyObject_New(WriteTask, &WriteTaskType);
    if (self == NULL) {
        return NULL;
    }
    memset(&self->g, 0, sizeof(self->g));
    self->owner = getpid();
    self->running = 0;
    self->waited = 0;
    if (group_parse(&self->g, dir, files, mode, "start_write_files") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    sigset_t all, old;
    sigfillset(&all);
    int blocked = pthread_sigmask(SIG_BLOCK, &all, &old) == 0;
    int started = pthread_create(&self->thread, NULL, write_task_main, self) == 0;
    if (blocked) {
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (started) {
        self->running = 1;
        /* Let the new thread run now. Left to the scheduler, it was measured to wait ~0.6 ms
         * on average (per batch of 6 MB of frames, 13% of its write) for the CPU the thread
         * stepping the env keeps; with this, it starts before that thread goes on. */
        (void)sched_yield();
    } else {
        Py_BEGIN_ALLOW_THREADS
        group_run(&self->g);
        Py_END_ALLOW_THREADS
    }
    return (PyObject *)self;
}
#endif /* !_WIN32 */

/* ------------------------------------------------------------------ decode_plain
 *
 * decode_plain(objs, dtypes, opened, open_blob, last_continues) is the reader's batch-level
 * fast path (gym_recording._format.decode_batch_plain) for the batches the writer writes:
 * every episode object plain and, per key (observations, actions, rewards), one dtype, one
 * blob, the same dimensions after the first, and the arrays one after the other in the blob.
 * For such a batch it returns what the Python path returns, as (episodes, steps): the same
 * tuples, of read-only views sliced from one view of the blob (the same dtype, shape, strides,
 * flags and base). For anything else -- a value of another type, an int beyond 64 bits, an
 * array out of place, another key, an episode continuing into the next batch -- it returns
 * None and the Python path decides. Before a blob is opened the checks the Python path makes
 * first are made, so it opens no blob that the Python path would not open. It raises only
 * what opening a blob raises: never because of what the JSON holds.
 */

#define PLAIN_MAX_NDIM 32 /* gym_recording._format.MAX_NDIM */

/* The keys and strings looked up (interned at import). */
static PyObject *s_observations, *s_actions, *s_rewards, *s_terminated, *s_truncated, *s_seed,
    *s_options, *s_started_at, *s_ended_at, *s_type, *s_order, *s_dtype, *s_npyfile, *s_npyoff,
    *s_size, *s_shape, *s_ndarray, *s_C, *s_index;

/* The keys of an episode object, and of an ndarray reference, that decode_plain reads. */
enum { E_OBS, E_ACT, E_REW, E_TERM, E_TRUNC, E_SEED, E_OPTIONS, E_T0, E_T1, E_KEYS };
enum { R_TYPE, R_ORDER, R_DTYPE, R_NPYFILE, R_NPYOFF, R_SIZE, R_SHAPE, R_KEYS };
static PyObject *episode_names[E_KEYS], *ref_names[R_KEYS];

typedef struct {
    PyObject *fn;               /* the blob's name (strong) */
    PyArray_Descr *descr;       /* the dtype (strong) */
    int ndim;
    npy_intp dims[PLAIN_MAX_NDIM];  /* dims[0] is set per array; the others are shared */
    int64_t row_bytes;          /* bytes per step */
    int64_t start, end;         /* the bytes of the key's arrays, consecutive */
    int64_t *rows;              /* per episode object, its array's first dimension */
    PyObject *flat;             /* the 1-D view of the blob the arrays are sliced from */
    int64_t p0;                 /* flat's first byte in the blob: start modulo row_bytes */
} PlainColumn;

/* The value of an exact dict under an exact str key, borrowed, or NULL (never an exception:
 * hashing and comparing exact strs cannot fail). */
static inline PyObject *
plain_get(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) {
        PyErr_Clear();  /* (unreachable) */
    }
    return v;
}

/* Whether a and b are both exact strs, of the same characters. */
static inline int
plain_str_eq(PyObject *a, PyObject *b)
{
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b)) {
        return 0;
    }
    return a == b || (PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b) &&
                      PyUnicode_Compare(a, b) == 0);
}

/* The keys to look up names[0..n) with (new references): the equal key objects of the exact
 * dict d where it has them, else the names. A parser gives all its objects the same key
 * objects (orjson caches them, the json module memoizes them), so that a lookup with them
 * compares no characters; any other key object equal to a name finds the same values. */
static void
plain_keys(PyObject *d, PyObject *const *names, int n, PyObject **keys)
{
    for (int j = 0; j < n; j++) {
        keys[j] = names[j];
    }
    if (d != NULL && PyDict_CheckExact(d)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(d, &pos, &k, &v)) {
            for (int j = 0; j < n; j++) {
                if (keys[j] == names[j] && plain_str_eq(k, names[j])) {
                    keys[j] = k;
                    break;
                }
            }
        }
    }
    for (int j = 0; j < n; j++) {
        Py_INCREF(keys[j]);
    }
}

/* Whether v is an exact int (a bool is not) within int64; if so, *out is its value. */
static inline int
plain_int64(PyObject *v, int64_t *out)
{
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

/* Whether the n references of one key are ndarray references ({"__type": "ndarray", "order":
 * "C"}) of one allowed dtype, one blob and the same positive dimensions after the first,
 * placed one after the other from a non-negative offset, each of exactly prod(shape) *
 * itemsize bytes. Fills c, but for the blob (not opened yet). Returns 1 or 0; never raises,
 * and runs no Python code. */
static int
plain_column_check(PyObject *const *refs, Py_ssize_t n, PyObject *dtypes, PyObject *const *rk,
                   PlainColumn *c)
{
    PyObject *fn = NULL, *dtype = NULL;
    PyArray_Descr *descr = NULL;
    int64_t next = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = refs[i];
        if (!PyDict_CheckExact(r)) {
            return 0;
        }
        PyObject *kind = plain_get(r, rk[R_TYPE]), *order = plain_get(r, rk[R_ORDER]);
        PyObject *dt = plain_get(r, rk[R_DTYPE]), *name = plain_get(r, rk[R_NPYFILE]);
        PyObject *off_o = plain_get(r, rk[R_NPYOFF]), *size_o = plain_get(r, rk[R_SIZE]);
        PyObject *shape = plain_get(r, rk[R_SHAPE]);
        if (kind == NULL || order == NULL || dt == NULL || name == NULL || off_o == NULL ||
            size_o == NULL || shape == NULL || !plain_str_eq(kind, s_ndarray) ||
            !plain_str_eq(order, s_C) || !PyList_CheckExact(shape)) {
            return 0;
        }
        Py_ssize_t nd = PyList_GET_SIZE(shape);
        if (i == 0) {
            if (!PyUnicode_CheckExact(dt) || !PyUnicode_CheckExact(name) || nd < 1 ||
                nd > PLAIN_MAX_NDIM) {
                return 0;
            }
            PyObject *entry = plain_get(dtypes, dt);
            if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) < 1 ||
                !PyArray_DescrCheck(PyTuple_GET_ITEM(entry, 0))) {
                return 0;
            }
            descr = (PyArray_Descr *)PyTuple_GET_ITEM(entry, 0);
            int64_t row_bytes = (int64_t)PyDataType_ELSIZE(descr);
            if (row_bytes <= 0) {
                return 0;
            }
            for (Py_ssize_t k = 1; k < nd; k++) {
                int64_t d;
                if (!plain_int64(PyList_GET_ITEM(shape, k), &d) || d <= 0 ||
                    d > INT64_MAX / row_bytes) {
                    return 0;
                }
                row_bytes *= d;
                c->dims[k] = (npy_intp)d;  /* (fits: row_bytes <= the blob's length, later) */
            }
            c->ndim = (int)nd;
            c->row_bytes = row_bytes;
            fn = name;
            dtype = dt;
        }
        else {
            if (nd != c->ndim || !plain_str_eq(dt, dtype) || !plain_str_eq(name, fn)) {
                return 0;
            }
            for (Py_ssize_t k = 1; k < nd; k++) {
                int64_t d;
                if (!plain_int64(PyList_GET_ITEM(shape, k), &d) || d != (int64_t)c->dims[k]) {
                    return 0;
                }
            }
        }
        int64_t rows, off, size;
        if (!plain_int64(PyList_GET_ITEM(shape, 0), &rows) || !plain_int64(off_o, &off) ||
            !plain_int64(size_o, &size) || rows < 0 || rows > INT64_MAX / c->row_bytes ||
            size != rows * c->row_bytes || off < 0 || off > INT64_MAX - size ||
            (i > 0 && off != next)) {
            return 0;
        }
        if (i == 0) {
            c->start = off;
        }
        next = off + size;
        c->rows[i] = rows;
    }
    c->end = next;
    Py_INCREF(fn);
    c->fn = fn;
    Py_INCREF(descr);
    c->descr = descr;
    return 1;
}

/* Open the column's blob as the Python path does (a blob opened already, else
 * open_blob(name): its (buffer, length, writable), or None if it cannot be opened), and make
 * the view its arrays are sliced from, if every array lies within the blob. Returns 1, 0 (does
 * not fit), or -1 with an exception (from opening the blob). */
static int
plain_column_open(PlainColumn *c, PyObject *opened, PyObject *open_blob)
{
    PyObject *entry = PyDict_GetItemWithError(opened, c->fn);
    if (entry != NULL) {
        Py_INCREF(entry);
    }
    else if (PyErr_Occurred() || (entry = PyObject_CallOneArg(open_blob, c->fn)) == NULL) {
        return -1;
    }
    int ok = 0;
    Py_ssize_t blob_len;
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(entry, 1))) {
        goto done;  /* (None: the blob cannot be opened) */
    }
    blob_len = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
    if (blob_len < 0) {
        PyErr_Clear();
        goto done;
    }
    /* As np.frombuffer: the buffer's address, kept valid by the base; an object that tracks
     * its exports (a memoryview, a bytearray) is wrapped in a memoryview of its own, an
     * export that keeps it from being released or resized while the arrays live. */
    PyObject *blob = PyTuple_GET_ITEM(entry, 0);
    PyBufferProcs *procs = Py_TYPE(blob)->tp_as_buffer;
    if (procs != NULL && procs->bf_releasebuffer != NULL) {
        blob = PyMemoryView_FromObject(blob);
        if (blob == NULL) {
            ok = -1;
            goto done;
        }
    }
    else {
        Py_INCREF(blob);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(blob, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(blob);
        ok = -1;
        goto done;
    }
    char *buf = (char *)view.buf;
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (len != blob_len || c->row_bytes > (int64_t)blob_len || c->end > (int64_t)blob_len) {
        Py_DECREF(blob);
        goto done;
    }
    c->p0 = c->start % c->row_bytes;
    npy_intp count = (npy_intp)(((int64_t)blob_len - c->p0) / c->row_bytes *
                                (c->row_bytes / (int64_t)PyDataType_ELSIZE(c->descr)));
    Py_INCREF(c->descr);
    c->flat = PyArray_NewFromDescr(&PyArray_Type, c->descr, 1, &count, NULL, buf + c->p0, 0,
                                   NULL);  /* (flags 0: read-only) */
    if (c->flat == NULL) {
        Py_DECREF(blob);
        ok = -1;
        goto done;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)c->flat, blob) < 0) {  /* (steals blob) */
        Py_CLEAR(c->flat);
        ok = -1;
        goto done;
    }
    ok = 1;
done:
    Py_DECREF(entry);
    return ok;
}

/* The read-only array of `rows` steps at byte `at` of the column's view (an array of its own
 * if empty, as np.empty makes it). New reference, or NULL with an exception. */
static PyObject *
plain_column_array(PlainColumn *c, int64_t at, int64_t rows)
{
    c->dims[0] = (npy_intp)rows;
    Py_INCREF(c->descr);
    if (rows == 0) {
        PyObject *a = PyArray_NewFromDescr(&PyArray_Type, c->descr, c->ndim, c->dims, NULL,
                                           NULL, 0, NULL);
        if (a != NULL) {
            PyArray_CLEARFLAGS((PyArrayObject *)a, NPY_ARRAY_WRITEABLE);
        }
        return a;
    }
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, c->descr, c->ndim, c->dims, NULL,
                                       PyArray_BYTES((PyArrayObject *)c->flat) + at, 0, NULL);
    if (a == NULL) {
        return NULL;
    }
    Py_INCREF(c->flat);
    if (PyArray_SetBaseObject((PyArrayObject *)a, c->flat) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static void
plain_column_clear(PlainColumn *c)
{
    Py_CLEAR(c->fn);
    Py_CLEAR(c->descr);
    Py_CLEAR(c->flat);
}

/* Whether the byte ranges of two columns' arrays cannot meet (another blob, or disjoint). */
static inline int
plain_apart(const PlainColumn *x, const PlainColumn *y)
{
    return !plain_str_eq(x->fn, y->fn) || x->start >= y->end || y->start >= x->end;
}

/* An episode's unix time: null, or a float below 2**63 in magnitude (see decode_batch_plain). */
static inline int
plain_time_ok(PyObject *t)
{
    if (t == Py_None) {
        return 1;
    }
    if (!PyFloat_CheckExact(t)) {
        return 0;
    }
    double x = PyFloat_AS_DOUBLE(t);
    return !(x >= 9223372036854775808.0 || x <= -9223372036854775808.0);
}

PyDoc_STRVAR(decode_plain_doc,
"decode_plain(objs, dtypes, opened, open_blob, last_continues) -> (episodes, steps) | None\n\n"
"Decode a batch's episode objects ``objs`` when every one is plain and the arrays lie as the\n"
"writer lays them out (see gym_recording._format.decode_batch_plain, which this mirrors).\n"
"``dtypes`` maps allowed dtype names to (dtype, itemsize); ``opened`` maps blob names to\n"
"(buffer, length, writable), and ``open_blob(name)`` opens one (None if it cannot). Returns\n"
"the PlainEpisode tuples and the batch's steps, or None for the Python path to decide.");

static PyObject *
decode_plain(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *objs, *dtypes, *opened, *open_blob;
    int last_continues;
    if (!PyArg_ParseTuple(args, "OO!O!Op:decode_plain", &objs, &PyDict_Type, &dtypes,
                          &PyDict_Type, &opened, &open_blob, &last_continues)) {
        return NULL;
    }
    if (!PyList_CheckExact(objs) || PyList_GET_SIZE(objs) == 0 || last_continues) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(objs);
    /* Per object: its three references (borrowed), then its flags, seed and times (held:
     * Python code runs when a blob is opened); per column, the rows of its arrays. */
    enum { REFS = 3, KEPT = 5, COLS = 3 };
    if ((size_t)n >
        PY_SSIZE_T_MAX / ((REFS + KEPT) * sizeof(PyObject *) + COLS * sizeof(int64_t))) {
        return PyErr_NoMemory();
    }
    PyObject **refs = PyMem_Malloc((size_t)n * (REFS + KEPT) * sizeof(PyObject *));
    int64_t *rows = PyMem_Malloc((size_t)n * COLS * sizeof(int64_t));
    if (refs == NULL || rows == NULL) {
        PyMem_Free(refs);
        PyMem_Free(rows);
        return PyErr_NoMemory();
    }
    PyObject **kept = refs + REFS * n;
    Py_ssize_t n_kept = 0;  /* objects whose KEPT values are held */
    PlainColumn cols[COLS];  /* observations, actions, rewards */
    memset(cols, 0, sizeof(cols));
    for (int k = 0; k < COLS; k++) {
        cols[k].rows = rows + k * n;
    }
    PlainColumn *obs = &cols[0], *act = &cols[1], *rew = &cols[2];
    PyObject *result = NULL, *episodes = NULL;
    /* The keys, as the first object and its rewards' reference hold them. */
    PyObject *ek[E_KEYS], *rk[R_KEYS];
    PyObject *first = PyList_GET_ITEM(objs, 0);
    plain_keys(first, episode_names, E_KEYS, ek);
    plain_keys(PyDict_CheckExact(first) ? plain_get(first, ek[E_REW]) : NULL, ref_names, R_KEYS,
               rk);

    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(objs, i);
        if (!PyDict_CheckExact(o)) {
            goto decline;
        }
        PyObject *ro = plain_get(o, ek[E_OBS]), *ra = plain_get(o, ek[E_ACT]);
        PyObject *rr = plain_get(o, ek[E_REW]), *term = plain_get(o, ek[E_TERM]);
        PyObject *trunc = plain_get(o, ek[E_TRUNC]), *seed = plain_get(o, ek[E_SEED]);
        PyObject *options = plain_get(o, ek[E_OPTIONS]);
        PyObject *t0 = plain_get(o, ek[E_T0]), *t1 = plain_get(o, ek[E_T1]);
        /* Exactly these keys (the times may be absent): no part, continues, infos or other. */
        Py_ssize_t keys = 7 + (t0 != NULL) + (t1 != NULL);
        t0 = t0 == NULL ? Py_None : t0;
        t1 = t1 == NULL ? Py_None : t1;
        if (ro == NULL || ra == NULL || rr == NULL || term == NULL || trunc == NULL ||
            seed == NULL || options != Py_None || PyDict_GET_SIZE(o) != keys ||
            !PyBool_Check(term) || !PyBool_Check(trunc) ||
            !(seed == Py_None || PyLong_CheckExact(seed)) || !plain_time_ok(t0) ||
            !plain_time_ok(t1)) {
            goto decline;
        }
        refs[i] = ro;
        refs[n + i] = ra;
        refs[2 * n + i] = rr;
        PyObject **h = kept + KEPT * i;
        h[0] = term;
        h[1] = trunc;
        h[2] = seed;
        h[3] = t0;
        h[4] = t1;
        for (int k = 0; k < KEPT; k++) {
            Py_INCREF(h[k]);
        }
        n_kept = i + 1;
    }
    /* Every reference checked before any blob is opened; rewards first, as in Python. */
    if (!plain_column_check(refs + 2 * n, n, dtypes, rk, rew) || rew->ndim != 1 ||
        memchr("biuf", rew->descr->kind, 4) == NULL ||
        !plain_column_check(refs + n, n, dtypes, rk, act) ||
        !plain_column_check(refs, n, dtypes, rk, obs)) {
        goto decline;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (act->rows[i] != rew->rows[i] || obs->rows[i] != rew->rows[i] + 1) {
            goto decline;  /* (rows < 2**63 / row_bytes: no overflow) */
        }
    }
    if (!plain_apart(obs, act) || !plain_apart(obs, rew) || !plain_apart(act, rew)) {
        goto decline;
    }
    for (int k = COLS - 1; k >= 0; k--) {  /* rewards, actions, observations */
        int r = plain_column_open(&cols[k], opened, open_blob);
        if (r < 0) {
            goto error;
        }
        if (r == 0) {
            goto decline;
        }
    }
    episodes = PyList_New(n);
    if (episodes == NULL) {
        goto error;
    }
    int64_t at[COLS], steps = 0;
    for (int k = 0; k < COLS; k++) {
        at[k] = cols[k].start - cols[k].p0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_New(9);
        if (t == NULL) {
            goto error;
        }
        PyList_SET_ITEM(episodes, i, t);
        for (int k = 0; k < COLS; k++) {
            int64_t r = cols[k].rows[i];
            PyObject *a = plain_column_array(&cols[k], at[k], r);
            if (a == NULL) {
                goto error;
            }
            PyTuple_SET_ITEM(t, k, a);
            at[k] += r * cols[k].row_bytes;
        }
        PyObject **h = kept + KEPT * i;
        Py_INCREF(h[0]);
        PyTuple_SET_ITEM(t, 3, h[0]);
        Py_INCREF(h[1]);
        PyTuple_SET_ITEM(t, 4, h[1]);
        Py_INCREF(h[2]);
        PyTuple_SET_ITEM(t, 5, h[2]);
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(t, 6, Py_None);  /* options */
        Py_INCREF(h[3]);
        PyTuple_SET_ITEM(t, 7, h[3]);
        Py_INCREF(h[4]);
        PyTuple_SET_ITEM(t, 8, h[4]);
        /* Arrays, bools, ints, floats and None: no cycle can pass through the tuple (the
         * collector would untrack it at its first collection; spare it the work). */
        PyObject_GC_UnTrack(t);
        steps += rew->rows[i];
    }
    result = Py_BuildValue("(OL)", episodes, (long long)steps);
    goto done;

decline:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(episodes);
    for (Py_ssize_t i = 0; i < KEPT * n_kept; i++) {
        Py_DECREF(kept[i]);
    }
    for (int k = 0; k < COLS; k++) {
        plain_column_clear(&cols[k]);
    }
    for (int j = 0; j < E_KEYS; j++) {
        Py_DECREF(ek[j]);
    }
    for (int j = 0; j < R_KEYS; j++) {
        Py_DECREF(rk[j]);
    }
    PyMem_Free(refs);
    PyMem_Free(rows);
    return result;
}

PyDoc_STRVAR(plain_episode_doc,
"plain_episode(cls, fields, plain, index) -> object\n\n"
"An instance of ``cls`` made as ``object.__new__(cls)`` makes it, whose ``__dict__`` is a\n"
"copy of ``fields`` (every key in order) with the observations, actions, rewards,\n"
"terminated, truncated, seed, options, started_at and ended_at of the PlainEpisode tuple\n"
"``plain``, and ``index``: the reader's Episode of a plain episode, without Python code.");

static PyObject *empty_tuple;

static PyObject *
plain_episode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(args[0]) || !PyDict_CheckExact(args[1]) ||
        !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_episode(): expected a type, a dict, a 9-tuple and an index");
        return NULL;
    }
    PyObject *const keys[9] = {s_observations, s_actions, s_rewards, s_terminated, s_truncated,
                               s_seed, s_options, s_started_at, s_ended_at};
    PyObject *plain = args[2];
    PyObject *ep = PyBaseObject_Type.tp_new((PyTypeObject *)args[0], empty_tuple, NULL);
    if (ep == NULL) {
        return NULL;
    }
    PyObject *d = PyObject_GenericGetDict(ep, NULL);
    if (d == NULL) {
        goto fail;
    }
    if (!PyDict_CheckExact(d) || PyDict_GET_SIZE(d) != 0) {
        PyErr_SetString(PyExc_TypeError, "plain_episode(): expected a type with a __dict__");
        goto fail;
    }
    if (PyDict_Update(d, args[1]) < 0) {
        goto fail;
    }
    for (int k = 0; k < 9; k++) {
        if (PyDict_SetItem(d, keys[k], PyTuple_GET_ITEM(plain, k)) < 0) {
            goto fail;
        }
    }
    if (PyDict_SetItem(d, s_index, args[3]) < 0) {
        goto fail;
    }
    Py_DECREF(d);
    return ep;
fail:
    Py_XDECREF(d);
    Py_DECREF(ep);
    return NULL;
}

/* Intern the strings decode_plain looks up; 0, or -1 with an exception. */
static int
plain_init(void)
{
    struct {
        PyObject **slot;
        const char *s;
    } strs[] = {
        {&s_observations, "observations"}, {&s_actions, "actions"}, {&s_rewards, "rewards"},
        {&s_terminated, "terminated"}, {&s_truncated, "truncated"}, {&s_seed, "seed"},
        {&s_options, "options"}, {&s_started_at, "started_at"}, {&s_ended_at, "ended_at"},
        {&s_type, "__type"}, {&s_order, "order"}, {&s_dtype, "dtype"},
        {&s_npyfile, "npyfile"}, {&s_npyoff, "npyoff"}, {&s_size, "size"},
        {&s_shape, "shape"}, {&s_ndarray, "ndarray"}, {&s_C, "C"}, {&s_index, "index"},
    };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if (*strs[i].slot == NULL && (*strs[i].slot = PyUnicode_InternFromString(strs[i].s)) == NULL) {
            return -1;
        }
    }
    PyObject *const e[E_KEYS] = {s_observations, s_actions, s_rewards, s_terminated,
                                 s_truncated, s_seed, s_options, s_started_at, s_ended_at};
    PyObject *const r[R_KEYS] = {s_type, s_order, s_dtype, s_npyfile, s_npyoff, s_size, s_shape};
    memcpy(episode_names, e, sizeof(e));
    memcpy(ref_names, r, sizeof(r));
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL) {
        return -1;
    }
    return 0;
}

static PyMethodDef speedups_methods[] = {
    {"encode_spans", encode_spans, METH_VARARGS, encode_spans_doc},
    {"pack_list", pack_list, METH_VARARGS, pack_list_doc},
    {"decode_plain", decode_plain, METH_VARARGS, decode_plain_doc},
    {"plain_episode", (PyCFunction)(void (*)(void))plain_episode, METH_FASTCALL, plain_episode_doc},
#ifndef _WIN32
    {"write_files", write_files, METH_VARARGS, write_files_doc},
    {"start_write_files", start_write_files, METH_VARARGS, start_write_files_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gym_recording._speedups",
    .m_doc = "The recorded step, the atomic file write, the batch JSON of the common layout "
             "and the reader's batch decoding in C (optional: gym_recording falls back to "
             "Python without it).",
    .m_size = -1,
    .m_methods = speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    import_array();
    for (int k = 0; k < S_COUNT; k++) {
        if ((span_attrs[k] = PyUnicode_InternFromString(span_attr_names[k])) == NULL) {
            return NULL;
        }
    }
    if (plain_init() < 0) {
        return NULL;
    }
    if (PyType_Ready(&StepRecorderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
#ifndef _WIN32
    if (PyType_Ready(&WriteTaskType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    Py_INCREF(&StepRecorderType);
    if (PyModule_AddObject(m, "StepRecorder", (PyObject *)&StepRecorderType) < 0) {
        Py_DECREF(&StepRecorderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
