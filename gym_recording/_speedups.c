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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

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

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gym_recording._speedups",
    .m_doc = "The recorded step in C (optional: gym_recording falls back to Python without it).",
    .m_size = -1,
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
