/* framework._json_flat: `flat(obj, depth)`, the check `framework.serdes` makes before it
 * lets orjson write a dict or a list: the same answer as `serdes._flat`, which it replaces
 * where this extension was built. The Python check walks every value of an output in the
 * interpreter (about 0.8 us for a window's result of six values); this one reads the
 * types and doubles in place and calls no Python code, so no value can change under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>

#define SMALLEST_EXACT 1e-4 /* serdes._SMALLEST_EXACT */
#define MAX_DEPTH 64

static int value_flat(PyObject *value, int depth);

/* 1 when every key of `obj` is a str and every value flat, else 0. */
static int dict_flat(PyObject *obj, int depth) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !value_flat(value, depth)) {
            return 0;
        }
    }
    return 1;
}

static int list_flat(PyObject *obj, int depth) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
        if (!value_flat(PyList_GET_ITEM(obj, i), depth)) {
            return 0;
        }
    }
    return 1;
}

/* One value inside a container checked with `depth` levels in all. */
static int value_flat(PyObject *value, int depth) {
    if (PyLong_CheckExact(value) || PyUnicode_CheckExact(value) || PyBool_Check(value)
        || value == Py_None) {
        return 1;
    }
    if (PyFloat_CheckExact(value)) {
        double number = fabs(PyFloat_AS_DOUBLE(value));
        return number == 0.0 || (number >= SMALLEST_EXACT && number <= DBL_MAX);
    }
    if (depth <= 1) {
        return 0;
    }
    if (PyDict_CheckExact(value)) {
        return dict_flat(value, depth - 1);
    }
    if (PyList_CheckExact(value)) {
        return list_flat(value, depth - 1);
    }
    return 0;
}

static PyObject *flat(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "flat(obj, depth) takes 2 arguments");
        return NULL;
    }
    long wide = PyLong_AsLong(args[1]);
    if (wide == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (wide < 1 || wide > MAX_DEPTH) { /* keeps the C recursion short */
        PyErr_Format(PyExc_ValueError, "flat(): depth must be 1 to %d, not %ld", MAX_DEPTH,
                     wide);
        return NULL;
    }
    int depth = (int)wide;
    PyObject *obj = args[0];
    int answer;
    if (PyDict_CheckExact(obj)) {
        answer = dict_flat(obj, depth);
    } else if (PyList_CheckExact(obj)) {
        answer = list_flat(obj, depth);
    } else {
        PyErr_Format(PyExc_TypeError, "flat() takes a dict or a list, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(answer);
}

/* dumps(obj, write, depth, buffer): `write(obj)` (orjson's dumps) when `obj` is flat to
 * `depth`, its bytes copied to an object of their own size when at most `buffer` long
 * (see serdes._ORJSON_BUFFER); None when it is not flat or `write` raised a TypeError (an
 * integer past 64 bits). One call for what serdes.JsonSerde.to_bytes made four of. */
static PyObject *dumps(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "dumps(obj, write, depth, buffer) takes 4 arguments");
        return NULL;
    }
    PyObject *check[2] = {args[0], args[2]};
    PyObject *answer = flat(module, check, 2);
    if (answer != Py_True) {
        if (answer == NULL) {
            return NULL;
        }
        Py_DECREF(answer);
        Py_RETURN_NONE;
    }
    Py_DECREF(answer);
    Py_ssize_t buffer = PyLong_AsSsize_t(args[3]);
    if (buffer == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *data = PyObject_CallOneArg(args[1], args[0]);
    if (data == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
            return NULL;
        }
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) > buffer) {
        return data;
    }
    PyObject *copy = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    Py_DECREF(data);
    return copy;
}

static PyMethodDef methods[] = {
    {"dumps", (PyCFunction)(void (*)(void))dumps, METH_FASTCALL,
     "dumps(obj, write, depth, buffer): write(obj) for a flat obj, short bytes copied; "
     "else None."},
    {"flat", (PyCFunction)(void (*)(void))flat, METH_FASTCALL,
     "flat(obj, depth): serdes._flat's answer for a dict or a list, in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_json_flat",
    "The check before orjson writes a JSON value (framework.serdes), in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__json_flat(void) { return PyModule_Create(&module_def); }
