/* Iron's native launch: cuLaunchKernel called from C with ten integers, for the generated fast launchers.
 *
 * The CUDA driver is opened with dlopen (no CUDA headers or import library are needed to build this), and
 * cuLaunchKernel is looked up once.  launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) takes
 * the raw handles as Python ints (CUfunction, CUstream, and the address of the kernelParams array) and
 * returns the CUresult as an int: the same contract as cuda-bindings' wrapper, without its per-call
 * conversion of each argument to a typed object.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);

static cu_launch_kernel_t cu_launch_kernel = NULL;

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long v[10];
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) takes 10 ints");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < 10; i++) {
        v[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    for (int i = 1; i < 8; i++) {
        if (v[i] > 0xFFFFFFFFull) {
            PyErr_SetString(PyExc_OverflowError, "a launch extent or the shared size does not fit 32 bits");
            return NULL;
        }
    }
    int err = cu_launch_kernel((void *)(uintptr_t)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
                               (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7],
                               (void *)(uintptr_t)v[8], (void **)(uintptr_t)v[9], NULL);
    return PyLong_FromLong(err);
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "iron_native_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_iron_native_launch(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "the CUDA driver (libcuda.so.1) did not load: %s", dlerror());
        return NULL;
    }
    cu_launch_kernel = (cu_launch_kernel_t)dlsym(lib, "cuLaunchKernel");
    if (cu_launch_kernel == NULL) {
        PyErr_SetString(PyExc_ImportError, "the CUDA driver has no cuLaunchKernel");
        return NULL;
    }
    return PyModule_Create(&module);
}
