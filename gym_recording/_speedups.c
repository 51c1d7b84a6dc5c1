/* gym_recording._speedups: drop-ins for Python code that stays the reference, imported only by
 * gym_recording/_accel.py, run beside that code by tests/test_accelerated.py; only the public C
 * API of CPython and NumPy. 1. StepRecorder (record.steps): record(action, result) appends a
 * step that fits configure()'s leaves, with a float reward, while the buffer has room (its info:
 * to its row, else to keep_info); others go to slow(). 2. start_write(directory, files, mode):
 * LocalStorage's group write, on a thread that never takes the GIL. 3. views(refs, blob, name,
 * dtypes, min_ndim): BatchBlob.array's checks and arrays, or None for Python to say why. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* (Python.h brings string.h, errno.h and limits.h) */
#ifndef _WIN32
#include <fcntl.h>
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
    PyObject *slow, *on_flags, *on_failure;
    PyObject *keep_info; /* called with the step's info before it is stored; or NULL */
    PyObject *rows;      /* (values, keys, types): the step infos kept as rows, or None */
    Py_ssize_t row_room; /* rows it may append to rows before keep_info must take one */
    PyObject *rewards;   /* bytearray of float64 */
    Py_ssize_t room;   /* steps the buffer may hold; -1 while no episode is recorded */
    unsigned long stepper; /* the thread in record(), or 0 */
    int fast;          /* both leaves are configured */
    Leaf obs, act;
} StepRecorder;

static void
leaf_clear(Leaf *s)
{
    Py_CLEAR(s->buf);
    Py_CLEAR(s->descr);
}

/* The bytes of v if it fits the leaf, else NULL: a C-contiguous ndarray of its dtype and shape;
   for a scalar leaf, a numpy scalar of its dtype or (int64) a Python int, its value in *tmp. */
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
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* If info is a row of rows = (values, keys, types), a dict of keys (the same objects, in that
   order) whose values are each of exactly its type in types (an int within 64 bits): append
   them to values (None for a row of no keys), return 1. Else 0, nothing appended. */
static int
take_row(StepRecorder *self, PyObject *info)
{
    PyObject *r = self->rows, *values, *keys, *types, *k, *v;
    Py_ssize_t pos = 0, i = 0, n;
    if (self->row_room <= 0 || r == NULL || !PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 3 ||
        !PyList_CheckExact(values = PyTuple_GET_ITEM(r, 0)) ||
        !PyTuple_CheckExact(keys = PyTuple_GET_ITEM(r, 1)) ||
        !PyTuple_CheckExact(types = PyTuple_GET_ITEM(r, 2)) || !PyDict_CheckExact(info) ||
        (n = PyDict_GET_SIZE(info)) != PyTuple_GET_SIZE(keys) || n != PyTuple_GET_SIZE(types)) {
        return 0;
    }
    for (int big = 0; PyDict_Next(info, &pos, &k, &v); i++) { /* (a big int: Python checks it) */
        PyObject *type = (PyObject *)Py_TYPE(v);
        if (k != PyTuple_GET_ITEM(keys, i) || type != PyTuple_GET_ITEM(types, i) ||
            (type == (PyObject *)&PyLong_Type && (PyLong_AsLongLongAndOverflow(v, &big), big))) {
            return 0;
        }
    }
    if (i == 0 && PyList_Append(values, Py_None) < 0) { /* (a row of no keys: one None) */
        PyErr_Clear();
        return 0;
    }
    for (pos = 0, n = PyList_GET_SIZE(values); PyDict_Next(info, &pos, &k, &v);) {
        if (PyList_Append(values, v) < 0) { /* (no memory: the row taken back, one by one) */
            for (i = PyList_GET_SIZE(values); i > n; i--) {
                (void)PySequence_DelItem(values, i - 1);
            }
            PyErr_Clear();
            return 0;
        }
    }
    self->row_room--;
    return 1;
}

/* 1 if a step of action and observation o may be stored now (their bytes in *a, *ob). */
static inline int
fits(StepRecorder *self, PyObject *action, PyObject *o, const void **a, const void **ob,
     npy_int64 *tmp)
{
    return self->fast && (PyByteArray_GET_SIZE(self->rewards) >> 3) < self->room &&
           (*a = leaf_bytes(action, &self->act, tmp)) != NULL &&
           (*ob = leaf_bytes(o, &self->obs, tmp + 1)) != NULL;
}

/* Store the step: 1, or 0 to hand it to slow, or -1 with an exception. Every check first (none
   stores anything), again after Python code (a signal's handler may close the recording). */
static int
store_step(StepRecorder *self, PyObject *action, PyObject *result)
{
    if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 5 ||
        !PyFloat_Check(PyTuple_GET_ITEM(result, 1))) { /* (numpy's float64 is a float) */
        return 0;
    }
    PyObject *terminated = PyTuple_GET_ITEM(result, 2), *truncated = PyTuple_GET_ITEM(result, 3);
    int t = terminated == Py_False ? 0 : PyObject_IsTrue(terminated);
    int u = t < 0 ? -1 : truncated == Py_False ? 0 : PyObject_IsTrue(truncated);
    npy_int64 tmp[2];
    const void *a_src, *o_src; /* (below, flags of no truth value go to Python's code) */
    if (u < 0 || !fits(self, action, PyTuple_GET_ITEM(result, 0), &a_src, &o_src, tmp)) {
        PyErr_Clear();
        return 0;
    }
    int ran = t || u;
    if (ran && call2(self->on_flags, terminated, truncated) < 0) { /* (first: no step */
        return -1; /* is kept without its flags if on_flags is interrupted) */
    }
    if (self->keep_info != NULL && !take_row(self, PyTuple_GET_ITEM(result, 4))) {
        PyObject *kept = PyObject_CallOneArg(self->keep_info, PyTuple_GET_ITEM(result, 4));
        if (kept == NULL) {
            return -1;
        }
        Py_DECREF(kept);
        ran = 1;
    }
    if (ran && !fits(self, action, PyTuple_GET_ITEM(result, 0), &a_src, &o_src, tmp)) {
        return 0; /* (the recording's code says what became of the step) */
    }
    double r = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(result, 1));
    if (append(self->act.buf, a_src, self->act.nbytes) < 0 ||
        append(self->obs.buf, o_src, self->obs.nbytes) < 0 || append(self->rewards, &r, 8) < 0) {
        PyObject *t, *v, *tb, *got; /* (on_failure takes the step back, and raises) */
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        got = PyObject_CallOneArg(self->on_failure, v ? v : Py_None);
        Py_XDECREF(t), Py_XDECREF(v), Py_XDECREF(tb), Py_XDECREF(got);
        return got ? (PyErr_SetString(PyExc_SystemError, "on_failure returned"), -1) : -1;
    }
    return 1;
}

/* record(action, result): the step stored (its thread in stepper meanwhile) or handed to slow. */
static PyObject *
recorder_record(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    StepRecorder *self = (StepRecorder *)op;
    if (nargs != 2) {
        return PyErr_Format(PyExc_TypeError, "record() takes 2 arguments (%zd given)", nargs);
    }
    self->stepper = PyThread_get_thread_ident(); /* (first: before room is read) */
    int stored = store_step(self, args[0], args[1]);
    self->stepper = 0;
    if (stored == 0 && call2(self->slow, args[0], args[1]) < 0) {
        return NULL;
    }
    return stored < 0 ? NULL : Py_NewRef(args[1]);
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
    if (!PyArg_ParseTuple(layout, "O!O!O!p", &PyByteArray_Type, &buf, &PyArrayDescr_Type, &dtype,
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
        if (d <= 0 || nbytes > PY_SSIZE_T_MAX / d) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "configure(): rows empty or too large for %s", what);
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
    s->buf = Py_NewRef(buf);
    s->descr = (PyArray_Descr *)Py_NewRef(dtype);
    return 0;
}

PyDoc_STRVAR(configure_doc, "configure(observations, actions, keep_info=None)\n\nThe leaves "
"stepped in C, each (rows: bytearray, dtype, shape, python_ints_fit) or None (then every step\n"
"goes to slow); keep_info(info) takes each step's info before it is stored here.");

static PyObject *
recorder_configure(PyObject *op, PyObject *args)
{
    StepRecorder *self = (StepRecorder *)op;
    PyObject *obs, *act, *keep_info = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:configure", &obs, &act, &keep_info)) {
        return NULL;
    }
    self->fast = 0;
    Py_XSETREF(self->keep_info, keep_info == Py_None ? NULL : Py_NewRef(keep_info));
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
    PyObject *slow, *on_flags, *on_failure, *rewards;
    static char *kwlist[] = {"slow", "on_flags", "on_failure", "rewards", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!:StepRecorder", kwlist, &slow, &on_flags,
                                     &on_failure, &PyByteArray_Type, &rewards)) {
        return NULL;
    }
    StepRecorder *self = (StepRecorder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->slow = Py_NewRef(slow);
    self->on_flags = Py_NewRef(on_flags);
    self->on_failure = Py_NewRef(on_failure);
    self->rewards = Py_NewRef(rewards);
    self->room = -1;
    return (PyObject *)self;
}

static int
recorder_traverse(PyObject *op, visitproc visit, void *arg)
{
    StepRecorder *self = (StepRecorder *)op;
    Py_VISIT(self->slow);
    Py_VISIT(self->on_flags);
    Py_VISIT(self->on_failure);
    Py_VISIT(self->keep_info);
    Py_VISIT(self->rows);
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
    Py_CLEAR(self->on_failure);
    Py_CLEAR(self->keep_info);
    Py_CLEAR(self->rows);
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

PyDoc_STRVAR(record_doc,
"record(action, result, /)\n\n"
"Store the step env.step(action) returned result for, or hand it to slow; return result.");

static PyMethodDef recorder_methods[] = {
    {"record", (PyCFunction)(void (*)(void))recorder_record, METH_FASTCALL, record_doc},
    {"configure", recorder_configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef recorder_members[] = {
    {"room", T_PYSSIZET, offsetof(StepRecorder, room), 0, "Steps it may store; -1: none."},
    {"rows", T_OBJECT, offsetof(StepRecorder, rows), 0, "(values, keys, types), or None."},
    {"row_room", T_PYSSIZET, offsetof(StepRecorder, row_room), 0, "Rows it may append."},
    {"fast", T_INT, offsetof(StepRecorder, fast), READONLY, "Whether it stores steps itself."},
    {"stepper", T_ULONG, offsetof(StepRecorder, stepper), 0, "The thread in record(), or 0."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StepRecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gym_recording._speedups.StepRecorder",
    .tp_basicsize = sizeof(StepRecorder),
    .tp_dealloc = recorder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "StepRecorder(slow, on_flags, on_failure, rewards): stores what configure() allows.",
    .tp_traverse = recorder_traverse,
    .tp_clear = recorder_clear,
    .tp_methods = recorder_methods,
    .tp_members = recorder_members,
    .tp_new = recorder_new,
};

#ifndef _WIN32
/* ------------------------------------------------------------------ write_files */
typedef struct {
    PyObject *tmp, *name; /* bytes: the temporary and the final name, in the directory */
    Py_buffer *bufs;      /* views of the file's chunks, got of them */
    Py_ssize_t got;
    struct iovec *iov;    /* the file's bytes */
    int n;
    int sync_dir;         /* fsync the directory after this file's rename */
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
        if (w == 0) { /* (no iovec is empty: no progress) */
            return EIO;
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

/* Bytes per window of a streamed file (write_file; BENCHMARKS.md has the measurements). */
#define STREAM_WINDOW ((size_t)2 << 20)
#define STREAM_IOV 64

/* Write the iovecs to a new file fd whole: 0, or an errno. A file of two windows or more goes a
 * window at a time, each one's writeback started once written (the disk writes it meanwhile). */
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
                size_t left = iov[i].iov_len - used, take = left < STREAM_WINDOW - len ? left
                                                                              : STREAM_WINDOW - len;
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

/* The whole protocol for files f[0..nf), without the GIL: every temporary file created, written
 * and fsynced, then each renamed in order, the directory fsynced after those that ask. 0, or an
 * errno with *failed_at the file the failing call was about and *failed what: 't' its temporary
 * file, 'n' its name, 'd' the directory, 's' the directory's fsync after its rename. *published
 * counts the files renamed (and synced, where asked); the others' temporary files are removed. */
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
        const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
        f[i].fd = openat(dfd, PyBytes_AS_STRING(f[i].tmp), flags, mode);
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
    /* Every file's writeback started before the first fsync (a hint): their blocks are then
     * allocated in one journal transaction, which that fsync commits. */
    for (i = nf - 1; nf > 1 && i >= 0; i--) {
        (void)sync_file_range(f[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
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
        if (renameat(dfd, PyBytes_AS_STRING(f[i].tmp), dfd, PyBytes_AS_STRING(f[i].name)) < 0) {
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
        unlinkat(dfd, PyBytes_AS_STRING(f[i].tmp), 0);
    }
    close(dfd);
    return err;
}

/* A group of files to write (what start_write parses), and what writing it returned. */
typedef struct {
    PyObject *dir; /* bytes */
    GroupFile *f;
    int nf, mode;
    int err, n_published, failed_at; /* the result of group_run */
    char failed;
    Py_ssize_t written;
} Group;

/* Release everything g holds (with the GIL); safe to call twice. */
static void
group_clear(Group *g)
{
    for (int i = 0; g->f != NULL && i < g->nf; i++) {
        for (Py_ssize_t j = 0; g->f[i].bufs != NULL && j < g->f[i].got; j++) {
            PyBuffer_Release(&g->f[i].bufs[j]);
        }
        PyMem_Free(g->f[i].bufs);
        PyMem_Free(g->f[i].iov);
        Py_XDECREF(g->f[i].tmp);
        Py_XDECREF(g->f[i].name);
    }
    PyMem_Free(g->f);
    g->f = NULL;
    g->nf = 0;
    Py_CLEAR(g->dir);
}

/* One file (tmp_name, name, chunks, sync_dir) into f (zeroed): 0, or -1 with an exception. */
static int
file_parse(GroupFile *f, PyObject *item)
{
    f->fd = -1;
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
        PyErr_Format(PyExc_TypeError, "start_write: each file is (tmp_name, name, chunks, "
                     "sync_dir), got %.100s", Py_TYPE(item)->tp_name);
        return -1;
    }
    if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(item, 0), &f->tmp) ||
        !PyUnicode_FSConverter(PyTuple_GET_ITEM(item, 1), &f->name) ||
        (f->sync_dir = PyObject_IsTrue(PyTuple_GET_ITEM(item, 3))) < 0) {
        return -1;
    }
    PyObject *seq = PySequence_Fast(PyTuple_GET_ITEM(item, 2), "chunks must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    f->bufs = k > INT_MAX ? NULL : PyMem_Calloc((size_t)k + 1, sizeof(Py_buffer));
    f->iov = k > INT_MAX ? NULL : PyMem_Calloc((size_t)k + 1, sizeof(struct iovec));
    if (f->bufs == NULL || f->iov == NULL) {
        PyErr_NoMemory();
        Py_DECREF(seq);
        return -1;
    }
    for (; f->got < k; f->got++) {
        Py_buffer *v = &f->bufs[f->got];
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, f->got), v, PyBUF_SIMPLE) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (v->len) {
            f->iov[f->n].iov_base = v->buf;
            f->iov[f->n++].iov_len = (size_t)v->len;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* start_write's arguments parsed into g (zeroed): 0, or -1 with an exception (group_clear). */
static int
group_parse(Group *g, PyObject *dir, PyObject *files, int mode)
{
    if (!PyUnicode_FSConverter(dir, &g->dir)) {
        return -1;
    }
    PyObject *seq = PySequence_Fast(files, "files must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(seq);
    int result = -1;
    if (nf < 1 || nf > 64) {
        PyErr_Format(PyExc_ValueError, "start_write: expected 1 to 64 files, got %zd", nf);
    } else if ((g->f = PyMem_Calloc((size_t)nf, sizeof(GroupFile))) == NULL) {
        PyErr_NoMemory();
    } else {
        g->mode = mode;
        result = 0;
        for (g->nf = 0; result == 0 && g->nf < nf; g->nf++) {
            result = file_parse(&g->f[g->nf], PySequence_Fast_GET_ITEM(seq, g->nf));
        }
    }
    Py_DECREF(seq);
    return result;
}

/* Write the group, without the GIL (any thread). */
static void
group_run(Group *g)
{
    g->err = write_group_nogil(PyBytes_AS_STRING(g->dir), g->f, g->nf, (mode_t)g->mode,
                               &g->n_published, &g->failed_at, &g->failed, &g->written);
}

/* After group_run, with the GIL: the names published appended to `published`, the bytes written
 * returned, or NULL with an OSError naming the file the failing call was about (or both). */
static PyObject *
group_result(Group *g, PyObject *published)
{
    for (int i = 0; i < g->n_published; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(g->f[i].name));
        if (s == NULL || PyList_Append(published, s) < 0) {
            Py_XDECREF(s);
            return NULL;
        }
        Py_DECREF(s);
    }
    if (g->err) {
        char failed = g->failed;
        GroupFile *f = &g->f[g->failed_at];
        PyObject *about = failed == 't' ? f->tmp : failed == 'n' ? f->name : g->dir;
        PyObject *name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(about));
        const char *also = failed == 's' ? PyBytes_AS_STRING(f->name) : NULL;
        PyObject *name2 = also ? PyUnicode_DecodeFSDefault(also) : NULL;
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

/* ------------------------------------------------------------------ WriteTask: a batch's files
 * written on a POSIX thread without the GIL, signals blocked, holding the buffers until wait(). */
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

/* Join the thread: 0, or -1 in a process forked while it ran (the write goes on in the parent). */
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

PyDoc_STRVAR(write_task_wait_doc, "wait(published) -> int\n\nWait for the write; append the "
"names published (renamed, synced where asked) to the list published and return the bytes\n"
"written, or raise an OSError naming what failed. Once only.");

static PyObject *
write_task_wait(WriteTask *self, PyObject *published)
{
    if (self->waited || !PyList_Check(published)) {
        return PyErr_Format(self->waited ? PyExc_ValueError : PyExc_TypeError, "wait: %s",
                            self->waited ? "this write was waited for already"
                                         : "published must be a list");
    }
    self->waited = 1;  /* (first: another thread's wait() meanwhile is refused, not joined) */
    if (write_task_join(self) < 0) {
        self->waited = 0;
        return PyErr_Format(PyExc_RuntimeError, "wait: forked from process %ld, which runs "
                            "this write (record with a TraceRecording of its own)",
                            (long)self->owner);
    }
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
"Write files, each (tmp_name, name, chunks, sync_dir), on a thread without the GIL (or here):\n"
"each temporary file created (O_EXCL, bits mode), written, fsynced; then each renamed in order,\n"
"the directory fsynced after those with sync_dir. task.wait(published) reports it.");

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
    self->running = self->waited = 0;
    if (group_parse(&self->g, dir, files, mode) < 0) {
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
        /* Let the new thread run now, not after the env's next steps (see BENCHMARKS.md). */
        (void)sched_yield();
    } else {
        Py_BEGIN_ALLOW_THREADS
        group_run(&self->g);
        Py_END_ALLOW_THREADS
    }
    return (PyObject *)self;
}
#endif /* !_WIN32 */

/* ------------------------------------------------------------------ views */
static PyObject *s_shape, *s_dtype, *s_npyfile, *s_npyoff, *s_size;

/* An exact int attribute of o as a Py_ssize_t; -1 if it is none (no error set). */
static Py_ssize_t
ssize_attr(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    Py_ssize_t x = v != NULL && PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -1;
    Py_XDECREF(v);
    PyErr_Clear();
    return x;
}

/* The view of one ndarray reference r in the blob (buf, size) named name, checked as
   BatchBlob.array checks it: a new reference, or NULL (no error set) if it breaks a rule. */
static PyObject *
ref_view(PyObject *r, PyObject *blob, const char *buf, Py_ssize_t size, PyObject *name,
         PyObject *dtypes, int min_ndim, Py_ssize_t *off, Py_ssize_t *nbytes)
{
    PyObject *shape = PyObject_GetAttr(r, s_shape), *dt = PyObject_GetAttr(r, s_dtype);
    PyObject *fn = PyObject_GetAttr(r, s_npyfile), *v = NULL;
    PyArray_Descr *descr = dt == NULL ? NULL : (PyArray_Descr *)PyDict_GetItemWithError(dtypes, dt);
    npy_intp dims[NPY_MAXDIMS];
    int ndim = shape != NULL && PyList_CheckExact(shape) ? (int)PyList_GET_SIZE(shape) : -1;
    if (descr == NULL || fn == NULL || ndim < min_ndim || ndim > NPY_MAXDIMS ||
        PyUnicode_Compare(fn, name) != 0) {
        goto done;
    }
    Py_ssize_t n = (Py_ssize_t)PyDataType_ELSIZE(descr);
    for (int k = 0; k < ndim; k++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyList_GET_ITEM(shape, k));
        if (d <= 0 || n > size / d) { /* (an empty array, or past the blob: Python's) */
            goto done;
        }
        dims[k] = (npy_intp)d;
        n *= d;
    }
    *off = ssize_attr(r, s_npyoff);
    *nbytes = ssize_attr(r, s_size);
    if (*nbytes != n || *off < 0 || (*off & 7) != 0 || *off > size - n) {
        goto done;
    }
    Py_INCREF(descr); /* (flags 0 below: not writeable; UpdateFlags works out the rest) */
    v = PyArray_NewFromDescr(&PyArray_Type, descr, ndim, dims, NULL, (char *)buf + *off, 0, NULL);
    if (v != NULL && PyArray_SetBaseObject((PyArrayObject *)v, Py_NewRef(blob)) < 0) {
        Py_CLEAR(v); /* (the reference to blob was stolen all the same) */
    } else if (v != NULL) {
        PyArray_UpdateFlags((PyArrayObject *)v, NPY_ARRAY_UPDATE_ALL);
    }
done:
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    Py_XDECREF(fn);
    PyErr_Clear();
    return v;
}

/* Append the span (start, stop) to the list spans: 0, or -1 with an exception. */
static int
add_span(PyObject *spans, Py_ssize_t start, Py_ssize_t stop)
{
    PyObject *span = Py_BuildValue("(nn)", start, stop);
    int err = span == NULL || PyList_Append(spans, span) < 0;
    Py_XDECREF(span);
    return err ? -1 : 0;
}

PyDoc_STRVAR(views_doc,
"views(refs, blob, name, dtypes, min_ndim, /)\n\n"
"(views, spans): the views of ndarray references as BatchBlob.array checks them, and the byte\n"
"ranges (start, stop) of each run of adjacent ones; or None if any breaks a rule or is empty.");

static PyObject *
views(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[3]) ||
        !PyLong_Check(args[4])) {
        return PyErr_Format(PyExc_TypeError, "views(refs: list, blob, name, dtypes: dict, int)");
    }
    PyObject *refs = args[0], *blob = args[1];
    int min_ndim = (int)PyLong_AsLong(args[4]);
    Py_ssize_t n = PyList_GET_SIZE(refs);
    Py_buffer buf;
    if (PyObject_GetBuffer(blob, &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *out = PyList_New(n), *spans = PyList_New(0), *result = NULL;
    Py_ssize_t start = -1, stop = -1, off = 0, nbytes = 0;
    if (out == NULL || spans == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = ref_view(PyList_GET_ITEM(refs, i), blob, buf.buf, buf.len, args[2],
                               args[3], min_ndim, &off, &nbytes);
        if (v == NULL) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyList_SET_ITEM(out, i, v);
        if (off != stop) { /* (a new run) */
            if (start >= 0 && add_span(spans, start, stop) < 0) {
                goto done;
            }
            start = off;
        }
        stop = off + nbytes;
    }
    if (start < 0 || add_span(spans, start, stop) == 0) {
        result = PyTuple_Pack(2, out, spans);
    }
done:
    PyBuffer_Release(&buf);
    Py_XDECREF(out);
    Py_XDECREF(spans);
    return result;
}

static PyMethodDef module_methods[] = {
    {"views", (PyCFunction)(void (*)(void))views, METH_FASTCALL, views_doc},
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
    if (!s_shape || !s_dtype || !s_npyfile || !s_npyoff || !s_size ||
        PyType_Ready(&StepRecorderType) < 0) {
        return NULL;
    }
#ifndef _WIN32
    if (PyType_Ready(&WriteTaskType) < 0) {
        return NULL;
    }
#endif
    PyObject *m = PyModule_Create(&speedups_module);
    if (m != NULL && PyModule_AddObjectRef(m, "StepRecorder", (PyObject *)&StepRecorderType) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
