/* One engine replica's continuous-batching event loop, compiled: `rollout._simulate_python`
 * step for step (same rules, same integers, same segment rows), for the search's pricing,
 * which runs it hundreds of times per command. The Python function is the reference: the
 * module docstring of `planner/cost/rollout.py` states the rules, and
 * tests/cost/test_rollout_native.py holds the two equal on random replicas. When this module
 * is not built (no C compiler at install), rlplan runs the Python one.
 *
 * simulate(lengths, prompt, capacity, max_seqs, periods)
 *   lengths: a contiguous int64 buffer (the replica's response lengths)
 *   -> (seg: bytearray of int64 rows [steps, batch, kv, done],
 *       pre: bytearray of int64 rows [segment, fresh, fresh_tokens, fresh_sq, re, re_tokens,
 *            re_sq],
 *       ends: tuple, preemptions: int, carried: tuple, peak: int)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef int64_t i64;
#define IDLE (-((i64)1 << 62)) /* `base` of a request not running */

/* ABI: bumped whenever the rules change, so that a stale build is never used (rollout.py) */
#define RULES_VERSION 1

typedef struct {
    i64 *v;
    Py_ssize_t n, cap;
} vec;

static int vec_push(vec *a, i64 x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 256;
        i64 *p = realloc(a->v, (size_t)cap * sizeof(i64));
        if (!p) return -1;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* The running requests by the step they finish at (their due: base + length): a bucket per
 * step modulo a window (the longest response, up to MAX_WINDOW steps), each bucket a doubly
 * linked list — O(1) to add, remove (a preemption) or take a step's completions. The next
 * due is found by scanning forward from a lower bound (`lo`), over steps the run makes anyway,
 * each bucket checked for a request due at that very step (past MAX_WINDOW a bucket also holds
 * later ones). (A heap ordered the same dues; the order within a step never mattered.) */
#define MAX_WINDOW ((i64)1 << 16)

typedef struct {
    i64 *head, *next, *prev, *due; /* head[due & mask]; per request: next/prev (-1: none), due */
    i64 mask, lo;
} calendar;

static void cal_add(calendar *c, i64 i, i64 due) {
    i64 *h = &c->head[due & c->mask];
    c->due[i] = due;
    c->next[i] = *h;
    c->prev[i] = -1;
    if (*h >= 0) c->prev[*h] = i;
    *h = i;
    if (due < c->lo) c->lo = due;
}

static void cal_remove(calendar *c, i64 i) {
    if (c->prev[i] >= 0) c->next[c->prev[i]] = c->next[i];
    else c->head[c->due[i] & c->mask] = c->next[i];
    if (c->next[i] >= 0) c->prev[c->next[i]] = c->prev[i];
}

/* the least due at or after `now` (one request at least is running) */
static i64 cal_next(calendar *c, i64 now) {
    for (i64 t = c->lo > now ? c->lo : now;; t++)
        for (i64 j = c->head[t & c->mask]; j >= 0; j = c->next[j])
            if (c->due[j] == t) return c->lo = t;
}

/* the waiting queue: a ring over every request the run can hold (each waits at most once) */
typedef struct {
    i64 *v;
    Py_ssize_t head, n, cap;
} ring;

static inline i64 ring_front(ring *q) { return q->v[q->head]; }
static inline void ring_pop_front(ring *q) { q->head = (q->head + 1) % q->cap; q->n--; }
static inline void ring_push_front(ring *q, i64 x) {
    q->head = (q->head + q->cap - 1) % q->cap;
    q->v[q->head] = x;
    q->n++;
}
static inline void ring_push_back(ring *q, i64 x) { q->v[(q->head + q->n++) % q->cap] = x; }

static PyObject *tuple_of(vec *a) {
    PyObject *t = PyTuple_New(a->n);
    if (!t) return NULL;
    for (Py_ssize_t k = 0; k < a->n; k++) {
        PyObject *x = PyLong_FromLongLong(a->v[k]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *simulate(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long prompt, capacity, max_seqs, periods;
    if (!PyArg_ParseTuple(args, "y*LLLL", &buf, &prompt, &capacity, &max_seqs, &periods))
        return NULL;
    const i64 *lengths = (const i64 *)buf.buf;
    Py_ssize_t share = buf.len / (Py_ssize_t)sizeof(i64);
    PyObject *out = NULL;
    if (share < 1 || max_seqs < 1 || periods < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "simulate: no lengths, max_seqs < 1 or periods < 0");
        return NULL;
    }
    /* partial rollouts: the next prompts are always queued (rollout.py) */
    i64 ahead = periods ? share + (max_seqs < share ? max_seqs : share) : share;
    Py_ssize_t total = (Py_ssize_t)ahead * (periods + 1); /* each period adds at most `ahead` */
    i64 *length = malloc((size_t)total * sizeof(i64));
    i64 *progress = calloc((size_t)total, sizeof(i64));
    i64 *base = malloc((size_t)total * sizeof(i64));
    ring waiting = {malloc((size_t)total * sizeof(i64)), 0, 0, total};
    vec stack = {0}, seg = {0}, pre = {0}, ends = {0}, carried = {0};
    i64 longest = 1, window = 2;
    for (Py_ssize_t k = 0; k < share; k++)
        if (lengths[k] > longest) longest = lengths[k];
    while (window <= longest && window < MAX_WINDOW) window <<= 1;
    calendar due = {malloc((size_t)window * sizeof(i64)), malloc((size_t)total * sizeof(i64)),
                    malloc((size_t)total * sizeof(i64)), malloc((size_t)total * sizeof(i64)),
                    window - 1, INT64_MAX};
    if (!length || !progress || !base || !waiting.v || !due.head || !due.next || !due.prev
        || !due.due) {
        PyErr_NoMemory();
        goto done;
    }
    for (i64 t = 0; t < window; t++) due.head[t] = -1;
    Py_ssize_t n_req = ahead;
    for (Py_ssize_t k = 0; k < ahead; k++) {
        length[k] = lengths[k % share];
        base[k] = IDLE;
        ring_push_back(&waiting, k);
    }
    i64 now = 0, used = 0, running = 0, preemptions = 0, period = 0, completed = 0, peak = 0;
    i64 unstarted = ahead;
    const i64 bound = capacity + 1; /* the peak of a run the cache bound */
#define PUSH(v, x) do { if (vec_push(&(v), (x))) { PyErr_NoMemory(); goto done; } } while (0)
    for (;;) {
        if (used + running > capacity) { /* reserve the running sequences' new slots */
            peak = bound;
            while (used + running > capacity) {
                i64 i = stack.v[--stack.n], a = base[i];
                if (a == IDLE) continue; /* finished since it was admitted */
                cal_remove(&due, i);
                i64 g = now - a;
                used -= prompt + g;
                progress[i] = g;
                base[i] = IDLE;
                running--;
                preemptions++;
                ring_push_front(&waiting, i);
            }
        } else if (waiting.n && running < max_seqs) {
            i64 fresh = 0, fresh_tokens = 0, fresh_sq = 0, re = 0, re_tokens = 0, re_sq = 0;
            while (waiting.n && running < max_seqs) {
                i64 i = ring_front(&waiting), g = progress[i], c = prompt + g;
                i64 need = used + running + c + 1;
                if (need > capacity) { peak = bound; break; }
                if (need > peak) peak = need;
                ring_pop_front(&waiting);
                if (g) { re++; re_tokens += c; re_sq += c * c; }
                else { fresh++; fresh_tokens += c; fresh_sq += c * c; unstarted--; }
                i64 a = base[i] = now - g;
                cal_add(&due, i, a + length[i]);
                PUSH(stack, i);
                used += c;
                running++;
            }
            if (fresh || re) {
                PUSH(pre, seg.n >> 2); PUSH(pre, fresh); PUSH(pre, fresh_tokens);
                PUSH(pre, fresh_sq); PUSH(pre, re); PUSH(pre, re_tokens); PUSH(pre, re_sq);
            }
        }
        if (!running) goto empty;
        i64 b = running, steps = cal_next(&due, now) - now;
        if (used + b * steps > capacity) { /* the cache fills first */
            steps = (capacity - used) / b; /* capacity − used ≥ b > 0: floor division */
            peak = bound;
            i64 kv = used + b;
            now += steps;
            used += b * steps;
            PUSH(seg, steps); PUSH(seg, b); PUSH(seg, kv); PUSH(seg, 0);
            continue;
        }
        if (used + b * steps > peak) peak = used + b * steps;
        i64 kv = used + b, count = 0;
        now += steps;
        used += b * steps;
        for (i64 j = due.head[now & due.mask], after; j >= 0; j = after) {
            after = due.next[j];
            if (due.due[j] != now) continue; /* a later one in the same bucket */
            cal_remove(&due, j);
            used -= prompt + length[j];
            base[j] = IDLE;
            running--;
            count++;
        }
        PUSH(seg, steps); PUSH(seg, b); PUSH(seg, kv); PUSH(seg, count);
        completed += count;
        if (periods && completed >= share) { /* a step boundary (partial rollouts) */
            period++;
            completed = 0;
            PUSH(ends, seg.n >> 2);
            if (period == periods) break;
            /* interrupted: back to the front of the queue, in admission order */
            for (Py_ssize_t k = stack.n - 1; k >= 0; k--) {
                i64 j = stack.v[k];
                if (base[j] == IDLE) continue;
                cal_remove(&due, j);
                progress[j] = now - base[j];
                base[j] = IDLE;
                ring_push_front(&waiting, j);
            }
            i64 sum = 0;
            for (Py_ssize_t k = 0; k < waiting.n; k++)
                sum += progress[waiting.v[(waiting.head + k) % waiting.cap]];
            PUSH(carried, sum);
            stack.n = 0;
            due.lo = INT64_MAX;
            used = running = 0;
            i64 more = ahead - unstarted;
            for (i64 k = n_req; k < n_req + more; k++) {
                length[k] = lengths[k % share];
                progress[k] = 0;
                base[k] = IDLE;
                ring_push_back(&waiting, k);
            }
            n_req += more;
            unstarted += more;
        } else if (!running && !waiting.n) {
            break;
        }
    }
#undef PUSH
    {
        PyObject *seg_b = PyByteArray_FromStringAndSize((const char *)seg.v,
                                                        seg.n * (Py_ssize_t)sizeof(i64));
        PyObject *pre_b = PyByteArray_FromStringAndSize((const char *)pre.v,
                                                        pre.n * (Py_ssize_t)sizeof(i64));
        PyObject *ends_t = tuple_of(&ends), *carried_t = tuple_of(&carried);
        if (seg_b && pre_b && ends_t && carried_t)
            out = Py_BuildValue("(OOOLOL)", seg_b, pre_b, ends_t, (long long)preemptions,
                                carried_t, (long long)peak);
        Py_XDECREF(seg_b);
        Py_XDECREF(pre_b);
        Py_XDECREF(ends_t);
        Py_XDECREF(carried_t);
    }
    goto done;
empty: /* nothing running to wait for: the rules above never get here (a broken invariant) */
    PyErr_SetString(PyExc_RuntimeError, "simulate: no running sequence to wait for");
done:
    free(length);
    free(progress);
    free(base);
    free(waiting.v);
    free(stack.v);
    free(due.head);
    free(due.next);
    free(due.prev);
    free(due.due);
    free(seg.v);
    free(pre.v);
    free(ends.v);
    free(carried.v);
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"simulate", simulate, METH_VARARGS,
     "simulate(lengths, prompt, capacity, max_seqs, periods): one replica's event loop "
     "(planner.cost.rollout._simulate_python, compiled)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rollout_sim", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rollout_sim(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "RULES_VERSION", RULES_VERSION)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
