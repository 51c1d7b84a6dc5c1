/*
 * gym_recording._speedups: the accelerated pieces of gym-recording, each a drop-in for one
 * function of its Python code, imported only by gym_recording/_accel.py.
 *
 * 1. The recorded step, for the commonest layouts.
 *
 * StepRecorder(slow, on_flags, rewards) is the accelerated drop-in for
 * gym_recording.record.steps.PlainStepRecorder: a wrapper's step calls
 * recorder.record(action, result) after the env's step, and it returns result. When result is
 * a gymnasium 5-tuple whose observation and action fit the leaves configure() named, whose
 * reward is a float and while the buffer has room, it appends the step's bytes to the
 * buffer's bytearrays itself (and calls on_flags(terminated, truncated) if either is set).
 * Every other step goes to slow(action, result), the recording's Python code, before anything
 * is stored. It stores exactly the bytes the Python code stores; tests/test_accelerated.py
 * runs both over the same steps and compares the files.
 *
 * A value fits a leaf (rows of one dtype and shape in a bytearray) when it is a C-contiguous
 * ndarray of exactly that dtype and shape, or, for a scalar leaf, a numpy scalar of that
 * dtype, or a Python int when the leaf holds int64. Nothing here reads a Python object's
 * layout beyond the public C API of CPython and NumPy.
 *
 * 2. start_write(directory, files, mode): the drop-in for LocalStorage's Python group write
 * (gym_recording/storage/local.py): the same files, renames and fsyncs in the same order, on
 * a thread that never takes the GIL.
 *
 * 3. column_views(refs, blob, name, dtypes): the drop-in for BatchBlob._column_views in
 * gym_recording/format/arrays.py, which says when a list of ndarray references is a writer's
 * column and then views them all; the same checks, the same arrays (tests/test_accelerated.py
 * compares both over the same files).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
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
#include <numpy/arrayscalars.h>

typedef struct {
    PyObject *buf;        /* bytearray receiving the rows; NULL if not configured */
    PyArray_Descr *descr; /* the rows' dtype */
    int ndim;
    npy_intp shape[NPY_MAXDIMS];
    Py_ssize_t nbytes; /* bytes per row */
    int int_ok;        /* a Python int fits (an int64 scalar leaf) */
} Leaf;

typedef struct {
    PyObject_HEAD
    PyObject *slow;
    PyObject *on_flags;
    PyObject *rewards; /* bytearray of float64 */
    Py_ssize_t room;   /* steps the buffer may hold; -1 while no episode is recorded */
    int fast;          /* both leaves are configured */
    Leaf obs;
    Leaf act;
} StepRecorder;

static void
leaf_clear(Leaf *s)
{
    Py_CLEAR(s->buf);
    Py_CLEAR(s->descr);
    s->ndim = 0;
    s->nbytes = 0;
    s->int_ok = 0;
}

/* The bytes of v if it fits the leaf (as described above), in *src; else NULL. tmp receives
   a scalar's or an int's value. */
static inline const void *
leaf_bytes(PyObject *v, const Leaf *s, npy_int64 *tmp)
{
    if (Py_TYPE(v) == &PyArray_Type) {
        PyArrayObject *a = (PyArrayObject *)v;
        if (PyArray_NDIM(a) != s->ndim || !PyArray_IS_C_CONTIGUOUS(a)) {
            return NULL;
        }
        const npy_intp *dims = PyArray_DIMS(a);
        for (int i = 0; i < s->ndim; i++) {
            if (dims[i] != s->shape[i]) {
                return NULL;
            }
        }
        PyArray_Descr *d = PyArray_DESCR(a);
        if (d != s->descr && !PyArray_EquivTypes(d, s->descr)) {
            return NULL;
        }
        return PyArray_DATA(a);
    }
    if (s->ndim != 0) {
        return NULL;
    }
    if (s->int_ok && PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return NULL;
        }
        *tmp = (npy_int64)x;
        return tmp;
    }
    if (s->nbytes <= (Py_ssize_t)sizeof(npy_int64) && PyArray_IsScalar(v, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(v);
        if (d == NULL) {
            PyErr_Clear();
            return NULL;
        }
        int same = d == s->descr || PyArray_EquivTypes(d, s->descr);
        Py_DECREF(d);
        if (!same) {
            return NULL;
        }
        PyArray_ScalarAsCtype(v, tmp);
        return tmp;
    }
    return NULL;
}

static inline int
append(PyObject *buf, const void *src, Py_ssize_t n)
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

/* record(action, result): store the step, or hand it to slow; return result (a new
   reference), or NULL with an exception. */
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
        (PyByteArray_GET_SIZE(self->rewards) >> 3) >= self->room) {
        goto slow;
    }
    PyObject *reward = PyTuple_GET_ITEM(result, 1);
    if (!PyFloat_Check(reward)) { /* (numpy's float64 is a float) */
        goto slow;
    }
    /* Every check before anything is stored: a mismatch leaves the buffers as they were. */
    npy_int64 a_tmp, o_tmp;
    const void *a_src = leaf_bytes(action, &self->act, &a_tmp);
    if (a_src == NULL) {
        goto slow;
    }
    const void *o_src = leaf_bytes(PyTuple_GET_ITEM(result, 0), &self->obs, &o_tmp);
    if (o_src == NULL) {
        goto slow;
    }
    double r = PyFloat_AS_DOUBLE(reward);
    if (append(self->act.buf, a_src, self->act.nbytes) < 0 ||
        append(self->obs.buf, o_src, self->obs.nbytes) < 0 ||
        append(self->rewards, &r, sizeof r) < 0) {
        return NULL;
    }
    PyObject *terminated = PyTuple_GET_ITEM(result, 2);
    PyObject *truncated = PyTuple_GET_ITEM(result, 3);
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

/* Set a leaf from a layout tuple (buf, dtype, shape, int_ok), or clear it for None. */
static int
leaf_set(Leaf *s, PyObject *layout, const char *what)
{
    leaf_clear(s);
    if (layout == Py_None) {
        return 0;
    }
    PyObject *buf, *dtype, *shape;
    int int_ok;
    if (!PyTuple_Check(layout) ||
        !PyArg_ParseTuple(layout, "O!O!O!p", &PyByteArray_Type, &buf, &PyArrayDescr_Type, &dtype,
                          &PyTuple_Type, &shape, &int_ok) ||
        PyTuple_GET_SIZE(shape) > NPY_MAXDIMS) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError,
                         "configure(): expected (bytearray, dtype, shape, bool) for %s", what);
        }
        return -1;
    }
    Py_ssize_t nbytes = (Py_ssize_t)PyDataType_ELSIZE((PyArray_Descr *)dtype);
    int ndim = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < ndim; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (d <= 0) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "configure(): empty rows for %s", what);
            }
            return -1;
        }
        s->shape[i] = (npy_intp)d;
        nbytes *= d;
    }
    if (int_ok && (ndim != 0 || nbytes != (Py_ssize_t)sizeof(npy_int64))) {
        PyErr_Format(PyExc_ValueError, "configure(): ints fit int64 scalar leaves only (%s)", what);
        return -1;
    }
    s->ndim = ndim;
    s->nbytes = nbytes;
    s->int_ok = int_ok;
    Py_INCREF(buf);
    s->buf = buf;
    Py_INCREF(dtype);
    s->descr = (PyArray_Descr *)dtype;
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure(observations, actions)\n\n"
"The leaves stepped in C, each (rows: bytearray, dtype, shape, python_ints_fit) or None;\n"
"with either None every step goes to slow.");

static PyObject *
recorder_configure(PyObject *op, PyObject *args)
{
    StepRecorder *self = (StepRecorder *)op;
    PyObject *obs, *act;
    if (!PyArg_ParseTuple(args, "OO:configure", &obs, &act)) {
        return NULL;
    }
    self->fast = 0;
    if (leaf_set(&self->obs, obs, "observations") < 0 || leaf_set(&self->act, act, "actions") < 0) {
        leaf_clear(&self->obs);
        leaf_clear(&self->act);
        return NULL;
    }
    self->fast = self->obs.buf != NULL && self->act.buf != NULL;
    Py_RETURN_NONE;
}

static PyObject *
recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *slow, *on_flags, *rewards;
    static char *kwlist[] = {"slow", "on_flags", "rewards", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!:StepRecorder", kwlist, &slow, &on_flags,
                                     &PyByteArray_Type, &rewards)) {
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
    leaf_clear(&self->obs);
    leaf_clear(&self->act);
    return 0;
}

static void
recorder_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    recorder_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
recorder_refuse_copy(PyObject *Py_UNUSED(op), PyObject *Py_UNUSED(arg))
{
    PyErr_SetString(PyExc_TypeError,
                    "a StepRecorder belongs to one recording and cannot be copied or pickled");
    return NULL;
}

PyDoc_STRVAR(record_doc,
"record(action, result, /)\n\n"
"Store the step env.step(action) returned result for, or hand it to slow; return result.");

static PyMethodDef recorder_methods[] = {
    {"record", (PyCFunction)(void (*)(void))recorder_record, METH_FASTCALL, record_doc},
    {"configure", recorder_configure, METH_VARARGS, configure_doc},
    {"__reduce__", recorder_refuse_copy, METH_NOARGS, NULL},
    {"__reduce_ex__", recorder_refuse_copy, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef recorder_members[] = {
    {"room", T_PYSSIZET, offsetof(StepRecorder, room), 0,
     "Steps the buffer may hold before the Python code must run; -1 without an episode."},
    {"fast", T_INT, offsetof(StepRecorder, fast), READONLY,
     "Whether it stores steps itself (both leaves configured)."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(recorder_doc,
"StepRecorder(slow, on_flags, rewards)\n\n"
"Stores steps of the layouts configure() names; see record().");

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

/* A group of files to write (what start_write parses and gathers), and what writing it
 * returned. Owned by a WriteTask. */
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

/* Parse start_write's arguments into g (zeroed): 0, or -1 with an exception (then
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

/* ------------------------------------------------------------------ WriteTask
 *
 * start_write(directory, files, mode) -> WriteTask: a batch's files written on a thread of
 * their own (a POSIX thread, not a Python one). It never takes the GIL, so it costs the
 * thread stepping the env nothing: a Python thread needs the GIL back after each of the
 * ~20 system calls of a batch, and waits for it up to the interpreter's switch interval each
 * time. task.wait(published) joins it. Until then the task holds the chunks' buffers.
 * Signals are blocked in the thread, so they go to the interpreter's threads.
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
"Wait for the write to end; append the names published (renamed, and synced where asked)\n"
"to the list ``published`` and return the bytes written, or raise an OSError naming what\n"
"failed. Once only.");

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
    .tp_doc = "A batch's files being written on a thread of their own (see start_write).",
    .tp_basicsize = sizeof(WriteTask),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)write_task_dealloc,
    .tp_methods = write_task_methods,
};

PyDoc_STRVAR(start_write_doc,
"start_write(directory, files, mode) -> WriteTask\n\n"
"Write files atomically and publish them in order, on a thread of its own that never takes\n"
"the GIL. ``files`` is a sequence of ``(tmp_name, name, chunks, sync_dir)``. Every\n"
"temporary file is created (O_EXCL, permission bits ``mode``) and written (a file of 4 MiB\n"
"or more streamed, its writeback started every 2 MiB), then every one fsynced (on Linux\n"
"their writeback started together first, so that one journal commit covers them), then\n"
"each renamed to its name in order, the directory fsynced after each whose ``sync_dir`` is\n"
"true. ``task.wait(published)`` reports it. If no thread can be started, the write is done\n"
"here (without the GIL).");

static PyObject *
start_write(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *dir, *files;
    int mode;
    if (!PyArg_ParseTuple(args, "OOi:start_write", &dir, &files, &mode)) {
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
    if (group_parse(&self->g, dir, files, mode, "start_write") < 0) {
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
        /* Let the new thread run now, before the thread stepping the env goes on (left to the
         * scheduler, it was measured to wait ~0.6 ms per batch of frames for the CPU). */
        (void)sched_yield();
    } else {
        Py_BEGIN_ALLOW_THREADS
        group_run(&self->g);
        Py_END_ALLOW_THREADS
    }
    return (PyObject *)self;
}
#endif /* !_WIN32 */

/* ------------------------------------------------------------------ column_views */

static PyObject *s_shape, *s_dtype, *s_npyfile, *s_npyoff, *s_size;

/* An int attribute of o as a Py_ssize_t >= 0 (references are checked by msgspec: exact ints
   within 0..2**63-1); -1 if it is not one (no exception left set). */
static Py_ssize_t
ssize_attr(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t x = PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -1;
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
    }
    return x;
}

PyDoc_STRVAR(column_views_doc,
"column_views(refs, blob, name, dtypes, /)\n\n"
"The views of ndarray references laid out as a writer's column, as BatchBlob._column gives\n"
"them: (views, start, stop) with the byte range they cover, or None when they are not one\n"
"(one dtype, one shape after the first axis, each array right after the previous one,\n"
"within blob, in the blob called name; dtypes maps dtype names to numpy dtypes).");

static PyObject *
column_views(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "column_views(refs: list, blob, name, dtypes: dict)");
        return NULL;
    }
    PyObject *refs = args[0], *blob = args[1], *name = args[2], *dtypes = args[3];
    Py_ssize_t n = PyList_GET_SIZE(refs);
    if (n < 1) {
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *views = NULL, *col = NULL, *shape0 = NULL, *dtname0 = NULL;
    Py_buffer view = {0};
    npy_intp tail[NPY_MAXDIMS];
    int ndim = 0;
    PyObject *first = PyList_GET_ITEM(refs, 0);
    shape0 = PyObject_GetAttr(first, s_shape);
    dtname0 = PyObject_GetAttr(first, s_dtype);
    if (shape0 == NULL || dtname0 == NULL || !PyList_CheckExact(shape0)) {
        PyErr_Clear();
        goto none;
    }
    ndim = (int)PyList_GET_SIZE(shape0);
    if (ndim < 1 || ndim > NPY_MAXDIMS) {
        goto none;
    }
    PyArray_Descr *descr = (PyArray_Descr *)PyDict_GetItemWithError(dtypes, dtname0);
    if (descr == NULL || !PyArray_DescrCheck(descr)) {
        PyErr_Clear();
        goto none;
    }
    Py_ssize_t row = (Py_ssize_t)PyDataType_ELSIZE(descr);
    for (int k = 1; k < ndim; k++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyList_GET_ITEM(shape0, k));
        if (d <= 0 || row > PY_SSIZE_T_MAX / d) {
            PyErr_Clear();
            goto none;
        }
        tail[k] = (npy_intp)d;
        row *= d;
    }
    if (PyObject_GetBuffer(blob, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t size = view.len;
    if (row <= 0 || row > size) {
        goto none;
    }
    /* Every reference checked, and its first row found, before any view is made. */
    Py_ssize_t *rows_of = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    if (rows_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t start = -1, at = -1;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        PyObject *r = PyList_GET_ITEM(refs, i);
        PyObject *shape = PyObject_GetAttr(r, s_shape);
        PyObject *dt = PyObject_GetAttr(r, s_dtype);
        PyObject *fn = PyObject_GetAttr(r, s_npyfile);
        ok = shape != NULL && dt != NULL && fn != NULL && PyList_CheckExact(shape) &&
             PyList_GET_SIZE(shape) == ndim &&
             (dt == dtname0 || PyUnicode_Compare(dt, dtname0) == 0) &&
             (fn == name || PyUnicode_Compare(fn, name) == 0);
        Py_ssize_t rows = -1;
        if (ok) {
            rows = PyLong_AsSsize_t(PyList_GET_ITEM(shape, 0));
            for (int k = 1; k < ndim && ok; k++) {
                ok = PyLong_AsSsize_t(PyList_GET_ITEM(shape, k)) == (Py_ssize_t)tail[k];
            }
        }
        Py_XDECREF(shape);
        Py_XDECREF(dt);
        Py_XDECREF(fn);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            ok = 0;
        }
        if (!ok) {
            break;
        }
        Py_ssize_t off = ssize_attr(r, s_npyoff), nbytes = ssize_attr(r, s_size);
        ok = rows >= 0 && off >= 0 && nbytes >= 0 && rows <= size / row && nbytes == rows * row &&
             (i == 0 || off == at) && off <= size - nbytes;
        if (i == 0) {
            start = off;
        }
        at = off + nbytes;
        rows_of[i] = rows;
    }
    if (!ok) {
        PyMem_Free(rows_of);
        goto none;
    }
    /* One view of the rows from the first array's start, sliced. */
    Py_ssize_t phase = start % row;
    npy_intp dims[NPY_MAXDIMS];
    dims[0] = (npy_intp)((size - phase) / row);
    for (int k = 1; k < ndim; k++) {
        dims[k] = tail[k];
    }
    Py_INCREF(descr);
    /* (flags 0: not writeable; the rest is worked out by UpdateFlags) */
    col = PyArray_NewFromDescr(&PyArray_Type, descr, ndim, dims, NULL, (char *)view.buf + phase,
                               0, NULL);
    if (col == NULL) {
        PyMem_Free(rows_of);
        goto done;
    }
    Py_INCREF(blob);
    if (PyArray_SetBaseObject((PyArrayObject *)col, blob) < 0) {
        PyMem_Free(rows_of);
        goto done;
    }
    PyArray_UpdateFlags((PyArrayObject *)col, NPY_ARRAY_UPDATE_ALL);
    views = PyList_New(n);
    if (views == NULL) {
        PyMem_Free(rows_of);
        goto done;
    }
    npy_intp r0 = (npy_intp)((start - phase) / row);
    const npy_intp *strides = PyArray_STRIDES((PyArrayObject *)col);
    for (Py_ssize_t i = 0; i < n; i++) {
        dims[0] = (npy_intp)rows_of[i];
        Py_INCREF(descr);
        PyObject *v = PyArray_NewFromDescr(
            &PyArray_Type, descr, ndim, dims, (npy_intp *)strides,
            PyArray_BYTES((PyArrayObject *)col) + r0 * strides[0], 0, NULL);
        if (v == NULL) {
            PyMem_Free(rows_of);
            goto done;
        }
        Py_INCREF(col);
        if (PyArray_SetBaseObject((PyArrayObject *)v, col) < 0) {
            Py_DECREF(v);
            PyMem_Free(rows_of);
            goto done;
        }
        PyArray_UpdateFlags((PyArrayObject *)v, NPY_ARRAY_UPDATE_ALL);
        PyList_SET_ITEM(views, i, v);
        r0 += (npy_intp)rows_of[i];
    }
    PyMem_Free(rows_of);
    result = Py_BuildValue("(Onn)", views, start, at);
    goto done;

none:
    result = Py_NewRef(Py_None);
done:
    if (view.obj != NULL) {
        PyBuffer_Release(&view);
    }
    Py_XDECREF(views);
    Py_XDECREF(col);
    Py_XDECREF(shape0);
    Py_XDECREF(dtname0);
    return result;
}

static PyMethodDef module_methods[] = {
    {"column_views", (PyCFunction)(void (*)(void))column_views, METH_FASTCALL, column_views_doc},
#ifndef _WIN32
    {"start_write", start_write, METH_VARARGS, start_write_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gym_recording._speedups",
    .m_doc = "The accelerated pieces of gym-recording (see gym_recording._accel).",
    .m_methods = module_methods,
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    import_array();
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_npyfile = PyUnicode_InternFromString("npyfile");
    s_npyoff = PyUnicode_InternFromString("npyoff");
    s_size = PyUnicode_InternFromString("size");
    if (!s_shape || !s_dtype || !s_npyfile || !s_npyoff || !s_size) {
        return NULL;
    }
    if (PyType_Ready(&StepRecorderType) < 0) {
        return NULL;
    }
#ifndef _WIN32
    if (PyType_Ready(&WriteTaskType) < 0) {
        return NULL;
    }
#endif
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&StepRecorderType);
    if (PyModule_AddObject(m, "StepRecorder", (PyObject *)&StepRecorderType) < 0) {
        Py_DECREF(&StepRecorderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
