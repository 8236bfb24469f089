/* Stores into SQLite (see sqlite_export.h). */
#include "analysis/sqlite_export.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/metrics.h"
#include "analysis/results.h"

static const char schema[] =
    "PRAGMA foreign_keys = ON;\n"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE stores (store_id INTEGER PRIMARY KEY, model TEXT NOT NULL UNIQUE, dir TEXT NOT NULL);\n"
    "CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, store_id INTEGER NOT NULL REFERENCES stores(store_id),\n"
    "  model TEXT NOT NULL, problem TEXT NOT NULL, problem_id INTEGER NOT NULL, family TEXT NOT NULL,\n"
    "  replicate INTEGER NOT NULL, arm TEXT NOT NULL, arm_kind TEXT NOT NULL, dsl TEXT NOT NULL,\n"
    "  coordinate TEXT NOT NULL, dir TEXT NOT NULL,\n"
    "  state TEXT NOT NULL CHECK (state IN ('verdict', 'skip', 'error', 'missing')),\n"
    "  UNIQUE (store_id, coordinate));\n"
    "CREATE TABLE records (trial_id INTEGER PRIMARY KEY REFERENCES trials(trial_id),\n"
    "  passed INTEGER, imported INTEGER, correct INTEGER, speedup REAL, kernel_ms REAL, eager_ms REAL,\n"
    "  sol_fraction REAL, tier INTEGER, value REAL,\n"
    "  tokens_in INTEGER, tokens_out INTEGER, tokens_cached INTEGER, cost_usd REAL, agent_s REAL,\n"
    "  task_fingerprint TEXT, skill_sha256 TEXT, source TEXT, error TEXT, skip TEXT, record_json TEXT NOT NULL);\n"
    "CREATE TABLE submissions (trial_id INTEGER NOT NULL REFERENCES trials(trial_id), line INTEGER NOT NULL,\n"
    "  idx INTEGER, elapsed_s REAL, passed INTEGER, speedup REAL, kernel_ms REAL, submission_json TEXT NOT NULL,\n"
    "  PRIMARY KEY (trial_id, line));\n"
    "CREATE TABLE comparisons (store_id INTEGER NOT NULL REFERENCES stores(store_id), contrast TEXT NOT NULL,\n"
    "  kind TEXT NOT NULL, treat_arm TEXT NOT NULL, base_arm TEXT NOT NULL, problem TEXT NOT NULL,\n"
    "  problem_id INTEGER NOT NULL, family TEXT NOT NULL, replicate INTEGER NOT NULL, skipped INTEGER NOT NULL,\n"
    "  source_tier INTEGER, base_tier INTEGER NOT NULL, treat_tier INTEGER NOT NULL, base_value REAL NOT NULL,\n"
    "  treat_value REAL NOT NULL, outcome TEXT NOT NULL, standing TEXT,\n"
    "  PRIMARY KEY (store_id, contrast, problem_id, replicate));\n";

struct db {
    sqlite3 *h;
    const char *path;
};

static enum mkb_status db_fail(struct db *d, const char *what) {
    return mkb_error(MKB_ERR_IO, "cannot write '%s' (%s): %s", d->path, what, sqlite3_errmsg(d->h));
}

static enum mkb_status prepare(struct db *d, const char *sql, sqlite3_stmt **st) {
    if (sqlite3_prepare_v2(d->h, sql, -1, st, NULL) != SQLITE_OK) return db_fail(d, "prepare");
    return MKB_OK;
}

static void bind_text(sqlite3_stmt *s, int i, const char *v) {
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, i);
}

static void bind_real(sqlite3_stmt *s, int i, double v) {
    if (isfinite(v))
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

static void bind_int(sqlite3_stmt *s, int i, int64_t v, int known) {
    if (known)
        sqlite3_bind_int64(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

static enum mkb_status step(struct db *d, sqlite3_stmt *s, const char *what) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) return db_fail(d, what);
    return MKB_OK;
}

static const char *state_name(enum mkb_trial_state s) {
    switch (s) {
    case MKB_TRIAL_MISSING: return "missing";
    case MKB_TRIAL_VERDICT: return "verdict";
    case MKB_TRIAL_SKIP: return "skip";
    case MKB_TRIAL_ERROR: return "error";
    }
    return "missing";
}

static const char *kind_name(enum mkb_arm_kind k) {
    switch (k) {
    case MKB_ARM_SOLO: return "solo";
    case MKB_ARM_SKILL: return "skill";
    case MKB_ARM_PLACEBO: return "placebo";
    case MKB_ARM_SELF: return "self";
    }
    return "solo";
}

struct sub_ctx {
    struct db *d;
    sqlite3_stmt *s;
    int64_t trial_id;
};

static double jreal(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static enum mkb_status put_submission(void *ctx, int64_t line, json_t *sub) {
    struct sub_ctx *c = ctx;
    json_t *v = json_object_get(sub, "verdict"), *idx = json_object_get(sub, "index");
    json_t *passed = json_object_get(v, "passed");
    char *text = json_dumps(sub, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!text) return mkb_error(MKB_ERR_NOMEM, "out of memory writing a submission");
    sqlite3_bind_int64(c->s, 1, c->trial_id);
    sqlite3_bind_int64(c->s, 2, line);
    bind_int(c->s, 3, json_is_integer(idx) ? (int64_t)json_integer_value(idx) : 0, json_is_integer(idx));
    bind_real(c->s, 4, jreal(sub, "elapsed_s"));
    bind_int(c->s, 5, json_is_true(passed), json_is_boolean(passed));
    bind_real(c->s, 6, jreal(v, "speedup"));
    bind_real(c->s, 7, jreal(v, "kernel_ms"));
    sqlite3_bind_text(c->s, 8, text, -1, SQLITE_TRANSIENT);
    free(text);
    return step(c->d, c->s, "submissions");
}

static enum mkb_status put_store(struct db *d, const struct mkb_store *s, int64_t store_id, sqlite3_stmt *ins_store,
                                 sqlite3_stmt *ins_trial, sqlite3_stmt *ins_record, sqlite3_stmt *ins_sub,
                                 int64_t *next_trial) {
    sqlite3_bind_int64(ins_store, 1, store_id);
    bind_text(ins_store, 2, s->model);
    bind_text(ins_store, 3, s->dir);
    MKB_TRY(step(d, ins_store, "stores"));
    for (int64_t i = 0; i < s->n_trials; i++) {
        const struct mkb_trial *t = &s->trials[i];
        int64_t id = (*next_trial)++;
        sqlite3_bind_int64(ins_trial, 1, id);
        sqlite3_bind_int64(ins_trial, 2, store_id);
        bind_text(ins_trial, 3, s->model);
        bind_text(ins_trial, 4, t->problem);
        sqlite3_bind_int64(ins_trial, 5, t->problem_id);
        bind_text(ins_trial, 6, t->family);
        sqlite3_bind_int64(ins_trial, 7, t->replicate);
        bind_text(ins_trial, 8, t->arm);
        bind_text(ins_trial, 9, kind_name(t->arm_info.kind));
        bind_text(ins_trial, 10, t->dsl);
        bind_text(ins_trial, 11, t->coordinate);
        bind_text(ins_trial, 12, t->dir);
        bind_text(ins_trial, 13, state_name(t->state));
        MKB_TRY(step(d, ins_trial, "trials"));
        if (t->state == MKB_TRIAL_MISSING) continue;
        int v = t->state == MKB_TRIAL_VERDICT;
        sqlite3_bind_int64(ins_record, 1, id);
        bind_int(ins_record, 2, t->passed, v);
        bind_int(ins_record, 3, t->imported, v && t->imported >= 0);
        bind_int(ins_record, 4, t->correct, v && t->correct >= 0);
        bind_real(ins_record, 5, t->speedup);
        bind_real(ins_record, 6, t->kernel_ms);
        bind_real(ins_record, 7, t->eager_ms);
        bind_real(ins_record, 8, t->sol_fraction);
        bind_int(ins_record, 9, mkb_tier(t->passed, t->speedup), v);
        bind_real(ins_record, 10, v ? mkb_value(t->passed, t->speedup) : NAN);
        bind_int(ins_record, 11, t->tokens_in, t->tokens_in >= 0);
        bind_int(ins_record, 12, t->tokens_out, t->tokens_out >= 0);
        bind_int(ins_record, 13, t->tokens_cached, t->tokens_cached >= 0);
        bind_real(ins_record, 14, t->cost_usd);
        bind_real(ins_record, 15, t->agent_s);
        bind_text(ins_record, 16, t->task_fingerprint);
        bind_text(ins_record, 17, t->skill_sha256);
        bind_text(ins_record, 18, t->source);
        bind_text(ins_record, 19, t->error);
        bind_text(ins_record, 20, t->skip);
        char *text = json_dumps(t->record, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (!text) return mkb_error(MKB_ERR_NOMEM, "out of memory writing a record");
        sqlite3_bind_text(ins_record, 21, text, -1, SQLITE_TRANSIENT);
        free(text);
        MKB_TRY(step(d, ins_record, "records"));
        struct sub_ctx c = {d, ins_sub, id};
        MKB_TRY(mkb_store_read_submissions(t, put_submission, &c));
    }
    return MKB_OK;
}

static enum mkb_status put_comparisons(struct db *d, json_t *store, int64_t store_id, sqlite3_stmt *ins) {
    size_t i, j;
    json_t *c, *x;
    json_array_foreach(json_object_get(store, "contrasts"), i, c) {
        json_t *cmps = json_object_get(c, "comparisons");
        if (!cmps) continue; /* the pooled directions repeat the directions' comparisons */
        json_array_foreach(cmps, j, x) {
            json_t *src = json_object_get(x, "source_tier"), *standing = json_object_get(x, "standing");
            sqlite3_bind_int64(ins, 1, store_id);
            bind_text(ins, 2, json_string_value(json_object_get(c, "name")));
            bind_text(ins, 3, json_string_value(json_object_get(c, "kind")));
            bind_text(ins, 4, json_string_value(json_object_get(c, "treat_arm")));
            bind_text(ins, 5, json_string_value(json_object_get(c, "base_arm")));
            bind_text(ins, 6, json_string_value(json_object_get(x, "problem")));
            sqlite3_bind_int64(ins, 7, json_integer_value(json_object_get(x, "problem_id")));
            bind_text(ins, 8, json_string_value(json_object_get(x, "family")));
            sqlite3_bind_int64(ins, 9, json_integer_value(json_object_get(x, "replicate")));
            sqlite3_bind_int(ins, 10, json_is_true(json_object_get(x, "skipped")));
            bind_int(ins, 11, json_integer_value(src), json_is_integer(src));
            sqlite3_bind_int64(ins, 12, json_integer_value(json_object_get(x, "base_tier")));
            sqlite3_bind_int64(ins, 13, json_integer_value(json_object_get(x, "treat_tier")));
            sqlite3_bind_double(ins, 14, json_number_value(json_object_get(x, "base_value")));
            sqlite3_bind_double(ins, 15, json_number_value(json_object_get(x, "treat_value")));
            bind_text(ins, 16, json_string_value(json_object_get(x, "outcome")));
            bind_text(ins, 17, json_is_string(standing) ? json_string_value(standing) : NULL);
            MKB_TRY(step(d, ins, "comparisons"));
        }
    }
    return MKB_OK;
}

static enum mkb_status fill(struct db *d, const struct mkb_store *stores, int64_t n, json_t *results) {
    char *err = NULL;
    if (sqlite3_exec(d->h, schema, NULL, NULL, &err) != SQLITE_OK) {
        enum mkb_status st = mkb_error(MKB_ERR_IO, "cannot write '%s' (schema): %s", d->path, err ? err : "?");
        sqlite3_free(err);
        return st;
    }
    if (sqlite3_exec(d->h, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return db_fail(d, "begin");
    sqlite3_stmt *meta = NULL, *ins_store = NULL, *ins_trial = NULL, *ins_record = NULL, *ins_sub = NULL, *ins_cmp = NULL;
    enum mkb_status st;
    if ((st = prepare(d, "INSERT INTO meta VALUES (?, ?)", &meta)) != MKB_OK ||
        (st = prepare(d, "INSERT INTO stores VALUES (?, ?, ?)", &ins_store)) != MKB_OK ||
        (st = prepare(d, "INSERT INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", &ins_trial)) != MKB_OK ||
        (st = prepare(d,
                      "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      &ins_record)) != MKB_OK ||
        (st = prepare(d, "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", &ins_sub)) != MKB_OK ||
        (st = prepare(d, "INSERT INTO comparisons VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      &ins_cmp)) != MKB_OK)
        goto done;
    static const char *keys[][2] = {{"store_format", "1"}, {"results_format", "1"}};
    for (size_t k = 0; k < sizeof keys / sizeof *keys && st == MKB_OK; k++) {
        bind_text(meta, 1, keys[k][0]);
        bind_text(meta, 2, keys[k][1]);
        st = step(d, meta, "meta");
    }
    if (st == MKB_OK) {
        json_t *ver = json_object_get(results, "mkb_version");
        bind_text(meta, 1, "mkb_version");
        bind_text(meta, 2, json_is_string(ver) ? json_string_value(ver) : "unknown");
        st = step(d, meta, "meta");
    }
    int64_t next_trial = 1;
    json_t *rs = json_object_get(results, "stores");
    for (int64_t i = 0; i < n && st == MKB_OK; i++) {
        st = put_store(d, &stores[i], i + 1, ins_store, ins_trial, ins_record, ins_sub, &next_trial);
        if (st == MKB_OK) st = put_comparisons(d, json_array_get(rs, (size_t)i), i + 1, ins_cmp);
    }
    if (st == MKB_OK && sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) st = db_fail(d, "commit");
done:
    sqlite3_finalize(meta);
    sqlite3_finalize(ins_store);
    sqlite3_finalize(ins_trial);
    sqlite3_finalize(ins_record);
    sqlite3_finalize(ins_sub);
    sqlite3_finalize(ins_cmp);
    return st;
}

enum mkb_status mkb_sqlite_export(const struct mkb_store *stores, int64_t n, json_t *results, const char *path) {
    if (json_array_size(json_object_get(results, "stores")) != (size_t)n)
        return mkb_error(MKB_ERR_INTERNAL, "sqlite export: %lld stores but results for %zu", (long long)n,
                         json_array_size(json_object_get(results, "stores")));
    char tmp[4096];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp) return mkb_error(MKB_ERR_INVALID, "path too long: '%s'", path);
    unlink(tmp);
    struct db d = {NULL, path};
    if (sqlite3_open_v2(tmp, &d.h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        enum mkb_status st = mkb_error(MKB_ERR_IO, "cannot create '%s': %s", tmp, d.h ? sqlite3_errmsg(d.h) : "out of memory");
        sqlite3_close(d.h);
        unlink(tmp);
        return st;
    }
    enum mkb_status st = fill(&d, stores, n, results);
    if (sqlite3_close(d.h) != SQLITE_OK && st == MKB_OK) st = mkb_error(MKB_ERR_IO, "cannot close '%s'", tmp);
    if (st == MKB_OK && rename(tmp, path) != 0)
        st = mkb_error(MKB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (st != MKB_OK) unlink(tmp);
    return st;
}
