/* Iron's native launch: cuLaunchKernel called from C with ten integers, for the generated fast launchers.
 *
 * The CUDA driver is opened with dlopen (no CUDA headers or import library are needed to build this), and
 * cuLaunchKernel is looked up once.  launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) takes
 * the raw handles as Python ints (CUfunction, CUstream, and the address of the kernelParams array) and
 * returns the CUresult as an int: the same contract as cuda-bindings' wrapper, without its per-call
 * conversion of each argument to a typed object.  launch_chained takes the same ints and launches through
 * cuLaunchKernelEx as a programmatic dependent launch (iron/runtime/cuda/chained.py says when that is allowed);
 * where the driver lacks cuLaunchKernelEx it returns CUDA_ERROR_NOT_SUPPORTED.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);

/* cuda.h's launch configuration, declared here as the driver's ABI lays it out (no CUDA headers at build time). */
typedef struct {
    unsigned id;     /* CUlaunchAttributeID */
    char pad[4];     /* to 8 bytes */
    union {
        char pad[64];
        int programmatic_stream_serialization_allowed;
    } value;
} cu_launch_attribute_t;

typedef struct {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    void *stream;
    cu_launch_attribute_t *attrs;
    unsigned num_attrs;
} cu_launch_config_t;

typedef int (*cu_launch_kernel_ex_t)(const cu_launch_config_t *, void *, void **, void **);

enum { PROGRAMMATIC_STREAM_SERIALIZATION = 6, CUDA_ERROR_NOT_SUPPORTED = 801 };

static cu_launch_kernel_t cu_launch_kernel = NULL;
static cu_launch_kernel_ex_t cu_launch_kernel_ex = NULL;

/* The ten ints of a launch into v; 0 with a Python error set where they are not ten ints that fit. */
static int read_ints(PyObject *const *args, Py_ssize_t nargs, unsigned long long v[10]) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) takes 10 ints");
        return 0;
    }
    for (Py_ssize_t i = 0; i < 10; i++) {
        v[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    }
    for (int i = 1; i < 8; i++) {
        if (v[i] > 0xFFFFFFFFull) {
            PyErr_SetString(PyExc_OverflowError, "a launch extent or the shared size does not fit 32 bits");
            return 0;
        }
    }
    return 1;
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long v[10];
    if (!read_ints(args, nargs, v)) return NULL;
    int err = cu_launch_kernel((void *)(uintptr_t)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
                               (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7],
                               (void *)(uintptr_t)v[8], (void **)(uintptr_t)v[9], NULL);
    return PyLong_FromLong(err);
}

static PyObject *launch_chained(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long v[10];
    if (!read_ints(args, nargs, v)) return NULL;
    if (cu_launch_kernel_ex == NULL) return PyLong_FromLong(CUDA_ERROR_NOT_SUPPORTED);
    cu_launch_attribute_t attr;
    memset(&attr, 0, sizeof attr);
    attr.id = PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmatic_stream_serialization_allowed = 1;
    cu_launch_config_t config = {(unsigned)v[1], (unsigned)v[2], (unsigned)v[3], (unsigned)v[4], (unsigned)v[5],
                                 (unsigned)v[6], (unsigned)v[7], (void *)(uintptr_t)v[8], &attr, 1};
    int err = cu_launch_kernel_ex(&config, (void *)(uintptr_t)v[0], (void **)(uintptr_t)v[9], NULL);
    return PyLong_FromLong(err);
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {"launch_chained", (PyCFunction)(void (*)(void))launch_chained, METH_FASTCALL,
     "launch_chained(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult: a programmatic "
     "dependent launch"},
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
    cu_launch_kernel_ex = (cu_launch_kernel_ex_t)dlsym(lib, "cuLaunchKernelEx");  /* CUDA 11.8+; else NULL */
    return PyModule_Create(&module);
}
