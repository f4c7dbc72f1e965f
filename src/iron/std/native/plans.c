/* Iron's call plans' hot path in C (iron/std/_plans.py): a std host function's call bound to its parameters,
 * its key and the lookup of its plan, without the interpreter's per-value dispatch, so that a replayed call
 * costs little more than reading its arrays and running the plan.
 *
 * signature(values, generation) -> (key, arrays) builds exactly what _plans.signature_py builds: per value
 * (type, value) for None, bool, int, float and str; (type, reader(v), same) for an array, where same is the
 * index of an earlier identical array or -1; (type, parts) for a tuple or list; (type, value) for anything
 * else hashable; and key None (with the arrays seen so far) when a value has no key.  torch.Tensor's reader
 * runs here; any other type's comes from the Python function given to configure().  (A torch tensor of a
 * dtype Iron does not take is an array here and a plain value there: either way the call raises, unplanned.)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *torch_tensor = NULL; /* the torch.Tensor type, or NULL before torch is configured */
static PyObject *reader_of = NULL;    /* _plans._reader: v -> its signature reader, or None (not an array) */
static PyObject *s_dtype, *s_shape, *s_device, *s_is_contiguous, *s_stride, *s_data_ptr, *s_run;
static PyObject *no_key; /* the marker part() returns for a value with no key */

static PyObject *torch_signature(PyObject *t) {
    PyObject *layout, *dtype = NULL, *shape = NULL, *device = NULL, *ptr = NULL, *low = NULL, *out = NULL;
    PyObject *contiguous = PyObject_CallMethodNoArgs(t, s_is_contiguous);
    if (contiguous == NULL) return NULL;
    int is = PyObject_IsTrue(contiguous);
    Py_DECREF(contiguous);
    if (is < 0) return NULL;
    layout = is ? Py_NewRef(Py_True) : PyObject_CallMethodNoArgs(t, s_stride);
    if (layout == NULL) return NULL;
    if ((dtype = PyObject_GetAttr(t, s_dtype)) && (shape = PyObject_GetAttr(t, s_shape)) &&
        (device = PyObject_GetAttr(t, s_device)) && (ptr = PyObject_CallMethodNoArgs(t, s_data_ptr))) {
        unsigned long long address = PyLong_AsUnsignedLongLongMask(ptr);
        if (!(address == (unsigned long long)-1 && PyErr_Occurred()) && (low = PyLong_FromLong(address & 127)))
            out = PyTuple_Pack(5, dtype, shape, device, layout, low);
    }
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(device);
    Py_XDECREF(ptr);
    Py_XDECREF(low);
    Py_DECREF(layout);
    return out;
}

static PyObject *array_part(PyObject *v, PyObject *sig, PyObject *arrays) {
    Py_ssize_t same = -1, n = PyList_GET_SIZE(arrays);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_ITEM(arrays, i) == v) {
            same = i;
            break;
        }
    }
    if (PyList_Append(arrays, v) < 0) return NULL;
    PyObject *index = PyLong_FromSsize_t(same);
    if (index == NULL) return NULL;
    PyObject *out = PyTuple_Pack(3, (PyObject *)Py_TYPE(v), sig, index);
    Py_DECREF(index);
    return out;
}

static PyObject *part(PyObject *v, PyObject *arrays) {
    PyTypeObject *t = Py_TYPE(v);
    if (v == Py_None || t == &PyBool_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type)
        return PyTuple_Pack(2, (PyObject *)t, v);
    if ((PyObject *)t == torch_tensor) {
        PyObject *sig = torch_signature(v);
        if (sig == NULL) return NULL;
        PyObject *out = array_part(v, sig, arrays);
        Py_DECREF(sig);
        return out;
    }
    PyObject *reader = PyObject_CallOneArg(reader_of, v);
    if (reader == NULL) return NULL;
    if (reader != Py_None) {
        PyObject *sig = PyObject_CallOneArg(reader, v);
        Py_DECREF(reader);
        if (sig == NULL) return NULL;
        PyObject *out = array_part(v, sig, arrays);
        Py_DECREF(sig);
        return out;
    }
    Py_DECREF(reader);
    if (t == &PyTuple_Type || t == &PyList_Type) {
        PyObject *seq = PySequence_Fast(v, "a tuple or list");
        if (seq == NULL) return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        PyObject *inner = PyTuple_New(n);
        int keyless = 0;
        for (Py_ssize_t i = 0; inner != NULL && i < n; i++) {
            PyObject *p = part(PySequence_Fast_GET_ITEM(seq, i), arrays);
            if (p == NULL) {
                Py_CLEAR(inner);
            } else if (p == no_key) { /* the rest still go through part(), so arrays holds every array */
                keyless = 1;
                PyTuple_SET_ITEM(inner, i, p);
            } else {
                PyTuple_SET_ITEM(inner, i, p);
            }
        }
        Py_DECREF(seq);
        if (inner == NULL) return NULL;
        if (keyless) {
            Py_DECREF(inner);
            return Py_NewRef(no_key);
        }
        PyObject *out = PyTuple_Pack(2, (PyObject *)t, inner);
        Py_DECREF(inner);
        return out;
    }
    if (PyObject_Hash(v) == -1) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
        PyErr_Clear();
        return Py_NewRef(no_key);
    }
    return PyTuple_Pack(2, (PyObject *)t, v);
}

/* (key, arrays) of values (a list); key None when a value has no key. */
static PyObject *signature_of(PyObject *values, PyObject *generation) {
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *arrays = PyList_New(0);
    if (arrays == NULL) return NULL;
    PyObject *parts = PyTuple_New(n + 1);
    if (parts == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = part(PyList_GET_ITEM(values, i), arrays);
        if (p == NULL) goto fail;
        if (p == no_key) { /* no key: the arrays seen so far, like the Python version */
            Py_DECREF(p);
            Py_DECREF(parts);
            PyObject *out = PyTuple_Pack(2, Py_None, arrays);
            Py_DECREF(arrays);
            return out;
        }
        PyTuple_SET_ITEM(parts, i, p);
    }
    PyTuple_SET_ITEM(parts, n, Py_NewRef(generation));
    PyObject *out = PyTuple_Pack(2, parts, arrays);
    Py_DECREF(parts);
    Py_DECREF(arrays);
    return out;
fail:
    Py_XDECREF(parts);
    Py_DECREF(arrays);
    return NULL;
}

static PyObject *signature(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "signature(values: list, generation) takes a list and a value");
        return NULL;
    }
    return signature_of(args[0], args[1]);
}

/* replay(state, args, kwargs): a planned host function's call when its plan is there, else MISS (the Python
 * wrapper then runs: it records, explains or runs the function as written).  state is the tuple
 * (names, defaults, required, plans, generation, recording, empty): the parameters' indices by name, their
 * defaults (a list, `empty` where there is none), how many are required, the plans by key, the options'
 * generation function and the ContextVar of the recording in progress. */
static PyObject *miss;

static PyObject *replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 7 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "replay(state, args: tuple, kwargs: dict | None)");
        return NULL;
    }
    PyObject *state = args[0], *pargs = args[1], *kwargs = args[2];
    PyObject *names = PyTuple_GET_ITEM(state, 0), *defaults = PyTuple_GET_ITEM(state, 1);
    Py_ssize_t required = PyLong_AsSsize_t(PyTuple_GET_ITEM(state, 2));
    PyObject *plans = PyTuple_GET_ITEM(state, 3), *generation_of = PyTuple_GET_ITEM(state, 4);
    PyObject *recording = PyTuple_GET_ITEM(state, 5), *empty = PyTuple_GET_ITEM(state, 6);
    if (required == -1 && PyErr_Occurred()) return NULL;
    PyObject *current = NULL;
    if (PyContextVar_Get(recording, Py_None, &current) < 0) return NULL;
    int inside = current != Py_None;
    Py_DECREF(current);
    Py_ssize_t n = PyTuple_GET_SIZE(pargs), count = PyList_GET_SIZE(defaults);
    if (inside || n > count) return Py_NewRef(miss);
    PyObject *values = PyList_GetSlice(defaults, 0, count);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyList_SetItem(values, i, Py_NewRef(PyTuple_GET_ITEM(pargs, i)));
    PyObject *out = NULL, *generation = NULL, *sig = NULL;
    if (kwargs != Py_None && kwargs != NULL) {
        PyObject *name, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &name, &value)) {
            PyObject *index = PyDict_GetItemWithError(names, name);
            if (index == NULL) {
                if (PyErr_Occurred()) goto done;
                out = Py_NewRef(miss);
                goto done;
            }
            Py_ssize_t i = PyLong_AsSsize_t(index);
            if (i < 0 || i >= count) {
                out = Py_NewRef(miss);
                goto done;
            }
            PyList_SetItem(values, i, Py_NewRef(value));
        }
    }
    if (n < required) {
        for (Py_ssize_t i = 0; i < count; i++) {
            if (PyList_GET_ITEM(values, i) == empty) {
                out = Py_NewRef(miss);
                goto done;
            }
        }
    }
    generation = PyObject_CallNoArgs(generation_of);
    if (generation == NULL) goto done;
    sig = signature_of(values, generation);
    if (sig == NULL) { /* an array whose signature cannot be read: the Python path says why */
        PyErr_Clear();
        out = Py_NewRef(miss);
        goto done;
    }
    PyObject *key = PyTuple_GET_ITEM(sig, 0);
    PyObject *plan = key == Py_None ? NULL : PyDict_GetItemWithError(plans, key);
    if (plan == NULL || plan == Py_None) {
        if (PyErr_Occurred()) goto done;
        out = Py_NewRef(miss);
        goto done;
    }
    PyObject *run = PyObject_GetAttr(plan, s_run);
    if (run == NULL) goto done;
    out = PyObject_CallOneArg(run, PyTuple_GET_ITEM(sig, 1));
    Py_DECREF(run);
done:
    Py_XDECREF(sig);
    Py_XDECREF(generation);
    Py_DECREF(values);
    return out;
}

static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "configure(reader_of, torch_tensor_type_or_None) takes 2 arguments");
        return NULL;
    }
    PyObject *old = reader_of;
    reader_of = Py_NewRef(args[0]);
    Py_XDECREF(old);
    Py_CLEAR(torch_tensor);
    if (args[1] != Py_None) torch_tensor = Py_NewRef(args[1]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL,
     "signature(values, generation) -> (key or None, arrays)"},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(state, args, kwargs) -> a planned call's result, or MISS"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(reader_of, torch_tensor_type_or_None): the Python readers, and the type read here"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "iron_native_plans", NULL, -1, methods};

PyMODINIT_FUNC PyInit_iron_native_plans(void) {
    if (!(s_dtype = PyUnicode_InternFromString("dtype")) || !(s_shape = PyUnicode_InternFromString("shape")) ||
        !(s_device = PyUnicode_InternFromString("device")) ||
        !(s_is_contiguous = PyUnicode_InternFromString("is_contiguous")) ||
        !(s_stride = PyUnicode_InternFromString("stride")) || !(s_data_ptr = PyUnicode_InternFromString("data_ptr")) ||
        !(s_run = PyUnicode_InternFromString("run")))
        return NULL;
    no_key = PyList_New(0); /* a private object: no part is it */
    if (no_key == NULL) return NULL;
    miss = PyList_New(0);
    if (miss == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "MISS", miss) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
