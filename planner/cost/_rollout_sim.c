/* One engine replica's continuous-batching event loop, compiled: `rollout._simulate_python`
 * step for step (same rules, same integers, same segment rows), for the search's pricing,
 * which runs it hundreds of times per command. The Python function is the reference: the
 * module docstring of `planner/cost/rollout.py` states the rules, and
 * tests/cost/test_rollout_native.py holds the two equal on random replicas. When this module
 * is not built (no C compiler at install), rlplan runs the Python one.
 *
 * simulate(lengths, bounds, prompt, capacity, max_seqs, periods)
 *   lengths: a contiguous int64 buffer (the step's response lengths)
 *   bounds: int64 pairs (start, end): the replicas, each run on lengths[start:end]
 *   -> eight bytes objects of int64, every replica's after the one before (one call for a
 *      schedule's replicas: per replica, Python would cost as much as the run):
 *      seg: rows [steps, batch, kv, done];
 *      pre: rows [segment (within its run), fresh, fresh_tokens, fresh_sq, re, re_tokens,
 *           re_sq];
 *      seg_n, pre_n: each run's rows of seg and pre;
 *      ends: `periods` per run (its segments at each step boundary, within the run);
 *      preemptions: one per run; carried: `periods` − 1 per run; peak: one per run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef int64_t i64;
#define IDLE (-((i64)1 << 62)) /* `base` of a request not running */

/* bumped whenever the rules or the call change, so that a stale build is never used (rollout.py) */
#define RULES_VERSION 2

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
 * step modulo a window, each bucket a doubly linked list — O(1) to add, remove (a preemption)
 * or take a step's completions — and a bit per bucket, set while it holds a request. The next
 * due is found from a lower bound (`lo`) by the bits, 64 buckets a word, each occupied bucket
 * checked for a request due at that very step: a bucket also holds requests due a window or
 * more later. The window is a power of two from 64 up to the longest response, and at most
 * WINDOW_PER_REQUEST buckets a request the run can hold (a small replica's calendar stays in
 * the fastest cache) or MAX_WINDOW. (A heap ordered the same dues; the order within a step
 * never mattered.) */
#define MIN_WINDOW ((i64)64)
#define MAX_WINDOW ((i64)1 << 16)
#define WINDOW_PER_REQUEST 4

typedef struct {
    i64 *head, *next, *prev, *due; /* head[due & mask]; per request: next/prev (-1: none), due */
    uint64_t *bits; /* bit b of word b >> 6: bucket b holds a request */
    i64 mask, lo;
} calendar;

static inline int lowest_bit(uint64_t x) { /* x != 0 */
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int k = 0;
    while (!(x & 1)) { x >>= 1; k++; }
    return k;
#endif
}

static void cal_add(calendar *c, i64 i, i64 due) {
    i64 b = due & c->mask, *h = &c->head[b];
    c->due[i] = due;
    c->next[i] = *h;
    c->prev[i] = -1;
    if (*h >= 0) c->prev[*h] = i;
    *h = i;
    c->bits[b >> 6] |= (uint64_t)1 << (b & 63);
    if (due < c->lo) c->lo = due;
}

static void cal_remove(calendar *c, i64 i) {
    if (c->prev[i] >= 0) c->next[c->prev[i]] = c->next[i];
    else {
        i64 b = c->due[i] & c->mask;
        c->head[b] = c->next[i];
        if (c->next[i] < 0) c->bits[b >> 6] &= ~((uint64_t)1 << (b & 63));
    }
    if (c->next[i] >= 0) c->prev[c->next[i]] = c->prev[i];
}

/* the least due at or after `now` (one request at least is running) */
static i64 cal_next(calendar *c, i64 now) {
    const i64 words = (c->mask + 1) >> 6;
    for (i64 t = c->lo > now ? c->lo : now;; t++) {
        i64 b = t & c->mask, w = b >> 6;
        uint64_t word = c->bits[w] >> (b & 63); /* the buckets from b on in its word */
        if (word) t += lowest_bit(word);
        else { /* on to the next occupied word, round the window */
            t += 64 - (b & 63);
            for (w = (w + 1) & (words - 1); !c->bits[w]; w = (w + 1) & (words - 1)) t += 64;
            t += lowest_bit(c->bits[w]);
        }
        for (i64 j = c->head[t & c->mask]; j >= 0; j = c->next[j])
            if (c->due[j] == t) return c->lo = t;
    }
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

/* what the runs of a call give, appended run after run (`simulate`'s result) */
typedef struct {
    vec seg, pre, seg_n, pre_n, ends, preemptions, carried, peak;
} runs;

/* One replica's run of `lengths[0:share]`, appended to `o` (its `pre` segments and `ends`
 * counted within the run); 0, or -1 with a Python error set. */
static int run_replica(const i64 *lengths, Py_ssize_t share, i64 prompt, i64 capacity,
                       i64 max_seqs, i64 periods, runs *o) {
    int rc = -1;
    const Py_ssize_t seg0 = o->seg.n, pre0 = o->pre.n, ends0 = o->ends.n;
    /* partial rollouts: the next prompts are always queued (rollout.py) */
    i64 ahead = periods ? share + (max_seqs < share ? max_seqs : share) : share;
    Py_ssize_t total = (Py_ssize_t)ahead * (periods + 1); /* each period adds at most `ahead` */
    i64 *length = malloc((size_t)total * sizeof(i64));
    i64 *progress = calloc((size_t)total, sizeof(i64));
    i64 *base = malloc((size_t)total * sizeof(i64));
    ring waiting = {malloc((size_t)total * sizeof(i64)), 0, 0, total};
    vec stack = {0};
    i64 longest = 1, window = MIN_WINDOW;
    for (Py_ssize_t k = 0; k < share; k++)
        if (lengths[k] > longest) longest = lengths[k];
    while (window <= longest && window < MAX_WINDOW && window < WINDOW_PER_REQUEST * total)
        window <<= 1;
    calendar due = {malloc((size_t)window * sizeof(i64)), malloc((size_t)total * sizeof(i64)),
                    malloc((size_t)total * sizeof(i64)), malloc((size_t)total * sizeof(i64)),
                    calloc((size_t)(window >> 6), sizeof(uint64_t)), window - 1, INT64_MAX};
    if (!length || !progress || !base || !waiting.v || !due.head || !due.next || !due.prev
        || !due.due || !due.bits) {
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
#define SEGMENTS ((o->seg.n - seg0) >> 2) /* this run's segments so far */
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
                PUSH(o->pre, SEGMENTS); PUSH(o->pre, fresh); PUSH(o->pre, fresh_tokens);
                PUSH(o->pre, fresh_sq); PUSH(o->pre, re); PUSH(o->pre, re_tokens);
                PUSH(o->pre, re_sq);
            }
        }
        if (!running) { /* nothing to wait for: the rules above never get here */
            PyErr_SetString(PyExc_RuntimeError, "simulate: no running sequence to wait for");
            goto done;
        }
        i64 b = running, steps = cal_next(&due, now) - now;
        if (used + b * steps > capacity) { /* the cache fills first */
            steps = (capacity - used) / b; /* capacity − used ≥ b > 0: floor division */
            peak = bound;
            i64 kv = used + b;
            now += steps;
            used += b * steps;
            PUSH(o->seg, steps); PUSH(o->seg, b); PUSH(o->seg, kv); PUSH(o->seg, 0);
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
        PUSH(o->seg, steps); PUSH(o->seg, b); PUSH(o->seg, kv); PUSH(o->seg, count);
        completed += count;
        if (periods && completed >= share) { /* a step boundary (partial rollouts) */
            period++;
            completed = 0;
            PUSH(o->ends, SEGMENTS);
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
            PUSH(o->carried, sum);
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
    if (o->ends.n - ends0 != periods) { /* every run ends `periods` steps: a broken invariant */
        PyErr_SetString(PyExc_RuntimeError, "simulate: a run ended short of its periods");
        goto done;
    }
    PUSH(o->seg_n, SEGMENTS);
    PUSH(o->pre_n, (o->pre.n - pre0) / 7);
    PUSH(o->preemptions, preemptions);
    PUSH(o->peak, peak);
    rc = 0;
#undef SEGMENTS
#undef PUSH
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
    free(due.bits);
    return rc;
}

static PyObject *bytes_of(vec *a) {
    return PyBytes_FromStringAndSize((const char *)a->v, a->n * (Py_ssize_t)sizeof(i64));
}

static PyObject *simulate(PyObject *self, PyObject *args) {
    Py_buffer buf, bounds_buf;
    long long prompt, capacity, max_seqs, periods;
    if (!PyArg_ParseTuple(args, "y*y*LLLL", &buf, &bounds_buf, &prompt, &capacity, &max_seqs,
                          &periods))
        return NULL;
    const i64 *lengths = (const i64 *)buf.buf, *bounds = (const i64 *)bounds_buf.buf;
    Py_ssize_t n = buf.len / (Py_ssize_t)sizeof(i64);
    Py_ssize_t k = bounds_buf.len / (Py_ssize_t)(2 * sizeof(i64));
    PyObject *out = NULL;
    runs o = {{0}};
    if (max_seqs < 1 || periods < 0) {
        PyErr_SetString(PyExc_ValueError, "simulate: max_seqs < 1 or periods < 0");
        goto done;
    }
    for (Py_ssize_t r = 0; r < k; r++) {
        i64 a = bounds[2 * r], b = bounds[2 * r + 1];
        if (a < 0 || b > n || b <= a) {
            PyErr_SetString(PyExc_ValueError,
                            "simulate: a replica's (start, end) is empty or outside the lengths");
            goto done;
        }
        if (run_replica(lengths + a, b - a, prompt, capacity, max_seqs, periods, &o))
            goto done;
    }
    vec *parts[] = {&o.seg, &o.pre, &o.seg_n, &o.pre_n, &o.ends, &o.preemptions, &o.carried,
                    &o.peak};
    out = PyTuple_New(8);
    for (int p = 0; out && p < 8; p++) {
        PyObject *x = bytes_of(parts[p]);
        if (!x) { Py_CLEAR(out); break; }
        PyTuple_SET_ITEM(out, p, x);
    }
done:
    free(o.seg.v); free(o.pre.v); free(o.seg_n.v); free(o.pre_n.v); free(o.ends.v);
    free(o.preemptions.v); free(o.carried.v); free(o.peak.v);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&bounds_buf);
    return out;
}

static PyMethodDef methods[] = {
    {"simulate", simulate, METH_VARARGS,
     "simulate(lengths, bounds, prompt, capacity, max_seqs, periods): the replicas' event "
     "loops (planner.cost.rollout._simulate_python, compiled), run after run."},
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
