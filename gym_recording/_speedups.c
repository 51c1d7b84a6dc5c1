/*
 * gym_recording._speedups: the recorded step in C, for the commonest layouts.
 *
 * FusedStep(env_step, py_step, slow, on_flags, rewards) is a callable that a
 * TraceRecordingWrapper installs as its `step` while an episode is recorded. Called with an
 * action, it calls env_step(action), and when the result is a 5-tuple whose observation and
 * action match the layout the recording configured (a C-contiguous ndarray of the expected
 * dtype and shape, and a scalar of the expected type or such an array), it appends their
 * bytes/values to the recording's buffers itself. Anything else -- another layout, a legacy
 * 4-tuple, a full buffer, no open episode -- goes to slow(action, result), the recording's
 * general Python path, before anything is stored. Until configure() is called with a layout,
 * every call goes to py_step(action), the pure-Python equivalent.
 *
 * It stores exactly what the Python path stores: the same bytes in the same bytearrays, the
 * same objects in the same lists. tests/test_hot_path.py runs every layout both ways.
 *
 * write_file(directory, tmp_name, name, chunks, mode) writes one file atomically (POSIX only):
 * the same protocol as the atomicwrites path of gym_recording._storage (temporary file, write,
 * fsync, rename, fsync of the directory), with the GIL released once for the whole sequence.
 * On the background writer thread each GIL release and retake can stall the thread stepping
 * the env; atomicwrites makes about fifteen per file, this makes one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#ifndef _WIN32
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
    vectorcallfunc vectorcall;
    PyObject *env_step;
    PyObject *py_step;
    PyObject *slow;
    PyObject *on_flags;
    PyObject *rewards;      /* list */
    Py_ssize_t room;        /* steps the buffer may hold; -1 while no episode is open */
    int fast;               /* a layout is configured */
    ArraySpec obs;
    PyObject *a_type;       /* scalar actions: their exact type ... */
    PyObject *a_list;       /* ... and the list they go to */
    ArraySpec act;          /* array actions */
} FusedStep;

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

static PyObject *
fused_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FusedStep *self = (FusedStep *)op;
    if (!self->fast || PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        return PyObject_Vectorcall(self->py_step, args, nargsf, kwnames);
    }
    PyObject *action = args[0];
    PyObject *result = PyObject_CallOneArg(self->env_step, action);
    if (result == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 5 ||
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
            goto fail;
        }
    }
    else if (append_row(self->act.buf, PyArray_DATA((PyArrayObject *)action),
                        self->act.nbytes) < 0) {
        goto fail;
    }
    if (append_row(self->obs.buf, PyArray_DATA((PyArrayObject *)obs), self->obs.nbytes) < 0 ||
        PyList_Append(self->rewards, reward) < 0) {
        goto fail;
    }
    if (terminated != Py_False || truncated != Py_False) {
        int t = PyObject_IsTrue(terminated);
        int u = t < 0 ? -1 : PyObject_IsTrue(truncated);
        if (u < 0) {
            goto fail;
        }
        if (t || u) {
            PyObject *r = PyObject_CallFunctionObjArgs(self->on_flags, terminated, truncated, NULL);
            if (r == NULL) {
                goto fail;
            }
            Py_DECREF(r);
        }
    }
    return result;

slow: {
        PyObject *r = PyObject_CallFunctionObjArgs(self->slow, action, result, NULL);
        if (r == NULL) {
            goto fail;
        }
        Py_DECREF(r);
        return result;
    }
fail:
    Py_DECREF(result);
    return NULL;
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
"o_buf None, or neither kind of action, every call goes to py_step.");

static PyObject *
fused_configure(PyObject *op, PyObject *args)
{
    FusedStep *self = (FusedStep *)op;
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
fused_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *env_step, *py_step, *slow, *on_flags, *rewards;
    static char *kwlist[] = {"env_step", "py_step", "slow", "on_flags", "rewards", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO!:FusedStep", kwlist, &env_step, &py_step,
                                     &slow, &on_flags, &PyList_Type, &rewards)) {
        return NULL;
    }
    FusedStep *self = (FusedStep *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = fused_vectorcall;
    Py_INCREF(env_step);
    self->env_step = env_step;
    Py_INCREF(py_step);
    self->py_step = py_step;
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
fused_traverse(PyObject *op, visitproc visit, void *arg)
{
    FusedStep *self = (FusedStep *)op;
    Py_VISIT(self->env_step);
    Py_VISIT(self->py_step);
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
fused_clear(PyObject *op)
{
    FusedStep *self = (FusedStep *)op;
    self->fast = 0;
    Py_CLEAR(self->env_step);
    Py_CLEAR(self->py_step);
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
fused_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    fused_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef fused_methods[] = {
    {"configure", fused_configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef fused_members[] = {
    {"room", T_PYSSIZET, offsetof(FusedStep, room), 0,
     "Steps the buffer may hold before the general path must run; -1 without an episode."},
    {"fast", T_INT, offsetof(FusedStep, fast), READONLY, "Whether a layout is configured."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(fused_doc,
"FusedStep(env_step, py_step, slow, on_flags, rewards)\n\n"
"step(action): env_step(action), then the step recorded; returns env_step's result.");

static PyTypeObject FusedStepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gym_recording._speedups.FusedStep",
    .tp_basicsize = sizeof(FusedStep),
    .tp_dealloc = fused_dealloc,
    .tp_vectorcall_offset = offsetof(FusedStep, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = fused_doc,
    .tp_traverse = fused_traverse,
    .tp_clear = fused_clear,
    .tp_methods = fused_methods,
    .tp_members = fused_members,
    .tp_new = fused_new,
};

#ifndef _WIN32
/* ------------------------------------------------------------------ write_file */

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* The whole protocol, without the GIL. Returns 0, or an errno with *failed naming the file
 * the failing call was about: 't' the temporary file, 'n' the final name, 'd' the directory. */
static int
write_file_nogil(const char *dir, const char *tmp, const char *name, struct iovec *iov,
                 int n, mode_t mode, char *failed, Py_ssize_t *written)
{
    int err = 0, fd = -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        *failed = 'd';
        return errno;
    }
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) {
        *failed = 't';
        err = errno;
        close(dfd);
        return err;
    }
    *failed = 'n';  /* from here on, failures are about the file being written */
    int i = 0;
    while (i < n) {
        int group = n - i < IOV_MAX ? n - i : IOV_MAX;
        ssize_t w = writev(fd, iov + i, group);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            err = errno;
            goto fail;
        }
        if (w == 0) {  /* the group's chunks were all empty, or no progress (an error) */
            int end = i + group;
            while (i < end && iov[i].iov_len == 0) {
                i++;
            }
            if (i < end) {
                err = EIO;
                goto fail;
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
    if (fsync(fd) < 0) {
        err = errno;
        goto fail;
    }
    if (close(fd) < 0) {
        fd = -1;
        err = errno;
        goto fail;
    }
    fd = -1;
    if (renameat(dfd, tmp, dfd, name) < 0) {
        err = errno;
        goto fail;
    }
    if (fsync(dfd) < 0) {  /* the rename is durable: the file is published */
        err = errno;
        *failed = 'd';
        close(dfd);
        return err;
    }
    if (close(dfd) < 0) {
        *failed = 'd';
        return errno;
    }
    return 0;

fail:
    /* nothing of the file is published: remove the temporary file (best effort) */
    if (fd >= 0) {
        close(fd);
    }
    unlinkat(dfd, tmp, 0);
    close(dfd);
    return err;
}

PyDoc_STRVAR(write_file_doc,
"write_file(directory, tmp_name, name, chunks, mode) -> int\n\n"
"Write the buffers ``chunks`` as file ``name`` in ``directory`` atomically: create\n"
"``tmp_name`` there (O_EXCL, permission bits ``mode``), write, fsync, close, rename it to\n"
"``name``, fsync the directory. The GIL is released for the whole sequence. Returns the\n"
"number of bytes written. Raises OSError (filename: the temporary file when it could not\n"
"be created, the directory when it could not be opened or synced, else ``name``); the\n"
"temporary file is removed when the file was not published.");

static PyObject *
write_file(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *dir = NULL, *tmp = NULL, *name = NULL, *chunks, *seq = NULL, *result = NULL;
    int mode;
    Py_buffer *bufs = NULL;
    struct iovec *iov = NULL;
    Py_ssize_t n = 0, got = 0;
    if (!PyArg_ParseTuple(args, "O&O&O&Oi:write_file", PyUnicode_FSConverter, &dir,
                          PyUnicode_FSConverter, &tmp, PyUnicode_FSConverter, &name, &chunks,
                          &mode)) {
        goto done;
    }
    seq = PySequence_Fast(chunks, "write_file: chunks must be a sequence of buffers");
    if (seq == NULL) {
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "write_file: too many chunks");
        goto done;
    }
    bufs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    iov = PyMem_Calloc(n ? (size_t)n : 1, sizeof(struct iovec));
    if (bufs == NULL || iov == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &bufs[got], PyBUF_SIMPLE) < 0) {
            goto done;
        }
        iov[got].iov_base = bufs[got].buf;
        iov[got].iov_len = (size_t)bufs[got].len;
    }
    Py_ssize_t written = 0;
    char failed = 0;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = write_file_nogil(PyBytes_AS_STRING(dir), PyBytes_AS_STRING(tmp),
                           PyBytes_AS_STRING(name), iov, (int)n, (mode_t)mode, &failed,
                           &written);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *about = failed == 't' ? tmp : failed == 'd' ? dir : name;
        PyObject *fn = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(about),
                                                        PyBytes_GET_SIZE(about));
        if (fn != NULL) {
            errno = err;
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, fn);
            Py_DECREF(fn);
        }
        goto done;
    }
    result = PyLong_FromSsize_t(written);

done:
    for (Py_ssize_t i = 0; i < got; i++) {
        PyBuffer_Release(&bufs[i]);
    }
    PyMem_Free(bufs);
    PyMem_Free(iov);
    Py_XDECREF(seq);
    Py_XDECREF(dir);
    Py_XDECREF(tmp);
    Py_XDECREF(name);
    return result;
}
#endif /* !_WIN32 */

static PyMethodDef speedups_methods[] = {
#ifndef _WIN32
    {"write_file", write_file, METH_VARARGS, write_file_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gym_recording._speedups",
    .m_doc = "The recorded step and the atomic file write in C (optional: gym_recording "
             "falls back to Python without it).",
    .m_size = -1,
    .m_methods = speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    import_array();
    if (PyType_Ready(&FusedStepType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&FusedStepType);
    if (PyModule_AddObject(m, "FusedStep", (PyObject *)&FusedStepType) < 0) {
        Py_DECREF(&FusedStepType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
