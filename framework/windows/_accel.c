/* framework.windows._accel: the pane and session layouts' fold and close for the
 * built-in reducers (count, sum_of, min_of, max_of, mean_of and their `aggregate`), in C.
 *
 * Each function does what its Python twin in framework/windows/layouts.py and
 * framework/windows/reducers.py does, value for value: the same Python additions and
 * comparisons (through the abstract object API, so big integers, floats and errors
 * behave as there), in the same order, on the same lists. tests/windows/test_accel.py
 * checks that record by record against the Python path. Where Python makes new lists,
 * C may change the old ones in place (an aggregate's parts and a mean's pair on a fold,
 * the panes a close leaves), and it shares the int objects of recent times: the states
 * hold the same values in fewer, closer objects. No result holds a state's list.
 *
 * Columns (layouts.Columns): the panes of a mean or an `aggregate` with every number of a
 * pane inline in the key's list, a mean as two columns (its sum and its count).
 *
 * Sessions: the in-place cases of Sessions.fold, and Sessions.close_all of every state
 * whose session bounds are ints that fit 64 bits; the rest through the Python functions
 * passed in. A Stepper is Windows.process: it runs a record in its common case, its
 * due-time note included, and hands every other record to the Python path untouched.
 *
 * A reducer is described by a "spec" tuple: (single, kind0, of0, kind1, of1, ...), where
 * single is 1 for one reducer (its aggregate is the part itself) and 0 for an
 * `aggregate` (a list, one part per reducer), kind is one of the K_* codes below and of
 * is None (the record's value itself) or the key read from it (value[of]).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <structmember.h>

enum { K_COUNT = 0, K_SUM = 1, K_MIN = 2, K_MAX = 3, K_MEAN = 4 };

static PyObject *ONE;

/* The int ``v``, shared: most times a fold or close makes (pane starts, window bounds,
 * due times) are the same for every key, and one object per time instead of one per key
 * and time keeps the states small and a close's reads in cache. A few recent times are
 * kept, each slot chosen by a hash of the time. New reference. */
#define TIME_SLOTS 16
static long long time_values[TIME_SLOTS];
static PyObject *time_objects[TIME_SLOTS];

static PyObject *
time_obj(long long v)
{
    unsigned slot = (unsigned)(((unsigned long long)v * 0x9E3779B97F4A7C15ULL) >> 60);
    PyObject *obj = time_objects[slot];
    if (obj == NULL || time_values[slot] != v) {
        obj = PyLong_FromLongLong(v);
        if (obj == NULL)
            return NULL;
        Py_XSETREF(time_objects[slot], obj);
        time_values[slot] = v;
    }
    Py_INCREF(obj);
    return obj;
}

/* Python's a % b for b > 0. */
static inline long long
floor_mod(long long a, long long b)
{
    long long r = a % b;
    return r < 0 ? r + b : r;
}

static int
as_time(PyObject *item, long long *out)
{
    long long v = PyLong_AsLongLong(item);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int
item_time(PyObject *list, Py_ssize_t i, long long *out)
{
    return as_time(PyList_GET_ITEM(list, i), out);
}

/* What a reducer reads of a record's value: the value, or value[of]. New reference. */
static PyObject *
read_of(PyObject *of, PyObject *value)
{
    if (of == Py_None) {
        Py_INCREF(value);
        return value;
    }
    return PyObject_GetItem(value, of);
}

/* obj[index] as BINARY_SUBSCR does it; an exact list's item read directly. New reference. */
static PyObject *
subscript(PyObject *obj, Py_ssize_t index)
{
    if (PyList_CheckExact(obj) && index < PyList_GET_SIZE(obj)) {
        PyObject *item = PyList_GET_ITEM(obj, index);
        Py_INCREF(item);
        return item;
    }
    PyObject *i = PyLong_FromSsize_t(index);
    if (i == NULL)
        return NULL;
    PyObject *item = PyObject_GetItem(obj, i);
    Py_DECREF(i);
    return item;
}

/* 0 when a METH_FASTCALL function got its ``want`` arguments, else -1 with a TypeError. */
static int
arity(Py_ssize_t nargs, Py_ssize_t want, const char *name)
{
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", name, want, nargs);
    return -1;
}

static int
parse_spec(PyObject *spec, int *single, Py_ssize_t *parts)
{
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) < 3
            || PyTuple_GET_SIZE(spec) % 2 != 1) {
        PyErr_SetString(PyExc_TypeError, "_accel: malformed reducer spec");
        return -1;
    }
    *single = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 0));
    *parts = (PyTuple_GET_SIZE(spec) - 1) / 2;
    return *single < 0 ? -1 : 0;
}

static inline int
spec_kind(PyObject *spec, Py_ssize_t p)
{
    return (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 1 + 2 * p));
}

static inline PyObject *
spec_of(PyObject *spec, Py_ssize_t p)
{
    return PyTuple_GET_ITEM(spec, 2 + 2 * p);
}

/* -- start and add: reducers.py's Inline start and add expressions ------------------- */

static PyObject *
start_part(int kind, PyObject *of, PyObject *value)
{
    PyObject *x, *pair;
    switch (kind) {
    case K_COUNT:
        Py_INCREF(ONE);
        return ONE;
    case K_SUM: case K_MIN: case K_MAX:
        return read_of(of, value);
    case K_MEAN:  /* [x, 1] */
        x = read_of(of, value);
        if (x == NULL)
            return NULL;
        pair = PyList_New(2);
        if (pair == NULL) {
            Py_DECREF(x);
            return NULL;
        }
        PyList_SET_ITEM(pair, 0, x);
        Py_INCREF(ONE);
        PyList_SET_ITEM(pair, 1, ONE);
        return pair;
    }
    PyErr_SetString(PyExc_ValueError, "_accel: unknown reducer kind");
    return NULL;
}

/* min(a, x) / max(a, x) as the builtins: x only when strictly less / greater. */
static PyObject *
pick(PyObject *a, PyObject *x, int op)
{
    int better = PyObject_RichCompareBool(x, a, op);
    if (better < 0)
        return NULL;
    PyObject *r = better ? x : a;
    Py_INCREF(r);
    return r;
}

/* A mean's new sum and count, a[0] + x and a[1] + 1, in *s and *c (new references);
 * 0, or -1 with an error and nothing made. */
static int
mean_add(PyObject *of, PyObject *a, PyObject *value, PyObject **s, PyObject **c)
{
    PyObject *s0 = subscript(a, 0);
    if (s0 == NULL)
        return -1;
    PyObject *x = read_of(of, value);
    if (x == NULL) {
        Py_DECREF(s0);
        return -1;
    }
    *s = PyNumber_Add(s0, x);
    Py_DECREF(s0);
    Py_DECREF(x);
    if (*s == NULL)
        return -1;
    PyObject *c0 = subscript(a, 1);
    *c = c0 == NULL ? NULL : PyNumber_Add(c0, ONE);
    Py_XDECREF(c0);
    if (*c == NULL) {
        Py_CLEAR(*s);
        return -1;
    }
    return 0;
}

static PyObject *
add_part(int kind, PyObject *of, PyObject *a, PyObject *value)
{
    PyObject *x, *r, *s, *c, *pair;
    switch (kind) {
    case K_COUNT:  /* a + 1 */
        return PyNumber_Add(a, ONE);
    case K_SUM:  /* a + x */
        x = read_of(of, value);
        if (x == NULL)
            return NULL;
        r = PyNumber_Add(a, x);
        Py_DECREF(x);
        return r;
    case K_MIN: case K_MAX:  /* min(a, x), max(a, x) */
        x = read_of(of, value);
        if (x == NULL)
            return NULL;
        r = pick(a, x, kind == K_MIN ? Py_LT : Py_GT);
        Py_DECREF(x);
        return r;
    case K_MEAN:  /* [a[0] + x, a[1] + 1] */
        if (mean_add(of, a, value, &s, &c) < 0)
            return NULL;
        pair = PyList_New(2);
        if (pair == NULL) {
            Py_DECREF(s);
            Py_DECREF(c);
            return NULL;
        }
        PyList_SET_ITEM(pair, 0, s);
        PyList_SET_ITEM(pair, 1, c);
        return pair;
    }
    PyErr_SetString(PyExc_ValueError, "_accel: unknown reducer kind");
    return NULL;
}

/* The reducer's start(value). */
static PyObject *
start_all(PyObject *spec, int single, Py_ssize_t parts, PyObject *value)
{
    if (single)
        return start_part(spec_kind(spec, 0), spec_of(spec, 0), value);
    PyObject *list = PyList_New(parts);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t p = 0; p < parts; p++) {
        PyObject *part = start_part(spec_kind(spec, p), spec_of(spec, p), value);
        if (part == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, p, part);
    }
    return list;
}

/* The reducer's add(aggregate, value): a new aggregate (aggregate's list is new too). */
static PyObject *
add_all(PyObject *spec, int single, Py_ssize_t parts, PyObject *agg, PyObject *value)
{
    if (single)
        return add_part(spec_kind(spec, 0), spec_of(spec, 0), agg, value);
    PyObject *list = PyList_New(parts);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t p = 0; p < parts; p++) {
        PyObject *a = subscript(agg, p);
        if (a == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyObject *part = add_part(spec_kind(spec, p), spec_of(spec, p), a, value);
        Py_DECREF(a);
        if (part == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, p, part);
    }
    return list;
}

#define MAX_PARTS 32

/* 1 when ``pair`` is a mean's aggregate that can be changed in place (an exact list of
 * two). */
static inline int
is_pair(PyObject *pair)
{
    return PyList_CheckExact(pair) && PyList_GET_SIZE(pair) == 2;
}

/* Replace item i of ``list`` by ``item`` (stolen). */
static inline void
put_item(PyObject *list, Py_ssize_t i, PyObject *item)
{
    PyObject *old = PyList_GET_ITEM(list, i);
    PyList_SET_ITEM(list, i, item);
    Py_DECREF(old);
}

/* state[i] = add(state[i], value): the aggregate's lists (an `aggregate`'s list of
 * parts, a mean's [sum, count]) changed in place, where it has them, rather than made
 * anew as add_all does. A list made per record outlives many young collections, and
 * each collection walks every list made since the last one. Every new part is computed
 * before any is written, so an error leaves the state as it was. 0, or -1 with an
 * error. */
static int
add_at(PyObject *spec, int single, Py_ssize_t parts, PyObject *state, Py_ssize_t i,
       PyObject *value)
{
    PyObject *agg = PyList_GET_ITEM(state, i);
    PyObject *sums[MAX_PARTS], *counts[MAX_PARTS];
    if (single && spec_kind(spec, 0) == K_MEAN && is_pair(agg)) {
        if (mean_add(spec_of(spec, 0), agg, value, &sums[0], &counts[0]) < 0)
            return -1;
        put_item(agg, 0, sums[0]);
        put_item(agg, 1, counts[0]);
        return 0;
    }
    int inplace = !single && parts <= MAX_PARTS && PyList_CheckExact(agg)
                  && PyList_GET_SIZE(agg) == parts;
    for (Py_ssize_t p = 0; inplace && p < parts; p++)
        inplace = spec_kind(spec, p) != K_MEAN || is_pair(PyList_GET_ITEM(agg, p));
    if (!inplace) {
        PyObject *made = add_all(spec, single, parts, agg, value);
        return made == NULL ? -1 : PyList_SetItem(state, i, made);  /* steals made */
    }
    Py_ssize_t p = 0;
    for (; p < parts; p++) {
        int kind = spec_kind(spec, p);
        PyObject *a = PyList_GET_ITEM(agg, p);
        counts[p] = NULL;
        if (kind == K_MEAN) {
            if (mean_add(spec_of(spec, p), a, value, &sums[p], &counts[p]) < 0)
                break;
        } else if ((sums[p] = add_part(kind, spec_of(spec, p), a, value)) == NULL) {
            break;
        }
    }
    if (p < parts) {  /* part p failed: drop what the others made */
        while (p-- > 0) {
            Py_DECREF(sums[p]);
            Py_XDECREF(counts[p]);
        }
        return -1;
    }
    for (p = 0; p < parts; p++) {
        if (counts[p] == NULL) {
            put_item(agg, p, sums[p]);
        } else {
            PyObject *pair = PyList_GET_ITEM(agg, p);
            put_item(pair, 0, sums[p]);
            put_item(pair, 1, counts[p]);
        }
    }
    return 0;
}

/* -- results: merge_result and result of reducers.py ---------------------------------- */

/* An exact int's value in *v when it fits a long long: 1, else 0 (no error set). An int
 * of one digit (below 2**30 in size: most counts, sums and amounts) is read in place. */
static inline int
small_int(PyObject *x, long long *v)
{
    int overflow;
    if (!PyLong_CheckExact(x))
        return 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)x)) {
        *v = (long long)PyUnstable_Long_CompactValue((PyLongObject *)x);
        return 1;
    }
#else
    Py_ssize_t size = Py_SIZE(x);
    if (size >= -1 && size <= 1) {
        *v = size * (long long)((PyLongObject *)x)->ob_digit[0];
        return 1;
    }
#endif
    *v = PyLong_AsLongLongAndOverflow(x, &overflow);
    return !overflow;
}

/* sum / count as Python's int division gives it, for ints read by small_int: when both
 * are exact as doubles (below 2**53 in size) and count is not 0, Python divides them as
 * doubles, as this does; else NULL with no error set, and the caller divides the ints. */
static inline PyObject *
exact_mean(long long sum, long long count)
{
    const long long exact = 1LL << DBL_MANT_DIG;
    if (count == 0 || sum <= -exact || sum >= exact || count <= -exact || count >= exact)
        return NULL;
    return PyFloat_FromDouble((double)sum / (double)count);
}

/* Part p of an aggregate, borrowed, when it can be read without calling anything (the
 * aggregate itself, or an item of an exact list); else NULL, no error set. */
static inline PyObject *
part_peek(PyObject *agg, int single, Py_ssize_t p)
{
    if (single)
        return agg;
    return PyList_CheckExact(agg) && p < PyList_GET_SIZE(agg) ? PyList_GET_ITEM(agg, p)
                                                               : NULL;
}

/* Item i of a mean's pair as a small int (see small_int), read without calling anything. */
static inline int
pair_int(PyObject *pair, Py_ssize_t i, long long *v)
{
    return pair != NULL && PyList_CheckExact(pair) && PyList_GET_SIZE(pair) == 2
           && small_int(PyList_GET_ITEM(pair, i), v);
}

/* A part's result from its aggregate: itself, or a mean's sum / count. */
static PyObject *
finish_part(int kind, PyObject *a)
{
    long long sum, count;
    if (kind != K_MEAN) {
        Py_INCREF(a);
        return a;
    }
    if (pair_int(a, 0, &sum) && pair_int(a, 1, &count)) {
        PyObject *mean = exact_mean(sum, count);
        if (mean != NULL || PyErr_Occurred())
            return mean;
    }
    PyObject *s = subscript(a, 0);
    if (s == NULL)
        return NULL;
    PyObject *c = subscript(a, 1);
    if (c == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    PyObject *r = PyNumber_TrueDivide(s, c);
    Py_DECREF(s);
    Py_DECREF(c);
    return r;
}

/* part p of an aggregate (the aggregate itself when single). New reference. */
static PyObject *
part_of(PyObject *agg, int single, Py_ssize_t p)
{
    if (single) {
        Py_INCREF(agg);
        return agg;
    }
    return subscript(agg, p);
}

/* Merge the non-mean part p (kind) of the panes at state[first], state[first + stride],
 * … (count >= 1; acc, stolen: the first pane's part) left to right, a pane's part being
 * the item itself when single: while the parts are ints that fit 64 bits (and their sums
 * do), they are added and compared as C integers — what Python's int arithmetic gives
 * for them — and the rest through the object API. New reference. */
static PyObject *
merged_values(int kind, PyObject *state, Py_ssize_t first, Py_ssize_t stride, int single,
              Py_ssize_t p, Py_ssize_t count, PyObject *acc)
{
    Py_ssize_t k = 1;
    long long total, more;
    if ((kind == K_COUNT || kind == K_SUM) && small_int(acc, &total)) {
        Py_ssize_t from = k;
        for (; k < count; k++) {
            PyObject *b = part_peek(PyList_GET_ITEM(state, first + stride * k), single, p);
            if (b == NULL || !small_int(b, &more) || __builtin_add_overflow(total, more, &more))
                break;
            total = more;
        }
        if (k > from) {
            PyObject *t = PyLong_FromLongLong(total);
            Py_DECREF(acc);
            if (t == NULL)
                return NULL;
            acc = t;
        }
    } else if ((kind == K_MIN || kind == K_MAX) && small_int(acc, &total)) {
        for (; k < count; k++) {  /* the first of equals stays, as min and max keep it */
            PyObject *b = part_peek(PyList_GET_ITEM(state, first + stride * k), single, p);
            if (b == NULL || !small_int(b, &more))
                break;
            if (kind == K_MIN ? more < total : more > total) {
                total = more;
                Py_INCREF(b);
                Py_SETREF(acc, b);
            }
        }
    }
    for (; k < count; k++) {
        PyObject *b = part_of(PyList_GET_ITEM(state, first + stride * k), single, p);
        if (b == NULL) {
            Py_DECREF(acc);
            return NULL;
        }
        PyObject *t;
        if (kind == K_MIN || kind == K_MAX)
            t = pick(acc, b, kind == K_MIN ? Py_LT : Py_GT);
        else
            t = PyNumber_Add(acc, b);
        Py_DECREF(b);
        Py_DECREF(acc);
        if (t == NULL)
            return NULL;
        acc = t;
    }
    return acc;
}

/* Merge part p over the aggregates state[first], state[first + 2], ... (count >= 1), left
 * to right, then finish it: a pure merge's result over those panes (a mean's sum and
 * count as C integers while they fit 64 bits, as merged_values does for the others). */
static PyObject *
merged_part(PyObject *spec, int single, Py_ssize_t p, PyObject *state, Py_ssize_t first,
            Py_ssize_t count)
{
    int kind = spec_kind(spec, p);
    PyObject *acc = part_of(PyList_GET_ITEM(state, first), single, p);
    Py_ssize_t k = 1;
    long long sum, n, s_more, n_more;
    if (acc == NULL)
        return NULL;
    if (kind == K_MEAN) {  /* two columns: sum and count, each added left to right */
        PyObject *s = NULL, *c = NULL, *r = NULL;
        if (pair_int(acc, 0, &sum) && pair_int(acc, 1, &n)) {
            for (; k < count; k++) {
                PyObject *b = part_peek(PyList_GET_ITEM(state, first + 2 * k), single, p);
                if (!pair_int(b, 0, &s_more) || !pair_int(b, 1, &n_more)
                        || __builtin_add_overflow(sum, s_more, &s_more)
                        || __builtin_add_overflow(n, n_more, &n_more))
                    break;
                sum = s_more;
                n = n_more;
            }
            if (k == count) {
                PyObject *mean = exact_mean(sum, n);
                if (mean != NULL || PyErr_Occurred()) {
                    Py_DECREF(acc);
                    return mean;
                }
            }
            s = PyLong_FromLongLong(sum);
            c = s == NULL ? NULL : PyLong_FromLongLong(n);
        } else {
            s = subscript(acc, 0);
            c = s == NULL ? NULL : subscript(acc, 1);
        }
        Py_DECREF(acc);
        if (c == NULL) {
            Py_XDECREF(s);
            return NULL;
        }
        for (; k < count; k++) {
            PyObject *b = part_of(PyList_GET_ITEM(state, first + 2 * k), single, p);
            if (b == NULL)
                goto mean_fail;
            PyObject *bs = subscript(b, 0);
            PyObject *t = bs == NULL ? NULL : PyNumber_Add(s, bs);
            Py_XDECREF(bs);
            if (t == NULL) {
                Py_DECREF(b);
                goto mean_fail;
            }
            Py_SETREF(s, t);
            PyObject *bc = subscript(b, 1);
            Py_DECREF(b);
            t = bc == NULL ? NULL : PyNumber_Add(c, bc);
            Py_XDECREF(bc);
            if (t == NULL)
                goto mean_fail;
            Py_SETREF(c, t);
        }
        r = PyNumber_TrueDivide(s, c);
    mean_fail:
        Py_DECREF(s);
        Py_DECREF(c);
        return r;
    }
    return merged_values(kind, state, first, 2, single, p, count, acc);
}

/* A window's result over ``count`` panes' aggregates starting at state[first] (count 0:
 * over ``agg`` alone): one finished as it is, several merged; an aggregate's as
 * {name: result}. */
static PyObject *
window_result(PyObject *spec, int single, Py_ssize_t parts, PyObject *names,
              PyObject *state, Py_ssize_t first, Py_ssize_t count, PyObject *agg)
{
    if (count == 1) {
        agg = PyList_GET_ITEM(state, first);
        count = 0;
    }
    if (single) {
        if (count == 0)
            return finish_part(spec_kind(spec, 0), agg);
        return merged_part(spec, 1, 0, state, first, count);
    }
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        return NULL;
    for (Py_ssize_t p = 0; p < parts; p++) {
        PyObject *r;
        if (count == 0) {
            PyObject *a = part_of(agg, 0, p);
            if (a == NULL) {
                Py_DECREF(dict);
                return NULL;
            }
            r = finish_part(spec_kind(spec, p), a);
            Py_DECREF(a);
        } else {
            r = merged_part(spec, 0, p, state, first, count);
        }
        if (r == NULL || PyDict_SetItem(dict, PyTuple_GET_ITEM(names, p), r) < 0) {
            Py_XDECREF(r);
            Py_DECREF(dict);
            return NULL;
        }
        Py_DECREF(r);
    }
    return dict;
}

/* -- fold ------------------------------------------------------------------------------ */

/* The last pane of ``state`` (panes of ``width`` items, a start each) starting at or
 * before ``pane``, searched from the newest: its index in *i (-1: none) and its start
 * in *at. 0, or -1 with an error. */
static int
find_pane(PyObject *state, Py_ssize_t width, long long pane, Py_ssize_t *i, long long *at)
{
    *i = PyList_GET_SIZE(state) - width;
    if (item_time(state, *i, at) < 0)
        return -1;
    while (*at != pane && *i >= 0) {
        if (item_time(state, *i, at) < 0)
            return -1;
        if (*at <= pane)
            break;
        *i -= width;
    }
    return 0;
}

/* Panes.fold of a record into ``state`` (None: a new one): the state (a new reference;
 * ``state`` itself, changed in place, unless it was None) and in *sooner whether it
 * gained an older pane than it had. NULL on an error, the state then untouched. */
static PyObject *
panes_fold_core(long long advance, PyObject *spec, int single, Py_ssize_t parts,
                PyObject *state, PyObject *value, long long ts, int *sooner)
{
    long long pane = ts - floor_mod(ts, advance), at;
    PyObject *pane_obj, *agg;
    if (state == Py_None) {
        agg = start_all(spec, single, parts, value);
        if (agg == NULL)
            return NULL;
        pane_obj = time_obj(pane);
        PyObject *list = pane_obj == NULL ? NULL : PyList_New(2);
        if (list == NULL) {
            Py_DECREF(agg);
            Py_XDECREF(pane_obj);
            return NULL;
        }
        PyList_SET_ITEM(list, 0, pane_obj);
        PyList_SET_ITEM(list, 1, agg);
        *sooner = 1;
        return list;
    }
    if (!PyList_CheckExact(state) || PyList_GET_SIZE(state) < 2) {
        PyErr_SetString(PyExc_TypeError, "panes_fold: a state must be a non-empty list");
        return NULL;
    }
    Py_ssize_t i;
    if (find_pane(state, 2, pane, &i, &at) < 0)
        return NULL;
    if (i >= 0 && at == pane) {  /* the pane exists: its aggregate replaced */
        if (add_at(spec, single, parts, state, i + 1, value) < 0)
            return NULL;
        *sooner = 0;
        Py_INCREF(state);
        return state;
    }
    agg = start_all(spec, single, parts, value);  /* a new pane after state[i] */
    if (agg == NULL)
        return NULL;
    pane_obj = time_obj(pane);
    if (pane_obj == NULL || PyList_Insert(state, i + 2, pane_obj) < 0) {
        Py_XDECREF(pane_obj);
        Py_DECREF(agg);
        return NULL;
    }
    Py_DECREF(pane_obj);
    int failed = PyList_Insert(state, i + 3, agg);
    Py_DECREF(agg);
    if (failed < 0)
        return NULL;
    *sooner = i < 0;
    Py_INCREF(state);
    return state;
}

/* -- columns: a pane's numbers inline (layouts.Columns) ------------------------------- */

/* Where each part's columns start in a pane (offsets[p], from the pane's start item),
 * and the pane's width (1 + its columns) as the return; -1 with an error. */
static Py_ssize_t
column_offsets(PyObject *spec, Py_ssize_t parts, Py_ssize_t *offsets)
{
    if (parts > MAX_PARTS) {
        PyErr_SetString(PyExc_ValueError, "_accel: columns of more than 32 reducers");
        return -1;
    }
    Py_ssize_t at = 1;
    for (Py_ssize_t p = 0; p < parts; p++) {
        offsets[p] = at;
        at += spec_kind(spec, p) == K_MEAN ? 2 : 1;
    }
    return at;
}

/* read_of, reusing the last read (*last_x, of *last_of) when it read the same field of an
 * exact dict with an exact str key, or the value itself: reads that give the same
 * object, with no code run. New reference. */
static PyObject *
read_again(PyObject *of, PyObject *value, PyObject **last_of, PyObject **last_x)
{
    if (*last_x != NULL && of == *last_of
            && (of == Py_None || (PyUnicode_CheckExact(of) && PyDict_CheckExact(value)))) {
        Py_INCREF(*last_x);
        return *last_x;
    }
    PyObject *x = read_of(of, value);
    if (x != NULL) {
        Py_INCREF(x);
        Py_XSETREF(*last_x, x);
        *last_of = of;
    }
    return x;
}

/* a + b as Python adds them: two ints that fit 64 bits (and their sum) added in C. */
static inline PyObject *
add_ints(PyObject *a, PyObject *b)
{
    long long u, v, w;
    if (small_int(a, &u) && small_int(b, &v) && !__builtin_add_overflow(u, v, &w))
        return PyLong_FromLongLong(w);
    return PyNumber_Add(a, b);
}

/* pick (min or max as the builtins), two ints that fit 64 bits compared in C. */
static inline PyObject *
pick_ints(PyObject *a, PyObject *x, int op)
{
    long long u, v;
    if (small_int(a, &u) && small_int(x, &v)) {
        PyObject *r = (op == Py_LT ? v < u : v > u) ? x : a;
        Py_INCREF(r);
        return r;
    }
    return pick(a, x, op);
}

/* A pane's columns with ``value`` folded in, into made[0 ..] (new references): the pane
 * at state[at]'s, or a new pane's when at < 0 (the reducers' start). Every column is
 * computed before the caller writes any. 0, or -1 with an error and nothing made. */
static int
column_values(PyObject *spec, Py_ssize_t parts, PyObject *state, Py_ssize_t at,
              PyObject *value, PyObject **made)
{
    PyObject *last_of = NULL, *last_x = NULL;
    Py_ssize_t m = 0;
    for (Py_ssize_t p = 0; p < parts; p++) {
        int kind = spec_kind(spec, p);
        PyObject *x = NULL, *r = NULL;
        if (kind != K_COUNT
                && (x = read_again(spec_of(spec, p), value, &last_of, &last_x)) == NULL)
            goto fail;
        PyObject *a = at < 0 ? NULL : PyList_GET_ITEM(state, at + 1 + m);
        switch (kind) {
        case K_COUNT:  /* 1, a + 1 */
            r = a == NULL ? (Py_INCREF(ONE), ONE) : add_ints(a, ONE);
            break;
        case K_SUM:  /* x, a + x */
            r = a == NULL ? (Py_INCREF(x), x) : add_ints(a, x);
            break;
        case K_MIN: case K_MAX:  /* x, min(a, x) / max(a, x) */
            r = a == NULL ? (Py_INCREF(x), x)
                          : pick_ints(a, x, kind == K_MIN ? Py_LT : Py_GT);
            break;
        case K_MEAN:  /* x, 1; a[0] + x, a[1] + 1 */
            r = a == NULL ? (Py_INCREF(x), x) : add_ints(a, x);
            if (r == NULL)
                break;
            made[m++] = r;
            a = at < 0 ? NULL : PyList_GET_ITEM(state, at + 1 + m);
            r = a == NULL ? (Py_INCREF(ONE), ONE) : add_ints(a, ONE);
            break;
        default:
            PyErr_SetString(PyExc_ValueError, "_accel: unknown reducer kind");
        }
        Py_XDECREF(x);
        if (r == NULL)
            goto fail;
        made[m++] = r;
    }
    Py_XDECREF(last_x);
    return 0;
fail:
    while (m-- > 0)
        Py_DECREF(made[m]);
    Py_XDECREF(last_x);
    return -1;
}

/* A new pane's list: [pane, made...] (width items; steals made). */
static PyObject *
column_pane(long long pane, PyObject **made, Py_ssize_t width)
{
    PyObject *pane_obj = time_obj(pane);
    PyObject *list = pane_obj == NULL ? NULL : PyList_New(width);
    if (list == NULL) {
        Py_XDECREF(pane_obj);
        for (Py_ssize_t k = 0; k < width - 1; k++)
            Py_DECREF(made[k]);
        return NULL;
    }
    PyList_SET_ITEM(list, 0, pane_obj);
    for (Py_ssize_t k = 0; k < width - 1; k++)
        PyList_SET_ITEM(list, k + 1, made[k]);
    return list;
}

/* Columns.fold of a record into ``state`` (None: a new one), as panes_fold_core. */
static PyObject *
columns_fold_core(long long advance, PyObject *spec, Py_ssize_t parts, PyObject *state,
                  PyObject *value, long long ts, int *sooner)
{
    PyObject *made[2 * MAX_PARTS];
    Py_ssize_t offsets[MAX_PARTS];
    Py_ssize_t width = column_offsets(spec, parts, offsets);
    long long pane = ts - floor_mod(ts, advance), at;
    if (width < 0)
        return NULL;
    if (state == Py_None) {
        if (column_values(spec, parts, NULL, -1, value, made) < 0)
            return NULL;
        *sooner = 1;
        return column_pane(pane, made, width);
    }
    Py_ssize_t n = PyList_CheckExact(state) ? PyList_GET_SIZE(state) : 0;
    if (n == 0 || n % width != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "columns_fold: a state must be a non-empty list of whole panes");
        return NULL;
    }
    Py_ssize_t i;
    if (find_pane(state, width, pane, &i, &at) < 0)
        return NULL;
    int found = i >= 0 && at == pane;
    if (column_values(spec, parts, state, found ? i : -1, value, made) < 0)
        return NULL;
    if (PyList_GET_SIZE(state) != n) {  /* an addition ran Python code that changed it */
        for (Py_ssize_t k = 0; k < width - 1; k++)
            Py_DECREF(made[k]);
        PyErr_SetString(PyExc_RuntimeError, "columns_fold: the state changed while folding");
        return NULL;
    }
    if (found) {  /* the pane's columns replaced in place */
        for (Py_ssize_t k = 0; k < width - 1; k++)
            put_item(state, i + 1 + k, made[k]);
        *sooner = 0;
    } else {  /* a new pane after state[i] */
        PyObject *fresh = column_pane(pane, made, width);
        int failed = fresh == NULL || PyList_SetSlice(state, i + width, i + width, fresh) < 0;
        Py_XDECREF(fresh);
        if (failed)
            return NULL;
        *sooner = i < 0;
    }
    Py_INCREF(state);
    return state;
}

/* The column at state[first], state[first + width], … (count >= 1 panes) merged left to
 * right (merged_values; one pane: its own value). New reference. */
static PyObject *
merged_column(int kind, PyObject *state, Py_ssize_t first, Py_ssize_t width,
              Py_ssize_t count)
{
    PyObject *acc = PyList_GET_ITEM(state, first);
    Py_INCREF(acc);
    return merged_values(kind, state, first, width, 1, 0, count, acc);
}

/* Part p's result over ``count`` panes from the pane at state[first] (columns of
 * ``width`` from offsets[p]): its merged column, or a mean's merged sum / count. */
static PyObject *
column_part(int kind, PyObject *state, Py_ssize_t first, Py_ssize_t width,
            Py_ssize_t count)
{
    if (kind != K_MEAN)
        return merged_column(kind, state, first, width, count);
    PyObject *s = merged_column(K_SUM, state, first, width, count), *n = NULL, *r = NULL;
    n = s == NULL ? NULL : merged_column(K_COUNT, state, first + 1, width, count);
    if (n != NULL) {
        long long sv, nv;
        if (small_int(s, &sv) && small_int(n, &nv))
            r = exact_mean(sv, nv);
        if (r == NULL && !PyErr_Occurred())
            r = PyNumber_TrueDivide(s, n);
    }
    Py_XDECREF(s);
    Py_XDECREF(n);
    return r;
}

/* -- close ----------------------------------------------------------------------------- */

#define STACK_PANES 64

typedef struct {
    long long size, advance, closed, bound;  /* sessions: size is the gap */
    PyObject *spec, *names, *result_type, *key_from_text;
    PyObject *close;  /* sessions: Sessions.close, for a state with other than int bounds */
    int single;
    Py_ssize_t parts;
    long long stack[STACK_PANES];  /* panes: a state's pane starts */
    long long *starts;
    Py_ssize_t room;
    Py_ssize_t *cuts;  /* panes: per kept key, how many items its state sheds */
    Py_ssize_t kept, cut_room;
    Py_ssize_t width;  /* panes: items per pane (2; columns: 1 + their columns) */
    int columns;  /* panes: 1 when kept in columns (layouts.Columns) */
    Py_ssize_t offsets[MAX_PARTS];  /* columns: where each part's columns start */
} Close;

/* What a close does with one taken key's (non-empty) state: its results appended to
 * results, and (text, remaining, due) to kept or text to gone; 0, or -1 with an error. */
typedef int (*CloseKey)(Close *c, PyObject *text, PyObject *state, PyObject *results,
                        PyObject *kept, PyObject *gone);

/* The record key of a key text: text[1:] for "s" keys, else key_from_text(text). */
static PyObject *
key_of(Close *c, PyObject *text)
{
    if (PyUnicode_Check(text) && PyUnicode_GET_LENGTH(text) > 0
            && PyUnicode_READ_CHAR(text, 0) == 's')
        return PyUnicode_Substring(text, 1, PyUnicode_GET_LENGTH(text));
    return PyObject_CallOneArg(c->key_from_text, text);
}

/* Append result_type((key, start, end, value, True)) to results; steals value. */
static int
emit(Close *c, PyObject *results, PyObject *key, long long start, long long end,
     PyObject *value)
{
    if (value == NULL)
        return -1;
    PyTypeObject *type = (PyTypeObject *)c->result_type;
    PyObject *row = type->tp_alloc(type, 5);
    PyObject *s = time_obj(start), *e = time_obj(end);
    if (row == NULL || s == NULL || e == NULL) {
        Py_XDECREF(row);
        Py_XDECREF(s);
        Py_XDECREF(e);
        Py_DECREF(value);
        return -1;
    }
    Py_INCREF(key);
    PyTuple_SET_ITEM(row, 0, key);
    PyTuple_SET_ITEM(row, 1, s);
    PyTuple_SET_ITEM(row, 2, e);
    PyTuple_SET_ITEM(row, 3, value);
    Py_INCREF(Py_True);
    PyTuple_SET_ITEM(row, 4, Py_True);
    int failed = PyList_Append(results, row);
    Py_DECREF(row);
    return failed;
}

/* The result of the window over ``count`` panes from pane number ``pane`` of a state. */
static PyObject *
pane_result(Close *c, PyObject *state, Py_ssize_t pane, Py_ssize_t count)
{
    if (!c->columns)
        return window_result(c->spec, c->single, c->parts, c->names, state, 2 * pane + 1,
                             count, NULL);
    Py_ssize_t first = pane * c->width;
    if (c->single)
        return column_part(spec_kind(c->spec, 0), state, first + 1, c->width, count);
    PyObject *dict = PyDict_New();
    for (Py_ssize_t p = 0; dict != NULL && p < c->parts; p++) {
        PyObject *r = column_part(spec_kind(c->spec, p), state, first + c->offsets[p],
                                  c->width, count);
        if (r == NULL || PyDict_SetItem(dict, PyTuple_GET_ITEM(c->names, p), r) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(r);
    }
    return dict;
}

/* Panes._results for one key, appended to results; *key made on the first window. */
static int
close_windows(Close *c, PyObject *results, PyObject *text, PyObject *state,
              const long long *starts, Py_ssize_t panes, PyObject **key)
{
    long long size = c->size, advance = c->advance, after = c->closed;
    long long end = starts[0] + advance;
    if (end < size)
        end = size;
    long long later = after - floor_mod(after, advance) + advance;
    if (end < later)
        end = later;
    Py_ssize_t low = 0;
    while (end <= c->bound) {
        long long start = end - size;
        while (low < panes && starts[low] < start)
            low++;
        if (low == panes)
            break;
        if (starts[low] >= end) {  /* no pane in this window: on to the next pane's first */
            end = starts[low] + advance;
            continue;
        }
        Py_ssize_t j = low + 1;
        while (j < panes && starts[j] < end)
            j++;
        if (*key == NULL && (*key = key_of(c, text)) == NULL)
            return -1;
        PyObject *value = pane_result(c, state, low, j - low);
        if (emit(c, results, *key, start, end, value) < 0)
            return -1;
        end += advance;
    }
    return 0;
}

/* The arguments both close_all functions share: (..., spec, names, key_from_text, ...,
 * taken, load, closed, bound, result) at the positions given; 0, or -1 with an error. */
static int
close_setup(Close *c, PyObject *const *args, int spec, int taken, const char *name)
{
    if (as_time(args[taken + 2], &c->closed) < 0 || as_time(args[taken + 3], &c->bound) < 0
            || parse_spec(args[spec], &c->single, &c->parts) < 0)
        return -1;
    c->spec = args[spec];
    c->names = args[spec + 1];
    c->key_from_text = args[spec + 2];
    c->result_type = args[taken + 4];
    if (!PyList_Check(args[taken]) || !PyType_Check(c->result_type)
            || !PyType_IsSubtype((PyTypeObject *)c->result_type, &PyTuple_Type)
            || (!c->single && !PyTuple_Check(c->names))) {
        PyErr_Format(PyExc_TypeError, "%s: bad arguments", name);
        return -1;
    }
    return 0;
}

/* The state of taken[t] through load (*text: its key text, borrowed): NULL with an error,
 * Py_None (a new reference) when it has none — an empty list counts as none —, else
 * the state list. */
static PyObject *
taken_state(PyObject *taken, Py_ssize_t t, PyObject *load, PyObject **text)
{
    PyObject *entry = PyList_GET_ITEM(taken, t);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "close_all: taken holds (time, key)");
        return NULL;
    }
    *text = PyTuple_GET_ITEM(entry, 1);
    PyObject *state = PyObject_CallOneArg(load, *text);
    if (state == NULL || state == Py_None)
        return state;
    if (!PyList_CheckExact(state)) {
        Py_DECREF(state);
        PyErr_SetString(PyExc_TypeError, "close_all: a state must be a list");
        return NULL;
    }
    if (PyList_GET_SIZE(state) == 0) {
        Py_DECREF(state);
        Py_RETURN_NONE;
    }
    return state;
}

/* -- reading ahead ------------------------------------------------------------------- */

/* A close visits every taken key's state, and the states lie scattered over the heap: a
 * state list, its items, each pane's aggregate list and a mean's pair, each in its own
 * block. Read one after the other, each block waits for memory. So the close asks for the
 * blocks of the next keys' states ahead of using them, one level of the state deeper per
 * key nearer: level L of key k + (WARM_LEVELS - L) at key k. Each level reads only
 * pointers a shallower level asked for at an earlier key. Hints only: nothing changes. */
#define WARM_LEVELS 6

static inline void
warm_items(PyObject *list)  /* the item array of a list (or a tuple's items) */
{
    if (PyList_CheckExact(list)) {
        PyObject **items = ((PyListObject *)list)->ob_item;
        Py_ssize_t n = PyList_GET_SIZE(list);
        for (Py_ssize_t i = 0; i < n; i += 8)
            __builtin_prefetch(items + i);
    }
}

static void
warm(PyObject *state, int level)
{
    if (level == 0) {
        __builtin_prefetch(state);
        return;
    }
    if (level == 1) {
        warm_items(state);
        return;
    }
    Py_ssize_t n = PyList_GET_SIZE(state);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(state, i);
        if (level == 2) {
            __builtin_prefetch(item);
            continue;
        }
        if (!PyList_CheckExact(item))
            continue;
        if (level == 3) {
            warm_items(item);
            continue;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(item); j++) {
            PyObject *part = PyList_GET_ITEM(item, j);
            if (level == 4)
                __builtin_prefetch(part);
            else if (PyList_CheckExact(part))
                warm_items(part);
        }
    }
}

/* close_all of a layout: each key of taken (the list at args[t]) through close_key, its
 * state read with load (args[t + 1]), all states first, then closed in order with the
 * next ones read ahead; (results, kept, gone). */
static PyObject *
close_each(Close *c, PyObject *const *args, int t, CloseKey close_key)
{
    PyObject *taken = args[t], *load = args[t + 1], *out = NULL;
    PyObject *results = PyList_New(0), *kept = PyList_New(0), *gone = PyList_New(0);
    Py_ssize_t count = PyList_GET_SIZE(taken), loaded = 0;
    PyObject **states = PyMem_Malloc(sizeof(PyObject *) * (size_t)(2 * count + 1));
    PyObject **texts = states + count;
    c->starts = c->stack;
    c->room = STACK_PANES;
    c->cuts = NULL;
    c->kept = c->cut_room = 0;
    if (states == NULL)
        PyErr_NoMemory();
    if (states == NULL || results == NULL || kept == NULL || gone == NULL)
        goto done;
    for (; loaded < count; loaded++) {
        if (PyList_GET_SIZE(taken) != count) {  /* load is Python code: it could */
            PyErr_SetString(PyExc_RuntimeError, "close_all: taken changed while loading");
            goto done;
        }
        if (loaded + 4 < count) {  /* the key text's hash, for load's dict lookup */
            PyObject *entry = PyList_GET_ITEM(taken, loaded + 4);
            if (PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 2)
                __builtin_prefetch(PyTuple_GET_ITEM(entry, 1));
        }
        states[loaded] = taken_state(taken, loaded, load, &texts[loaded]);
        if (states[loaded] == NULL)
            goto done;
        Py_INCREF(texts[loaded]);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        for (int level = 0; level < WARM_LEVELS; level++) {
            Py_ssize_t ahead = k + WARM_LEVELS - level;
            if (ahead < count && states[ahead] != Py_None)
                warm(states[ahead], level);
        }
        int failed = states[k] == Py_None
            ? PyList_Append(gone, texts[k])
            : close_key(c, texts[k], states[k], results, kept, gone);
        if (failed < 0)
            goto done;
    }
    /* Every key closed: now the kept states shed their closed panes, in place (not
     * before: a close that fails leaves every state as it was). */
    for (Py_ssize_t k = 0; k < c->kept; k++) {
        PyObject *state = PyTuple_GET_ITEM(PyList_GET_ITEM(kept, k), 1);
        if (c->cuts[k] && PyList_SetSlice(state, 0, c->cuts[k], NULL) < 0)
            goto done;
    }
    out = PyTuple_Pack(3, results, kept, gone);
done:
    if (c->starts != c->stack)
        PyMem_Free(c->starts);
    PyMem_Free(c->cuts);
    for (Py_ssize_t k = 0; k < loaded; k++) {
        Py_DECREF(states[k]);
        Py_DECREF(texts[k]);
    }
    PyMem_Free(states);
    Py_XDECREF(results);
    Py_XDECREF(kept);
    Py_XDECREF(gone);
    return out;
}

/* Panes.close_all (or Columns') for one key (a CloseKey). */
static int
close_panes(Close *c, PyObject *text, PyObject *state, PyObject *results, PyObject *kept,
            PyObject *gone)
{
    Py_ssize_t n = PyList_GET_SIZE(state), panes = n / c->width, i = 0;
    if (c->columns && n % c->width != 0) {
        PyErr_SetString(PyExc_TypeError, "close_all: a state must be a list of whole panes");
        return -1;
    }
    if (panes > c->room) {
        long long *more = PyMem_Malloc(sizeof(long long) * (size_t)panes);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (c->starts != c->stack)
            PyMem_Free(c->starts);
        c->starts = more;
        c->room = panes;
    }
    long long *starts = c->starts;
    for (Py_ssize_t p = 0; p < panes; p++) {
        if (item_time(state, c->width * p, &starts[p]) < 0)
            return -1;
    }
    PyObject *key = NULL;
    int failed = 0;
    if (c->size == c->advance) {  /* tumbling: a pane is a window, emitted as it is */
        for (; !failed && i < panes && starts[i] + c->size <= c->bound; i++) {
            if (starts[i] + c->size <= c->closed)
                continue;
            failed = key == NULL && (key = key_of(c, text)) == NULL;
            if (!failed)
                failed = emit(c, results, key, starts[i], starts[i] + c->size,
                              pane_result(c, state, i, 1)) < 0;
        }
    } else {
        failed = panes && close_windows(c, results, text, state, starts, panes, &key) < 0;
        while (i < panes && starts[i] + c->size <= c->bound)
            i++;
    }
    Py_XDECREF(key);
    if (failed)
        return -1;
    if (i == panes)
        return PyList_Append(gone, text);
    long long end = starts[i] - c->size + c->advance;
    end = (end > 0 ? end : 0) + c->size;
    if (end <= c->bound)
        end = c->bound - floor_mod(c->bound, c->advance) + c->advance;
    if (c->kept == c->cut_room) {
        Py_ssize_t room = c->cut_room ? 2 * c->cut_room : 256;
        Py_ssize_t *more = PyMem_Realloc(c->cuts, sizeof(Py_ssize_t) * (size_t)room);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->cuts = more;
        c->cut_room = room;
    }
    PyObject *due = time_obj(end);
    PyObject *row = due ? PyTuple_Pack(3, text, state, due) : NULL;  /* state cut later */
    Py_XDECREF(due);
    failed = row == NULL || PyList_Append(kept, row) < 0;
    Py_XDECREF(row);
    if (failed)
        return -1;
    c->cuts[c->kept++] = c->width * i;
    return 0;
}

/* -- sessions -------------------------------------------------------------------------- */

/* Sessions.fold of a record into ``state``: the state (a new reference: ``state``
 * changed in place, or a new list) and in *sooner False (0), True (1) or LATER (2). Its
 * two in-place cases here — a record after the newest session's end + gap, or only
 * within gap of the newest session — and every other case through ``general`` (the
 * Python fold, which makes a new state). NULL on an error, the state then untouched. */
static PyObject *
sessions_fold_core(long long gap, PyObject *spec, int single, Py_ssize_t parts,
                   PyObject *general, PyObject *state, PyObject *value, long long ts,
                   PyObject *ts_obj, int *sooner)
{
    long long start, end, before;
    if (state == Py_None) {  /* a key's first session: [ts, ts, start(value)] */
        PyObject *agg = start_all(spec, single, parts, value);
        PyObject *list = agg == NULL ? NULL : PyList_New(3);
        if (list == NULL) {
            Py_XDECREF(agg);
            return NULL;
        }
        Py_INCREF(ts_obj);
        PyList_SET_ITEM(list, 0, ts_obj);
        Py_INCREF(ts_obj);
        PyList_SET_ITEM(list, 1, ts_obj);
        PyList_SET_ITEM(list, 2, agg);
        *sooner = 1;
        return list;
    }
    Py_ssize_t n = PyList_CheckExact(state) ? PyList_GET_SIZE(state) : 0;
    if (n >= 3 && n % 3 == 0) {
        if (item_time(state, n - 3, &start) < 0 || item_time(state, n - 2, &end) < 0)
            return NULL;
        if (ts > end + gap) {  /* a new session after the newest */
            PyObject *agg = start_all(spec, single, parts, value);
            if (agg == NULL)
                return NULL;
            int failed = PyList_Append(state, ts_obj) < 0 || PyList_Append(state, ts_obj) < 0
                         || PyList_Append(state, agg) < 0;
            Py_DECREF(agg);
            if (failed)
                return NULL;
            *sooner = 0;
            Py_INCREF(state);
            return state;
        }
        int alone = n == 3;
        if (!alone) {
            if (item_time(state, n - 5, &before) < 0)
                return NULL;
            alone = ts > before + gap;
        }
        if (ts >= start - gap && alone) {  /* only in the newest session */
            if (add_at(spec, single, parts, state, n - 1, value) < 0)
                return NULL;
            *sooner = 0;
            if (ts < start || ts > end) {
                Py_INCREF(ts_obj);
                if (PyList_SetItem(state, ts < start ? n - 3 : n - 2, ts_obj) < 0)
                    return NULL;
                if (ts > end && n == 3)
                    *sooner = 2;  /* LATER: its one session closes later */
            }
            Py_INCREF(state);
            return state;
        }
    }
    PyObject *call[3] = {state, value, ts_obj};
    PyObject *out = PyObject_Vectorcall(general, call, 3, NULL);
    if (out == NULL)
        return NULL;
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 2) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "sessions_fold: the general fold gave no pair");
        return NULL;
    }
    PyObject *flag = PyTuple_GET_ITEM(out, 1);
    long code = PyLong_AsLong(flag);  /* False, True or LATER */
    if (code == -1 && PyErr_Occurred()) {
        Py_DECREF(out);
        return NULL;
    }
    *sooner = (int)code;
    PyObject *result = PyTuple_GET_ITEM(out, 0);
    Py_INCREF(result);
    Py_DECREF(out);
    return result;
}

/* fold(layout, param, spec, general, state, value, ts) -> (state, sooner): Panes.fold
 * (layout 0, param the advance), Sessions.fold (layout 1, param the gap, general the
 * Python fold for what is not done in place) or Columns.fold (layout 2, as 0). */
static PyObject *
fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (arity(nargs, 7, "fold") < 0)
        return NULL;
    long long layout, param, ts;
    int single, sooner = 0;
    Py_ssize_t parts;
    if (as_time(args[0], &layout) < 0 || as_time(args[1], &param) < 0
            || as_time(args[6], &ts) < 0 || parse_spec(args[2], &single, &parts) < 0)
        return NULL;
    PyObject *state = layout == 0
        ? panes_fold_core(param, args[2], single, parts, args[4], args[5], ts, &sooner)
        : layout == 2
        ? columns_fold_core(param, args[2], parts, args[4], args[5], ts, &sooner)
        : sessions_fold_core(param, args[2], single, parts, args[3], args[4], args[5], ts,
                             args[6], &sooner);
    if (state == NULL)
        return NULL;
    PyObject *flag = sooner == 2 ? PyLong_FromLong(2) : PyBool_FromLong(sooner);
    PyObject *out = flag == NULL ? NULL : PyTuple_Pack(2, state, flag);
    Py_XDECREF(flag);
    Py_DECREF(state);
    return out;
}

/* Sessions.close_all for one key (a CloseKey): Sessions.close of a state whose bounds are
 * all ints that fit 64 bits here (the key's one closing session, the common case, first),
 * of any other through Sessions.close. What remains is the state itself when nothing
 * closed, else a new list of the sessions left, as Sessions.close makes it. */
static int
close_sessions(Close *c, PyObject *text, PyObject *state, PyObject *results,
               PyObject *kept, PyObject *gone)
{
    long long last = c->bound - c->size - 1;  /* a session closes when its end <= last */
    long long first, end;
    Py_ssize_t n = PyList_GET_SIZE(state);
    if (n == 3) {
        if (item_time(state, 0, &first) < 0 || item_time(state, 1, &end) < 0)
            return -1;
        if (end <= last) {  /* the common case: the key's one session closes */
            PyObject *key = key_of(c, text);
            PyObject *value = key == NULL ? NULL : window_result(
                c->spec, c->single, c->parts, c->names, state, 2, 1, NULL);
            int failed = key == NULL || emit(c, results, key, first, end + 1, value) < 0;
            Py_XDECREF(key);
            return failed ? -1 : PyList_Append(gone, text);
        }
    }
    int plain = n % 3 == 0;  /* every start and end an int that fits: Sessions.close here */
    for (Py_ssize_t i = 0; plain && i < n; i += 3) {
        int overflow = 0;
        for (Py_ssize_t j = i; plain && j < i + 2; j++) {
            PyObject *item = PyList_GET_ITEM(state, j);
            plain = PyLong_CheckExact(item)
                    && (PyLong_AsLongLongAndOverflow(item, &overflow), !overflow)
                    && !PyErr_Occurred();
        }
    }
    if (plain) {
        Py_ssize_t i = 0;
        while (i < n && (item_time(state, i + 1, &end), end <= last))
            i += 3;
        PyObject *key = NULL;
        for (Py_ssize_t j = 0; j < i; j += 3) {
            item_time(state, j, &first);
            item_time(state, j + 1, &end);
            if (key == NULL && (key = key_of(c, text)) == NULL)
                return -1;
            PyObject *value = window_result(c->spec, c->single, c->parts, c->names, state,
                                            j + 2, 1, NULL);
            if (emit(c, results, key, first, end + 1, value) < 0) {
                Py_DECREF(key);
                return -1;
            }
        }
        Py_XDECREF(key);
        if (i == n)
            return PyList_Append(gone, text);
        item_time(state, i + 1, &end);  /* the first session left: due after its gap */
        PyObject *remaining = i == 0 ? (Py_INCREF(state), state)
                                     : PyList_GetSlice(state, i, n);
        PyObject *due = remaining == NULL ? NULL : time_obj(end + c->size + 1);
        PyObject *row = due == NULL ? NULL : PyTuple_Pack(3, text, remaining, due);
        int failed = row == NULL || PyList_Append(kept, row) < 0;
        Py_XDECREF(remaining);
        Py_XDECREF(due);
        Py_XDECREF(row);
        return failed ? -1 : 0;
    }
    PyObject *closed = time_obj(c->closed), *bound = time_obj(c->bound);
    PyObject *out = closed && bound
        ? PyObject_CallFunctionObjArgs(c->close, state, closed, bound, NULL) : NULL;
    Py_XDECREF(closed);
    Py_XDECREF(bound);
    if (out == NULL)
        return -1;
    if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 3
            || !PyList_Check(PyTuple_GET_ITEM(out, 0))) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "close_all: Sessions.close gave no triple");
        return -1;
    }
    PyObject *emitted = PyTuple_GET_ITEM(out, 0), *remaining = PyTuple_GET_ITEM(out, 1);
    PyObject *key = NULL;
    int failed = 0;
    for (Py_ssize_t e = 0; !failed && e < PyList_GET_SIZE(emitted); e++) {
        PyObject *window = PyList_GET_ITEM(emitted, e);
        long long wstart, wend;
        failed = !PyTuple_Check(window) || PyTuple_GET_SIZE(window) != 3
                 || as_time(PyTuple_GET_ITEM(window, 0), &wstart) < 0
                 || as_time(PyTuple_GET_ITEM(window, 1), &wend) < 0
                 || (key == NULL && (key = key_of(c, text)) == NULL);
        if (failed && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "close_all: Sessions.close gave a bad window");
        if (!failed)
            failed = emit(c, results, key, wstart, wend,
                          window_result(c->spec, c->single, c->parts, c->names, NULL, 0, 0,
                                        PyTuple_GET_ITEM(window, 2))) < 0;
    }
    Py_XDECREF(key);
    int has = failed ? -1 : PyObject_IsTrue(remaining);
    if (has > 0) {
        PyObject *row = PyTuple_Pack(3, text, remaining, PyTuple_GET_ITEM(out, 2));
        failed = row == NULL || PyList_Append(kept, row) < 0;
        Py_XDECREF(row);
    } else {
        failed = has < 0 || PyList_Append(gone, text) < 0;
    }
    Py_DECREF(out);
    return failed ? -1 : 0;
}

/* close_all(layout, param, size, spec, names, key_from_text, close, taken, load, closed,
 * bound, result) -> (results, kept, gone): Panes.close_all (layout 0; param the advance),
 * Sessions.close_all (layout 1; param the gap, close Sessions.close) or Columns.close_all
 * (layout 2, as 0) for a built-in reducer. */
static PyObject *
close_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (arity(nargs, 12, "close_all") < 0)
        return NULL;
    Close c;
    long long layout;
    if (as_time(args[0], &layout) < 0 || as_time(args[1], &c.advance) < 0
            || as_time(args[2], &c.size) < 0 || close_setup(&c, args, 3, 7, "close_all") < 0)
        return NULL;
    c.width = 2;
    c.columns = layout == 2;
    if (c.columns && (c.width = column_offsets(c.spec, c.parts, c.offsets)) < 0)
        return NULL;
    if (layout == 0 || layout == 2)
        return close_each(&c, args, 7, close_panes);
    c.size = c.advance;  /* sessions: the gap */
    c.close = args[6];
    return close_each(&c, args, 7, close_sessions);
}

/* -- a record's whole step: the Stepper ------------------------------------------------ */

static PyObject *S_value, *S_timestamp, *S_key, *S_ssp, *S_watermark, *S_hot, *S_dirty,
                *S_quiet, *S_next_close, *S_record, *S_s, *S_max_cached, *S_emptied,
                *S_closed, *S_index, *S_granule, *S_at, *S_buckets, *S_times;
static PyObject *HEAPPUSH, *HEAPPOP;  /* _heapq's, as heapq's are */

#define MAX_TIME 9999999999999999LL  /* framework.windows.kinds.MAX_TIME */
#define NOT_HANDLED (Py_INCREF(Py_False), Py_False)

/* An attribute as a long long into *out; 1 when it is None, -1 on an error. */
static int
time_attr(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int none = v == Py_None;
    int failed = !none && as_time(v, out) < 0;
    Py_DECREF(v);
    return failed ? -1 : none;
}

/* Key ``text`` into the due index's bucket of ``time`` (DueIndex._buckets): appended, or a
 * new bucket with its time pushed onto the heap ``times``. 0, or -1 with an error. */
static int
bucket_add(PyObject *buckets, PyObject *times, PyObject *time, PyObject *text)
{
    int failed = -1;
    PyObject *bucket = PyDict_GetItemWithError(buckets, time);
    if (bucket != NULL) {
        Py_INCREF(bucket);
        if (PyList_CheckExact(bucket)) {
            failed = PyList_Append(bucket, text);
        } else {
            PyObject *r = PyObject_CallMethod(bucket, "append", "O", text);
            failed = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_DECREF(bucket);
        return failed;
    }
    if (PyErr_Occurred())
        return -1;
    PyObject *fresh = PyList_New(1), *pushed = NULL;
    if (fresh == NULL)
        return -1;
    Py_INCREF(text);
    PyList_SET_ITEM(fresh, 0, text);
    if (PyDict_SetItem(buckets, time, fresh) == 0)
        pushed = PyObject_CallFunctionObjArgs(HEAPPUSH, times, time, NULL);
    Py_DECREF(fresh);
    failed = pushed == NULL ? -1 : 0;
    Py_XDECREF(pushed);
    return failed;
}

/* A `Windows` aggregation's step, made once per aggregation (`stepper`): what a record's
 * step reads of it that never changes — its parameters, and the keyed states' and due
 * index's containers, which are never rebound — held here instead of read per record.
 * Called as ``stepper(envelope, collector)`` it is the aggregation's `process`;
 * ``stepper.step(envelope)`` is its C step alone. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *windows, *event_time, *keyed, *spec, *general;
    PyObject *close_due;  /* windows._close_due: a close is due */
    PyObject *slow;       /* windows._process_python: a record the C step does not take */
    PyObject *method;     /* Windows.process (the class's): a call with keywords */
    PyObject *dirty, *emptied, *at, *buckets, *times;  /* keyed's and its index's */
    long long grace, layout, param, size, granule;
    int single;
    Py_ssize_t parts;
    Py_ssize_t taken;     /* records the C step took (for tests) */
} Stepper;

/* DueIndex.note (move 0) or DueIndex.move (move 1) of key ``text`` at ``at``: the time
 * it is due now in *out. */
static int
due_note(Stepper *s, PyObject *text, long long at, int move, long long *out)
{
    long long was = 0;
    if (s->granule > 1)
        at += floor_mod(-at, s->granule);
    PyObject *held = PyDict_GetItemWithError(s->at, text);
    if (held == NULL && PyErr_Occurred())
        return -1;
    if (held != NULL && as_time(held, &was) < 0)
        return -1;
    if (held != NULL && (move ? was == at : was <= at)) {  /* kept as it is */
        *out = move ? at : was;
        return 0;
    }
    PyObject *time = time_obj(at);
    int failed = time == NULL || PyDict_SetItem(s->at, text, time) < 0
                 || bucket_add(s->buckets, s->times, time, text) < 0;
    Py_XDECREF(time);
    if (failed)
        return -1;
    *out = at;
    return 0;
}

/* After a fold that may have moved a key's first due time (``sooner``: 1 sooner, 2 later):
 * Layout.first_close of its state, noted (moved) in the keyed states' due index, and
 * Windows._next_close lowered to it — Windows._after_fold's first step. */
static int
note_due(Stepper *s, PyObject *text, PyObject *state, int sooner)
{
    long long due, first, next_close;
    if (s->layout != 1) {  /* Panes.first_close (and Columns') */
        long long closed, param = s->param, size = s->size;
        if (time_attr(s->keyed, S_closed, &closed) != 0 || item_time(state, 0, &first) < 0)
            return -1;
        due = first - size + param;
        due = (due > 0 ? due : 0) + size;
        if (due <= closed)
            due = closed - floor_mod(closed, param) + param;
    } else {  /* Sessions.first_close */
        if (item_time(state, 1, &first) < 0)
            return -1;
        due = first + s->param + 1;
    }
    if (due_note(s, text, due, sooner == 2, &due) < 0)
        return -1;
    int none = time_attr(s->windows, S_next_close, &next_close), failed = 0;
    if (none < 0)
        return -1;
    if (none || due < next_close) {
        PyObject *value = time_obj(due);
        failed = value == NULL || PyObject_SetAttr(s->windows, S_next_close, value) < 0;
        Py_XDECREF(value);
    }
    return failed ? -1 : 0;
}

/* Windows.process of one record in its common case — a data record with an int event
 * time, on time, a str key, states cached and written back (with room for a new one) —
 * for layout 0 (panes of ``param`` = advance and ``size``), 1 (sessions of ``param`` =
 * gap, ``general`` their Python fold) or 2 (panes in columns, as 0). Returns False
 * having done nothing when the record is not such a case (the Python path then takes
 * it); else None (nothing to close) or True (a close is due: Windows._close_due's turn). */
static PyObject *
step_core(Stepper *s, PyObject *envelope)
{
    long long grace = s->grace, layout = s->layout, param = s->param, ts, watermark;
    long long next_close, quiet_time;
    int sooner = 0, none;
    PyObject *value = PyObject_GetAttr(envelope, S_value);
    if (value == NULL)
        return NULL;
    if (PyDict_CheckExact(value)) {  /* a watermark record? */
        int marker = PyDict_Contains(value, S_watermark);
        if (marker != 0) {
            Py_DECREF(value);
            return marker < 0 ? NULL : NOT_HANDLED;
        }
    }
    PyObject *ts_obj = PyObject_GetAttr(envelope, S_timestamp);
    if (ts_obj == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    int overflow = 0;
    ts = PyLong_CheckExact(ts_obj) ? PyLong_AsLongLongAndOverflow(ts_obj, &overflow) : -1;
    if (!PyLong_CheckExact(ts_obj) || overflow || ts < 0 || ts > MAX_TIME) {
        Py_DECREF(value);
        Py_DECREF(ts_obj);
        return NOT_HANDLED;  /* Windows.process names the bad event time */
    }
    none = time_attr(s->event_time, S_watermark, &watermark);
    if (none < 0 || (!none && ts < watermark - grace)) {  /* late: the Python path's */
        Py_DECREF(value);
        Py_DECREF(ts_obj);
        return none < 0 ? NULL : NOT_HANDLED;
    }
    PyObject *key = PyObject_GetAttr(envelope, S_key), *hot = NULL, *text = NULL;
    PyObject *old = NULL, *state = NULL, *out = NULL;
    if (key == NULL)
        goto done;
    if (!PyUnicode_CheckExact(key)) {
        out = NOT_HANDLED;
        goto done;
    }
    hot = PyObject_GetAttr(s->keyed, S_hot);
    if (hot == NULL)
        goto done;
    if (!PyDict_CheckExact(hot)) {  /* None: states are not cached and written back */
        out = NOT_HANDLED;
        goto done;
    }
    text = PyUnicode_Concat(S_s, key);
    if (text == NULL)
        goto done;
    old = PyDict_GetItemWithError(hot, text);
    if (old == NULL) {  /* a key with no open windows: a new state, if the cache has room */
        long long room;
        if (PyErr_Occurred() || time_attr(s->keyed, S_max_cached, &room) != 0)
            goto done;
        if (PyDict_GET_SIZE(hot) >= room) {  /* KeyedStates.save makes room */
            out = NOT_HANDLED;
            goto done;
        }
        old = Py_None;
    }
    Py_INCREF(old);
    state = layout == 0
        ? panes_fold_core(param, s->spec, s->single, s->parts, old, value, ts, &sooner)
        : layout == 2
        ? columns_fold_core(param, s->spec, s->parts, old, value, ts, &sooner)
        : sessions_fold_core(param, s->spec, s->single, s->parts, s->general, old, value,
                             ts, ts_obj, &sooner);
    if (state == NULL)
        goto done;
    if (state != old && PyDict_SetItem(hot, text, state) < 0)
        goto done;
    if (PySet_Add(s->dirty, text) < 0)
        goto done;
    if (old == Py_None && PySet_Discard(s->emptied, text) < 0)
        goto done;  /* written again: not to be deleted at the next close */
    if (sooner && note_due(s, text, state, sooner) < 0)
        goto done;
    {
        PyObject *ssp = PyObject_GetAttr(envelope, S_ssp);
        PyObject *quiet = ssp == NULL ? NULL : PyObject_GetAttr(s->event_time, S_quiet);
        if (quiet == NULL) {
            Py_XDECREF(ssp);
            goto done;
        }
        PyObject *at = PyDict_CheckExact(quiet) ? PyDict_GetItemWithError(quiet, ssp) : NULL;
        int failed = PyErr_Occurred() != NULL;
        int call = !failed && (at == NULL || !PyLong_CheckExact(at)
                               || (as_time(at, &quiet_time) == 0 && ts > quiet_time));
        failed = failed || PyErr_Occurred() != NULL;
        if (call) {  /* else EventTime.record would change nothing */
            PyObject *moved = PyObject_CallMethodObjArgs(s->event_time, S_record, ssp, ts_obj,
                                                         NULL);
            failed = moved == NULL;
            Py_XDECREF(moved);
        }
        Py_DECREF(quiet);
        Py_DECREF(ssp);
        if (failed)
            goto done;
        if (call)  /* the watermark may have moved; else it is the one read above */
            none = time_attr(s->event_time, S_watermark, &watermark);
    }
    if (none < 0)
        goto done;
    if (none) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    none = time_attr(s->windows, S_next_close, &next_close);
    if (none < 0)
        goto done;
    out = (none || watermark - grace < next_close) ? Py_None : Py_True;
    Py_INCREF(out);
done:
    Py_DECREF(value);
    Py_DECREF(ts_obj);
    Py_XDECREF(key);
    Py_XDECREF(hot);
    Py_XDECREF(text);
    Py_XDECREF(old);
    Py_XDECREF(state);
    if (out != NULL && out != Py_False)
        s->taken++;
    return out;
}

/* stepper.step(envelope): the C step alone (None, True or False; see step_core). */
static PyObject *
stepper_step(PyObject *self, PyObject *envelope)
{
    return step_core((Stepper *)self, envelope);
}

/* stepper(envelope, collector): Windows.process — the C step, then what it asks for: no
 * result, the due close, or the Python path for a record it does not take. */
static PyObject *
stepper_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Stepper *s = (Stepper *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || kwnames != NULL) {  /* keywords: Windows.process itself sorts them */
        Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
        PyObject *stack[8];
        if (total > 7)
            return PyErr_Format(PyExc_TypeError,
                                "process(envelope, collector) got %zd arguments", total);
        stack[0] = s->windows;
        for (Py_ssize_t i = 0; i < total; i++)
            stack[i + 1] = args[i];
        return PyObject_Vectorcall(s->method, stack, nargs + 1, kwnames);
    }
    PyObject *done = step_core(s, args[0]);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);  /* None, True or False: immortal enough (held by the interpreter) */
    if (done == Py_None)
        return PyList_New(0);
    if (done == Py_True)
        return PyObject_CallOneArg(s->close_due, args[1]);
    return PyObject_Vectorcall(s->slow, args, 2, NULL);
}

static int
stepper_traverse(PyObject *self, visitproc visit, void *arg)
{
    Stepper *s = (Stepper *)self;
    Py_VISIT(s->windows);
    Py_VISIT(s->event_time);
    Py_VISIT(s->keyed);
    Py_VISIT(s->spec);
    Py_VISIT(s->general);
    Py_VISIT(s->close_due);
    Py_VISIT(s->slow);
    Py_VISIT(s->method);
    Py_VISIT(s->dirty);
    Py_VISIT(s->emptied);
    Py_VISIT(s->at);
    Py_VISIT(s->buckets);
    Py_VISIT(s->times);
    return 0;
}

static int
stepper_clear(PyObject *self)
{
    Stepper *s = (Stepper *)self;
    Py_CLEAR(s->windows);
    Py_CLEAR(s->event_time);
    Py_CLEAR(s->keyed);
    Py_CLEAR(s->spec);
    Py_CLEAR(s->general);
    Py_CLEAR(s->close_due);
    Py_CLEAR(s->slow);
    Py_CLEAR(s->method);
    Py_CLEAR(s->dirty);
    Py_CLEAR(s->emptied);
    Py_CLEAR(s->at);
    Py_CLEAR(s->buckets);
    Py_CLEAR(s->times);
    return 0;
}

static void
stepper_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    stepper_clear(self);
    PyObject_GC_Del(self);
}

static PyMethodDef stepper_methods[] = {
    {"step", stepper_step, METH_O,
     "step(envelope) -> None, True or False: the C step of one record (see _accel.c)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef stepper_members[] = {
    {"taken", T_PYSSIZET, offsetof(Stepper, taken), READONLY,
     "How many records the C step took (the others went to the Python path)."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StepperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framework.windows._accel.Stepper",
    .tp_basicsize = sizeof(Stepper),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A Windows aggregation's process in C (see stepper()).",
    .tp_vectorcall_offset = offsetof(Stepper, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = stepper_traverse,
    .tp_clear = stepper_clear,
    .tp_dealloc = stepper_dealloc,
    .tp_methods = stepper_methods,
    .tp_members = stepper_members,
};

/* stepper(windows, event_time, keyed, grace, layout, param, size, spec, general,
 * close_due, slow, method) -> Stepper: see the type. */
static PyObject *
stepper(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (arity(nargs, 12, "stepper") < 0)
        return NULL;
    Stepper *s = PyObject_GC_New(Stepper, &StepperType);
    if (s == NULL)
        return NULL;
    s->vectorcall = stepper_call;
    s->taken = 0;
    PyObject **held[] = {&s->windows, &s->event_time, &s->keyed, &s->spec, &s->general,
                         &s->close_due, &s->slow, &s->method};
    PyObject *given[] = {args[0], args[1], args[2], args[7], args[8], args[9], args[10],
                         args[11]};
    for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
        Py_INCREF(given[i]);
        *held[i] = given[i];
    }
    s->dirty = s->emptied = s->at = s->buckets = s->times = NULL;
    PyObject_GC_Track((PyObject *)s);
    PyObject *index = PyObject_GetAttr(s->keyed, S_index);
    if (index == NULL)
        goto fail;
    s->dirty = PyObject_GetAttr(s->keyed, S_dirty);
    s->emptied = s->dirty == NULL ? NULL : PyObject_GetAttr(s->keyed, S_emptied);
    s->at = s->emptied == NULL ? NULL : PyObject_GetAttr(index, S_at);
    s->buckets = s->at == NULL ? NULL : PyObject_GetAttr(index, S_buckets);
    s->times = s->buckets == NULL ? NULL : PyObject_GetAttr(index, S_times);
    int failed = s->times == NULL || time_attr(index, S_granule, &s->granule) != 0;
    Py_DECREF(index);
    if (failed)
        goto fail;
    if (!PySet_CheckExact(s->dirty) || !PySet_CheckExact(s->emptied)
            || !PyDict_CheckExact(s->at) || !PyDict_CheckExact(s->buckets)
            || !PyList_CheckExact(s->times)) {
        PyErr_SetString(PyExc_TypeError, "stepper: the keyed states' dirty and emptied "
                        "must be sets, their index's at and _buckets dicts, _times a list");
        goto fail;
    }
    if (as_time(args[3], &s->grace) < 0 || as_time(args[4], &s->layout) < 0
            || as_time(args[5], &s->param) < 0 || as_time(args[6], &s->size) < 0
            || parse_spec(s->spec, &s->single, &s->parts) < 0)
        goto fail;
    return (PyObject *)s;
fail:
    Py_DECREF(s);
    return NULL;
}

/* -- the due index's loops (DueIndex.due, and KeyedStates.finish_close's notes) ------- */

/* Python's ``a == b`` (op Py_EQ) or ``a <= b`` (Py_LE) as 1 or 0, -1 on an error: for
 * ints that fit 64 bits (every due time in practice) compared in C. */
static int
compare(PyObject *a, PyObject *b, int op)
{
    long long x, y;
    if (small_int(a, &x) && small_int(b, &y))
        return op == Py_EQ ? x == y : x <= y;
    PyObject *r = PyObject_RichCompare(a, b, op);
    if (r == NULL)
        return -1;
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* DueIndex.due(bound) over the index's at, buckets and times: take out every key due at
 * or before bound, as a list of (time, key) in time order. */
static PyObject *
due_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])
            || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "due_take(at, buckets, times, bound)");
        return NULL;
    }
    PyObject *at = args[0], *buckets = args[1], *times = args[2], *bound = args[3];
    PyObject *taken = PyList_New(0);
    if (taken == NULL)
        return NULL;
    while (PyList_GET_SIZE(times) > 0) {
        PyObject *first = PyList_GET_ITEM(times, 0);
        Py_INCREF(first);
        int due = compare(first, bound, Py_LE);
        Py_DECREF(first);
        if (due <= 0) {
            if (due < 0)
                goto fail;
            break;
        }
        PyObject *time = PyObject_CallOneArg(HEAPPOP, times);
        if (time == NULL)
            goto fail;
        PyObject *bucket = PyDict_GetItemWithError(buckets, time);  /* buckets.pop(time) */
        if (bucket == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, time);
            Py_DECREF(time);
            goto fail;
        }
        Py_INCREF(bucket);
        int failed = PyDict_DelItem(buckets, time) < 0 || !PyList_CheckExact(bucket);
        if (failed && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "due_take: a bucket must be a list");
        for (Py_ssize_t i = 0; !failed && i < PyList_GET_SIZE(bucket); i++) {
            PyObject *text = PyList_GET_ITEM(bucket, i);
            Py_INCREF(text);
            PyObject *was = PyDict_GetItemWithError(at, text);  /* at.get(text) == time */
            int equal = 0;
            if (was != NULL) {
                Py_INCREF(was);
                equal = compare(was, time, Py_EQ);
                Py_DECREF(was);
            } else if (PyErr_Occurred()) {
                equal = -1;
            }
            if (equal > 0) {
                PyObject *row = PyDict_DelItem(at, text) < 0 ? NULL
                                                              : PyTuple_Pack(2, time, text);
                equal = row == NULL || PyList_Append(taken, row) < 0 ? -1 : 1;
                Py_XDECREF(row);
            }
            Py_DECREF(text);
            failed = equal < 0;
        }
        Py_DECREF(bucket);
        Py_DECREF(time);
        if (failed)
            goto fail;
    }
    return taken;
fail:
    Py_DECREF(taken);
    return NULL;
}

/* DueIndex.note of key text at time, without its return value: 0, or -1 with an error. */
static int
index_note(PyObject *at, PyObject *buckets, PyObject *times, PyObject *granule,
           PyObject *text, PyObject *time)
{
    long long g, t;
    int coarse = compare(granule, ONE, Py_LE);  /* granule > 1: time rounded up to it */
    if (coarse < 0)
        return -1;
    coarse = !coarse;
    Py_INCREF(time);
    if (coarse && small_int(granule, &g) && small_int(time, &t)  /* 1 < g < 2**63 and */
            && t > -(1LL << 62) && t < (1LL << 62)) {  /* |t| < 2**62: the result fits */
        Py_SETREF(time, time_obj(t + floor_mod(-t, g)));
    } else if (coarse) {  /* time += -time % granule, as Python computes it */
        PyObject *minus = PyNumber_Negative(time);
        PyObject *up = minus == NULL ? NULL : PyNumber_Remainder(minus, granule);
        Py_XDECREF(minus);
        Py_SETREF(time, up == NULL ? NULL : PyNumber_Add(time, up));
        Py_XDECREF(up);
    }
    if (time == NULL)
        return -1;
    int failed = -1;
    PyObject *was = PyDict_GetItemWithError(at, text);
    if (was == NULL && PyErr_Occurred())
        goto done;
    if (was != NULL) {
        Py_INCREF(was);
        int kept = compare(was, time, Py_LE);
        Py_DECREF(was);
        if (kept != 0) {
            failed = kept < 0 ? -1 : 0;
            goto done;
        }
    }
    if (PyDict_SetItem(at, text, time) == 0)
        failed = bucket_add(buckets, times, time, text);
done:
    Py_DECREF(time);
    return failed;
}

/* KeyedStates.finish_close's pass over a close's kept rows (key, remaining, due): for each
 * with something remaining, cache[key] = remaining (cache None: no cache) and the key
 * noted at its due time in the index (at, buckets, times, granule); the rows that keep
 * nothing are returned, in order, for the caller to handle. */
static PyObject *
note_kept(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])
            || !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "note_kept(at, buckets, times, granule, kept, cache)");
        return NULL;
    }
    PyObject *kept = args[4], *cache = args[5];
    PyObject *empty = PyList_New(0);
    if (empty == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(kept); k++) {
        PyObject *row = PyList_GET_ITEM(kept, k);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 3) {
            PyErr_SetString(PyExc_TypeError, "note_kept: kept holds (key, remaining, due)");
            goto fail;
        }
        Py_INCREF(row);
        PyObject *text = PyTuple_GET_ITEM(row, 0), *remaining = PyTuple_GET_ITEM(row, 1);
        int something = PyObject_IsTrue(remaining), failed = something < 0;
        if (!failed && !something)
            failed = PyList_Append(empty, row) < 0;
        else if (!failed)
            failed = (cache != Py_None && (PyDict_CheckExact(cache)
                                           ? PyDict_SetItem(cache, text, remaining)
                                           : PyObject_SetItem(cache, text, remaining)) < 0)
                     || index_note(args[0], args[1], args[2], args[3], text,
                                   PyTuple_GET_ITEM(row, 2)) < 0;
        Py_DECREF(row);
        if (failed)
            goto fail;
    }
    return empty;
fail:
    Py_DECREF(empty);
    return NULL;
}

static PyMethodDef methods[] = {
    {"fold", (PyCFunction)(void (*)(void))fold, METH_FASTCALL,
     "fold(layout, param, spec, general, state, value, ts) -> (state, sooner): Panes.fold "
     "(layout 0), Sessions.fold (layout 1) or Columns.fold (layout 2)."},
    {"close_all", (PyCFunction)(void (*)(void))close_all, METH_FASTCALL,
     "close_all(layout, param, size, spec, names, key_from_text, close, taken, load, "
     "closed, bound, result) -> (results, kept, gone): Panes.close_all (layout 0), "
     "Sessions.close_all (layout 1) or Columns.close_all (layout 2)."},
    {"stepper", (PyCFunction)(void (*)(void))stepper, METH_FASTCALL,
     "stepper(windows, event_time, keyed, grace, layout, param, size, spec, general, "
     "close_due, slow, method) -> Stepper: Windows.process in C (see _accel.c)."},
    {"due_take", (PyCFunction)(void (*)(void))due_take, METH_FASTCALL,
     "due_take(at, buckets, times, bound) -> [(time, key)]: DueIndex.due's loop."},
    {"note_kept", (PyCFunction)(void (*)(void))note_kept, METH_FASTCALL,
     "note_kept(at, buckets, times, granule, kept, cache) -> rows keeping nothing: "
     "KeyedStates.finish_close's pass over the rows that keep something."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_accel",
    "The pane layout's fold and close for the built-in reducers, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__accel(void)
{
    ONE = PyLong_FromLong(1);
    if (ONE == NULL)
        return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(S_value, "value");
    INTERN(S_timestamp, "timestamp");
    INTERN(S_key, "key");
    INTERN(S_ssp, "ssp");
    INTERN(S_watermark, "watermark");
    INTERN(S_hot, "hot");
    INTERN(S_dirty, "dirty");
    INTERN(S_quiet, "quiet");
    INTERN(S_next_close, "_next_close");
    INTERN(S_record, "record");
    INTERN(S_s, "s");
    INTERN(S_max_cached, "max_cached");
    INTERN(S_emptied, "emptied");
    INTERN(S_closed, "closed");
    INTERN(S_index, "index");
    INTERN(S_granule, "granule");
    INTERN(S_at, "at");
    INTERN(S_buckets, "_buckets");
    INTERN(S_times, "_times");
    PyObject *heapq = PyImport_ImportModule("_heapq");
    if (heapq == NULL)
        return NULL;
    HEAPPUSH = PyObject_GetAttrString(heapq, "heappush");
    HEAPPOP = HEAPPUSH == NULL ? NULL : PyObject_GetAttrString(heapq, "heappop");
    Py_DECREF(heapq);
    if (HEAPPOP == NULL)
        return NULL;
    if (PyType_Ready(&StepperType) < 0)
        return NULL;
    PyObject *made = PyModule_Create(&module);
    if (made != NULL && (PyModule_AddObject(made, "MAX_TIME",
                                            PyLong_FromLongLong(MAX_TIME)) < 0
                         || PyModule_AddType(made, &StepperType) < 0))
        Py_CLEAR(made);  /* tests/windows/test_accel.py checks it equals kinds.MAX_TIME */
    return made;
}
