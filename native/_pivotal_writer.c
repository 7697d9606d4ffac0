/* The write connection of a SQLite ledger (Python's sqlite3.Connection, whose handle this
 * drives) runs a whole group of write batches, from BEGIN to COMMIT, without the
 * interpreter lock.
 *
 * The lock is held only to read the statements' parameters before the transaction and to
 * build the answers after it: another thread of the process (its event loop) runs while
 * this one holds the ledger's write lock, and the write lock is never held while waiting
 * for the interpreter lock. The rules are those of the pure-Python group writer
 * (pivotal/store/writer.py), which stays the fallback: a group runs in one transaction;
 * when a batch fails, the transaction is rolled back and the group runs again with a
 * savepoint per batch, so that the failing one takes nothing else with it.
 *
 * A statement is any object with the attributes of pivotal.store.primitives.Stmt: sql,
 * params, many, fence (None or not), guard and returning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { V_NULL, V_INT, V_REAL, V_TEXT, V_BLOB };

typedef struct {
    int type;
    sqlite3_int64 i;
    double d;
    const char *p; /* text or blob: borrowed from a Python object the group holds */
    Py_ssize_t n;
} Value;

typedef struct {
    sqlite3_stmt *stmt;
    int many, fence, guard, returning, readonly;
    Py_ssize_t rows;   /* parameter sets: 1, or len(params) when many */
    Py_ssize_t width;  /* parameters a set */
    Value *values;     /* rows * width */
} Plan;

typedef struct {
    Value *cells;
    int ncol;
} OutRow;

typedef struct {
    OutRow *rows;
    Py_ssize_t n, cap;
} OutRows;

enum { OK = 0, FAILED_FENCE = 1, FAILED_SQL = 2, FAILED_BIND = 3 };

typedef struct {
    Plan *plans;
    Py_ssize_t nplans;
    int outcome;          /* OK, FAILED_... */
    Py_ssize_t failed_at; /* the statement that failed */
    int code;             /* sqlite's extended code, for FAILED_SQL */
    char *message;        /* malloc'd */
    int stopped;
    OutRows *out;         /* one per returning statement that ran */
    Py_ssize_t nout;
} Batch;

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the sqlite3.Connection whose handle this drives */
    sqlite3 *db;
    PyObject *cache; /* sql str -> capsule of sqlite3_stmt* */
    long long commits;
} Conn;

/* The start of CPython's sqlite3.Connection (Modules/_sqlite/connection.h, 3.11 to 3.13):
 * the handle follows the object's head. Conn_init checks the handle it reads. */
typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} PySqliteConnectionHead;

static PyTypeObject *PySqliteConnectionType;

static PyObject *Fence, *SqlError, *IntegrityError, *BindError;

/* -- helpers ------------------------------------------------------------------------- */

static void out_free(OutRows *o) {
    if (!o) return;
    for (Py_ssize_t r = 0; r < o->n; r++) {
        for (int c = 0; c < o->rows[r].ncol; c++) {
            Value *v = &o->rows[r].cells[c];
            if (v->type == V_TEXT || v->type == V_BLOB) free((void *)v->p);
        }
        free(o->rows[r].cells);
    }
    free(o->rows);
}

static void batch_reset(Batch *b) {
    for (Py_ssize_t k = 0; k < b->nout; k++) out_free(&b->out[k]);
    b->nout = 0;
    free(b->message);
    b->message = NULL;
    b->outcome = OK;
    b->stopped = 0;
    b->failed_at = -1;
    b->code = 0;
}

static void batch_free(Batch *b) {
    batch_reset(b);
    free(b->out);
    for (Py_ssize_t k = 0; k < b->nplans; k++) free(b->plans[k].values);
    free(b->plans);
}

static void stmt_destroy(PyObject *capsule) {
    sqlite3_finalize((sqlite3_stmt *)PyCapsule_GetPointer(capsule, NULL));
}

static sqlite3_stmt *prepared(Conn *self, PyObject *sql) {
    PyObject *found = PyDict_GetItemWithError(self->cache, sql);
    if (found) return (sqlite3_stmt *)PyCapsule_GetPointer(found, NULL);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(sql, &n);
    if (!text) return NULL;
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v3(self->db, text, (int)n + 1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL);
    if (rc != SQLITE_OK) {
        PyErr_Format(SqlError, "%s", sqlite3_errmsg(self->db));
        sqlite3_finalize(stmt);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(stmt, NULL, stmt_destroy);
    if (!capsule) {
        sqlite3_finalize(stmt);
        return NULL;
    }
    int bad = PyDict_SetItem(self->cache, sql, capsule);
    Py_DECREF(capsule);
    return bad ? NULL : stmt;
}

/* A parameter as a Value, borrowing its bytes from the object (the group holds it). */
static int to_value(PyObject *o, Value *v) {
    if (o == Py_None) {
        v->type = V_NULL;
    } else if (PyLong_Check(o)) {
        int overflow = 0;
        v->i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_OverflowError, "Python int too large to bind");
            return -1;
        }
        if (v->i == -1 && PyErr_Occurred()) return -1;
        v->type = V_INT;
    } else if (PyFloat_Check(o)) {
        v->d = PyFloat_AS_DOUBLE(o);
        v->type = V_REAL;
    } else if (PyUnicode_Check(o)) {
        v->p = PyUnicode_AsUTF8AndSize(o, &v->n);
        if (!v->p) return -1;
        v->type = V_TEXT;
    } else if (PyBytes_Check(o)) {
        v->p = PyBytes_AS_STRING(o);
        v->n = PyBytes_GET_SIZE(o);
        v->type = V_BLOB;
    } else {
        PyErr_Format(PyExc_TypeError, "type '%s' is not supported as a parameter",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

static int flag(PyObject *stmt, const char *name) {
    PyObject *o = PyObject_GetAttrString(stmt, name);
    if (!o) return -1;
    int truth = PyObject_IsTrue(o);
    Py_DECREF(o);
    return truth;
}

/* The values of one parameter set; ``keep`` holds each object whose bytes a value borrows,
 * whatever becomes of the sequence it came in while the group runs. */
static int values_of(PyObject *params, Value *into, Py_ssize_t width, PyObject *keep) {
    for (Py_ssize_t k = 0; k < width; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(params, k);
        if (to_value(item, &into[k]) < 0) return -1;
        if ((into[k].type == V_TEXT || into[k].type == V_BLOB) && PyList_Append(keep, item) < 0)
            return -1;
    }
    return 0;
}

/* Read one batch's statements (with the interpreter lock). `keep` collects the sequences
 * whose items the values borrow from. */
static int plan_batch(Conn *self, PyObject *stmts, Batch *b, PyObject *keep) {
    PyObject *seq = PySequence_Fast(stmts, "a batch is a sequence of statements");
    if (!seq) return -1;
    if (PyList_Append(keep, seq) < 0) {
        Py_DECREF(seq);
        return -1;
    }
    Py_DECREF(seq);
    b->nplans = PySequence_Fast_GET_SIZE(seq);
    b->plans = calloc((size_t)b->nplans + 1, sizeof(Plan));
    if (!b->plans) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < b->nplans; k++) {
        PyObject *st = PySequence_Fast_GET_ITEM(seq, k);
        Plan *p = &b->plans[k];
        PyObject *sql = PyObject_GetAttrString(st, "sql");
        if (!sql) return -1;
        p->stmt = PyUnicode_Check(sql) ? prepared(self, sql) : NULL;
        if (!PyUnicode_Check(sql)) PyErr_SetString(PyExc_TypeError, "sql must be a str");
        Py_DECREF(sql);
        if (!p->stmt) return -1;
        p->readonly = sqlite3_stmt_readonly(p->stmt);
        PyObject *fence = PyObject_GetAttrString(st, "fence");
        if (!fence) return -1;
        p->fence = fence != Py_None;
        Py_DECREF(fence);
        if ((p->many = flag(st, "many")) < 0) return -1;
        if ((p->guard = flag(st, "guard")) < 0) return -1;
        if ((p->returning = flag(st, "returning")) < 0) return -1;
        PyObject *params = PyObject_GetAttrString(st, "params");
        if (!params) return -1;
        PyObject *pseq = PySequence_Fast(params, "params must be a sequence");
        Py_DECREF(params);
        if (!pseq) return -1;
        if (PyList_Append(keep, pseq) < 0) {
            Py_DECREF(pseq);
            return -1;
        }
        Py_DECREF(pseq);
        p->width = sqlite3_bind_parameter_count(p->stmt);
        if (p->many) {
            p->rows = PySequence_Fast_GET_SIZE(pseq);
            p->values = calloc((size_t)(p->rows * p->width) + 1, sizeof(Value));
            if (!p->values) {
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t r = 0; r < p->rows; r++) {
                PyObject *one = PySequence_Fast(PySequence_Fast_GET_ITEM(pseq, r),
                                                "each parameter set must be a sequence");
                if (!one) return -1;
                int bad = PyList_Append(keep, one);
                Py_DECREF(one);
                if (bad) return -1;
                if (PySequence_Fast_GET_SIZE(one) != p->width) {
                    PyErr_Format(PyExc_ValueError, "%zd parameters given, %zd needed",
                                 PySequence_Fast_GET_SIZE(one), p->width);
                    return -1;
                }
                if (values_of(one, &p->values[r * p->width], p->width, keep) < 0) return -1;
            }
        } else {
            p->rows = 1;
            if (PySequence_Fast_GET_SIZE(pseq) != p->width) {
                PyErr_Format(PyExc_ValueError, "%zd parameters given, %zd needed",
                             PySequence_Fast_GET_SIZE(pseq), p->width);
                return -1;
            }
            p->values = calloc((size_t)p->width + 1, sizeof(Value));
            if (!p->values) {
                PyErr_NoMemory();
                return -1;
            }
            if (values_of(pseq, p->values, p->width, keep) < 0) return -1;
        }
    }
    return 0;
}

/* -- without the interpreter lock ------------------------------------------------------ */

static int bind_row(sqlite3_stmt *stmt, const Value *v, Py_ssize_t width) {
    for (Py_ssize_t k = 0; k < width; k++) {
        int rc, at = (int)k + 1;
        switch (v[k].type) {
        case V_NULL: rc = sqlite3_bind_null(stmt, at); break;
        case V_INT: rc = sqlite3_bind_int64(stmt, at, v[k].i); break;
        case V_REAL: rc = sqlite3_bind_double(stmt, at, v[k].d); break;
        case V_TEXT: rc = sqlite3_bind_text64(stmt, at, v[k].p, (sqlite3_uint64)v[k].n, SQLITE_STATIC, SQLITE_UTF8); break;
        default: rc = sqlite3_bind_blob64(stmt, at, v[k].p, (sqlite3_uint64)v[k].n, SQLITE_STATIC); break;
        }
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

static int keep_row(sqlite3_stmt *stmt, OutRows *o) {
    if (o->n == o->cap) {
        Py_ssize_t cap = o->cap ? o->cap * 2 : 4;
        OutRow *rows = realloc(o->rows, (size_t)cap * sizeof(OutRow));
        if (!rows) return SQLITE_NOMEM;
        o->rows = rows;
        o->cap = cap;
    }
    int ncol = sqlite3_column_count(stmt);
    Value *cells = calloc((size_t)ncol + 1, sizeof(Value));
    if (!cells) return SQLITE_NOMEM;
    for (int c = 0; c < ncol; c++) {
        Value *v = &cells[c];
        switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_INTEGER: v->type = V_INT; v->i = sqlite3_column_int64(stmt, c); break;
        case SQLITE_FLOAT: v->type = V_REAL; v->d = sqlite3_column_double(stmt, c); break;
        case SQLITE_NULL: v->type = V_NULL; break;
        default: {
            int blob = sqlite3_column_type(stmt, c) == SQLITE_BLOB;
            const void *src = blob ? sqlite3_column_blob(stmt, c) : (const void *)sqlite3_column_text(stmt, c);
            int n = sqlite3_column_bytes(stmt, c);
            char *copy = malloc((size_t)n + 1);
            if (!copy) return SQLITE_NOMEM;
            if (n) memcpy(copy, src, (size_t)n);
            copy[n] = 0;
            v->type = blob ? V_BLOB : V_TEXT;
            v->p = copy;
            v->n = n;
        }
        }
    }
    o->rows[o->n].cells = cells;
    o->rows[o->n].ncol = ncol;
    o->n++;
    return SQLITE_OK;
}

static void failed_sql(Batch *b, sqlite3 *db, Py_ssize_t at) {
    b->outcome = FAILED_SQL;
    b->failed_at = at;
    b->code = sqlite3_extended_errcode(db);
    const char *msg = sqlite3_errmsg(db);
    b->message = malloc(strlen(msg) + 1);
    if (b->message) strcpy(b->message, msg);
}

/* Run one batch's statements; its outcome is recorded in it. */
static void run_batch(sqlite3 *db, Batch *b) {
    for (Py_ssize_t k = 0; k < b->nplans; k++) {
        Plan *p = &b->plans[k];
        OutRows *out = NULL;
        if (p->returning) {
            out = &b->out[b->nout++];
            memset(out, 0, sizeof *out);
        }
        sqlite3_int64 changed = 0;
        for (Py_ssize_t r = 0; r < p->rows; r++) {
            sqlite3_reset(p->stmt);
            sqlite3_clear_bindings(p->stmt);
            if (bind_row(p->stmt, &p->values[r * p->width], p->width) != SQLITE_OK) {
                failed_sql(b, db, k);
                return;
            }
            int rc;
            while ((rc = sqlite3_step(p->stmt)) == SQLITE_ROW) {
                if (out && keep_row(p->stmt, out) != SQLITE_OK) {
                    sqlite3_reset(p->stmt);
                    b->outcome = FAILED_SQL;
                    b->failed_at = k;
                    b->code = SQLITE_NOMEM;
                    return;
                }
            }
            if (rc != SQLITE_DONE) {
                failed_sql(b, db, k);
                sqlite3_reset(p->stmt);
                return;
            }
            changed = sqlite3_changes64(db);
            sqlite3_reset(p->stmt);
        }
        if (p->many) continue;
        sqlite3_int64 rowcount = p->readonly ? -1 : changed;
        if (p->fence && rowcount != 1) {
            b->outcome = FAILED_FENCE;
            b->failed_at = k;
            return;
        }
        if (p->guard && rowcount == 0) {
            b->stopped = 1;
            return;
        }
    }
}

static int exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

static unsigned long long jitter_state = 88172645463325252ULL;

static double jitter(void) {
    jitter_state ^= jitter_state << 13;
    jitter_state ^= jitter_state >> 7;
    jitter_state ^= jitter_state << 17;
    return 0.5 + (double)(jitter_state % 1000000) / 1000000.0;
}

static double monotonic(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* BEGIN IMMEDIATE, waiting for another process's write lock in short, jittered steps (as
 * writer.begin does). */
static int begin(sqlite3 *db, double timeout) {
    double deadline = monotonic() + timeout, pause = 0.0002;
    for (;;) {
        int rc = exec(db, "BEGIN IMMEDIATE");
        if ((rc & 0xFF) != SQLITE_BUSY || monotonic() >= deadline) return rc;
        double wait = pause * jitter();
        struct timespec t = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&t, NULL);
        pause = pause * 1.5 < 0.004 ? pause * 1.5 : 0.004;
    }
}

/* The group, as writer.GroupWriter._run does it. Returns SQLITE_OK, or the code that lost
 * the whole transaction (then *lost_msg is set). */
__attribute__((noinline)) static int run_group(sqlite3 *db, Batch **bs, Py_ssize_t n, double timeout, char **lost_msg) {
    int rc = begin(db, timeout);
    if (rc != SQLITE_OK) goto lost;
    if (n == 1) {
        run_batch(db, bs[0]);
        if (bs[0]->outcome != OK) {
            if (!sqlite3_get_autocommit(db) && (rc = exec(db, "ROLLBACK")) != SQLITE_OK) goto lost;
            return SQLITE_OK;
        }
        if ((rc = exec(db, "COMMIT")) != SQLITE_OK) goto lost;
        return SQLITE_OK;
    }
    int failed = 0;
    for (Py_ssize_t k = 0; k < n && !failed; k++) {
        run_batch(db, bs[k]);
        failed = bs[k]->outcome != OK;
    }
    if (!failed) {
        if ((rc = exec(db, "COMMIT")) == SQLITE_OK) return SQLITE_OK;
        /* fall through: the careful run below tells which failed, or loses all */
    }
    for (Py_ssize_t k = 0; k < n; k++) batch_reset(bs[k]);
    if (!sqlite3_get_autocommit(db) && (rc = exec(db, "ROLLBACK")) != SQLITE_OK) goto lost;
    if ((rc = begin(db, timeout)) != SQLITE_OK) goto lost;
    for (Py_ssize_t k = 0; k < n; k++) {
        if ((rc = exec(db, "SAVEPOINT job")) != SQLITE_OK) goto lost;
        run_batch(db, bs[k]);
        if (bs[k]->outcome != OK) {
            if (sqlite3_get_autocommit(db)) {  /* SQLite rolled back the whole transaction */
                rc = bs[k]->code ? bs[k]->code : SQLITE_ERROR;
                goto lost;
            }
            if ((rc = exec(db, "ROLLBACK TO job")) != SQLITE_OK) goto lost;
        }
        if ((rc = exec(db, "RELEASE job")) != SQLITE_OK) goto lost;
    }
    if ((rc = exec(db, "COMMIT")) != SQLITE_OK) goto lost;
    return SQLITE_OK;
lost: {
        const char *msg = sqlite3_errmsg(db);
        *lost_msg = malloc(strlen(msg) + 1);
        if (*lost_msg) strcpy(*lost_msg, msg);
        if (!sqlite3_get_autocommit(db)) exec(db, "ROLLBACK");
        return rc ? rc : SQLITE_ERROR;
    }
}

/* -- back with the interpreter lock ---------------------------------------------------- */

static PyObject *cell(const Value *v) {
    switch (v->type) {
    case V_NULL: Py_RETURN_NONE;
    case V_INT: return PyLong_FromLongLong(v->i);
    case V_REAL: return PyFloat_FromDouble(v->d);
    case V_TEXT: return PyUnicode_DecodeUTF8(v->p, v->n, "strict");
    default: return PyBytes_FromStringAndSize(v->p, v->n);
    }
}

static PyObject *rows_of(const OutRows *o) {
    PyObject *list = PyList_New(o->n);
    if (!list) return NULL;
    for (Py_ssize_t r = 0; r < o->n; r++) {
        PyObject *row = PyTuple_New(o->rows[r].ncol);
        if (!row) goto bad;
        PyList_SET_ITEM(list, r, row);
        for (int c = 0; c < o->rows[r].ncol; c++) {
            PyObject *x = cell(&o->rows[r].cells[c]);
            if (!x) goto bad;
            PyTuple_SET_ITEM(row, c, x);
        }
    }
    return list;
bad:
    Py_DECREF(list);
    return NULL;
}

static PyObject *sql_error(int code, const char *message) {
    PyObject *type = (code & 0xFF) == SQLITE_CONSTRAINT ? IntegrityError : SqlError;
    PyObject *e = PyObject_CallFunction(type, "s", message ? message : sqlite3_errstr(code));
    if (!e) return NULL;
    PyObject *n = PyLong_FromLong(code);
    if (!n || PyObject_SetAttrString(e, "sqlite_errorcode", n) < 0) {
        Py_XDECREF(n);
        Py_DECREF(e);
        return NULL;
    }
    Py_DECREF(n);
    return e;
}

/* A batch's answer: (stopped, rows) or an exception instance. */
static PyObject *answer(const Batch *b) {
    if (b->outcome == FAILED_FENCE) return Py_BuildValue("(On)", Fence, b->failed_at);
    if (b->outcome == FAILED_SQL) {
        PyObject *e = sql_error(b->code, b->message);
        if (!e) return NULL;
        PyObject *t = Py_BuildValue("(Nn)", e, b->failed_at);
        return t;
    }
    PyObject *rows = PyList_New(b->nout);
    if (!rows) return NULL;
    for (Py_ssize_t k = 0; k < b->nout; k++) {
        PyObject *r = rows_of(&b->out[k]);
        if (!r) {
            Py_DECREF(rows);
            return NULL;
        }
        PyList_SET_ITEM(rows, k, r);
    }
    return Py_BuildValue("(ON)", b->stopped ? Py_True : Py_False, rows);
}

/* Conn.run(batches, timeout) -> (lost, answers)
 *   batches: a list of sequences of statements (a batch that cannot be read is answered
 *   with (BindError, exception) and takes no part);
 *   lost: None, or the sqlite3 error that lost the whole group (then the answers of the
 *   batches that had not failed on their own say nothing);
 *   answers: per batch, (stopped, rows), (Fence, index), (error, index) or (BindError, exc).
 */
static PyObject *Conn_run(Conn *self, PyObject *args) {
    PyObject *batches;
    double timeout = 10.0;
    if (!PyArg_ParseTuple(args, "O!|d", &PyList_Type, &batches, &timeout)) return NULL;
    if (!self->db || ((PySqliteConnectionHead *)self->owner)->db != self->db) {
        PyErr_SetString(PyExc_RuntimeError, "the connection is closed");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(batches);
    Batch *bs = calloc((size_t)n + 1, sizeof(Batch));
    PyObject *keep = PyList_New(0), *answers = PyList_New(n), *result = NULL;
    Batch **runnable = calloc((size_t)n + 1, sizeof(Batch *));
    Py_ssize_t *index = calloc((size_t)n + 1, sizeof(Py_ssize_t));
    if (!bs || !keep || !answers || !runnable || !index) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        bs[k].failed_at = -1;
        if (plan_batch(self, PyList_GET_ITEM(batches, k), &bs[k], keep) < 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (tb) PyException_SetTraceback(value, tb);
            PyObject *a = Py_BuildValue("(OO)", BindError, value ? value : Py_None);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            if (!a) goto done;
            PyList_SET_ITEM(answers, k, a);
            continue;
        }
        Py_ssize_t outs = 0;
        for (Py_ssize_t j = 0; j < bs[k].nplans; j++) outs += bs[k].plans[j].returning;
        bs[k].out = calloc((size_t)outs + 1, sizeof(OutRows));
        if (!bs[k].out) {
            PyErr_NoMemory();
            goto done;
        }
        index[m] = k;
        runnable[m++] = &bs[k];
    }
    int rc = SQLITE_OK;
    char *lost_msg = NULL;
    if (m) {
        sqlite3 *db = self->db;
        Py_BEGIN_ALLOW_THREADS
        rc = run_group(db, runnable, m, timeout, &lost_msg);
        Py_END_ALLOW_THREADS
    }
    PyObject *lost = Py_None;
    Py_INCREF(lost);
    if (rc != SQLITE_OK) {
        Py_DECREF(lost);
        lost = sql_error(rc, lost_msg);
        free(lost_msg);
        if (!lost) goto done;
    } else if (m) {
        self->commits++;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *a = answer(runnable[j]);
        if (!a) {
            Py_DECREF(lost);
            goto done;
        }
        PyList_SET_ITEM(answers, index[j], a);
    }
    result = Py_BuildValue("(NO)", lost, answers);
done:
    if (bs)
        for (Py_ssize_t k = 0; k < n; k++) batch_free(&bs[k]);
    free(bs);
    free(runnable);
    free(index);
    Py_XDECREF(keep);
    Py_XDECREF(answers);
    return result;
}

static PyObject *Conn_close(Conn *self, PyObject *unused) {
    if (self->cache) PyDict_Clear(self->cache); /* finalizes the statements */
    self->db = NULL;
    Py_CLEAR(self->owner);
    Py_RETURN_NONE;
}

/* Connection(conn, path): drive the handle of ``conn``, an open sqlite3.Connection over
 * the file ``path`` (checked: a handle over another file, or none, is refused). */
static int Conn_init(Conn *self, PyObject *args, PyObject *kwds) {
    PyObject *conn;
    const char *path;
    if (!PyArg_ParseTuple(args, "O!s", PySqliteConnectionType, &conn, &path)) return -1;
    sqlite3 *db = ((PySqliteConnectionHead *)conn)->db;
    const char *file = db ? sqlite3_db_filename(db, "main") : NULL;
    struct stat a, b;
    int same = file && stat(file, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
    if (!same) {
        PyErr_Format(PyExc_ValueError, "the connection is not one over %s", path);
        return -1;
    }
    Py_XSETREF(self->cache, PyDict_New());
    if (!self->cache) return -1;
    Py_INCREF(conn);
    Py_XSETREF(self->owner, conn);
    self->db = db;
    return 0;
}

static void Conn_dealloc(Conn *self) {
    Py_XDECREF(self->cache);  /* finalizes the statements */
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Conn_commits(Conn *self, void *unused) { return PyLong_FromLongLong(self->commits); }

static PyMethodDef Conn_methods[] = {
    {"run", (PyCFunction)Conn_run, METH_VARARGS, "Run a group of batches in one transaction."},
    {"close", (PyCFunction)Conn_close, METH_NOARGS, "Close the connection."},
    {NULL}};

static PyGetSetDef Conn_getset[] = {{"commits", (getter)Conn_commits, NULL, "Commits made.", NULL}, {NULL}};

static PyTypeObject ConnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_pivotal_writer.Connection",
    .tp_basicsize = sizeof(Conn),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Conn_init,
    .tp_dealloc = (destructor)Conn_dealloc,
    .tp_methods = Conn_methods,
    .tp_getset = Conn_getset,
    .tp_doc = "Runs groups of write batches over a sqlite3.Connection's handle without the GIL.",
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pivotal_writer",
                                    "Group commit over SQLite's C API.", -1, NULL};

PyMODINIT_FUNC PyInit__pivotal_writer(void) {
    if (PyType_Ready(&ConnType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Fence = PyUnicode_InternFromString("fence");
    BindError = PyUnicode_InternFromString("bind");
    PyObject *sqlite3_mod = PyImport_ImportModule("sqlite3");
    if (!sqlite3_mod) return NULL;
    SqlError = PyObject_GetAttrString(sqlite3_mod, "OperationalError");
    IntegrityError = PyObject_GetAttrString(sqlite3_mod, "IntegrityError");
    PySqliteConnectionType = (PyTypeObject *)PyObject_GetAttrString(sqlite3_mod, "Connection");
    Py_DECREF(sqlite3_mod);
    if (!SqlError || !IntegrityError || !PySqliteConnectionType) return NULL;
    Py_INCREF(&ConnType);
    PyModule_AddObject(m, "Connection", (PyObject *)&ConnType);
    PyModule_AddObjectRef(m, "FENCE", Fence);
    PyModule_AddObjectRef(m, "BIND", BindError);
    PyModule_AddIntConstant(m, "SQLITE_VERSION_NUMBER", sqlite3_libversion_number());
    return m;
}
