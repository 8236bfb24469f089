/* Planning (protocol/plan.h) against fixture stores made here: the trials a selection lists and
 * their order, the four statuses and their reasons, a skill trial's dependence on its source solo
 * (the source's SKILL.md changing, the source being rerun, a skip whose source now has a skill),
 * blocking and --rerun-stale, the placebo's stamp, budget changes and interrupted trials. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/json.h"
#include "protocol/files.h"
#include "protocol/plan.h"

static char tmp[256];
static struct mkb_store_w store;
static const struct mkb_problem *p28;
static const char *fingerprint_now = "fp-1";

static void setup(void) {
    snprintf(tmp, sizeof tmp, "/tmp/mkb-test-plan-XXXXXX");
    cr_assert(mkdtemp(tmp));
    cr_assert_eq(mkb_problem_find("28", &p28), MKB_OK);
    cr_assert_eq(mkb_store_open(tmp, "test/model", true, &store), MKB_OK);
    fingerprint_now = "fp-1";
}
static void teardown(void) {
    mkb_store_close(&store);
    mkb_rmtree(tmp);
}
TestSuite(plan, .init = setup, .fini = teardown);

static const char *fp(void *ctx, const struct mkb_problem *p, const struct mkb_dsl *d) {
    (void)ctx, (void)p, (void)d;
    return fingerprint_now;
}

static struct mkb_plan_inputs inputs(bool controls, bool rerun_stale, const char *const *globs) {
    static const struct mkb_problem *probs[1];
    probs[0] = p28;
    return (struct mkb_plan_inputs){.problems = probs,
                                    .n_problems = 1,
                                    .trial_globs = globs,
                                    .n_replicates = 2,
                                    .controls = controls,
                                    .rerun_stale = rerun_stale,
                                    .budget = {.wall_s = 2400, .submissions = 10},
                                    .fingerprint = fp};
}

static char trial_dir[4096];

static const char *tdir(const char *coord) {
    cr_assert_eq(mkb_store_trial_dir(&store, p28->name, coord, trial_dir, sizeof trial_dir), MKB_OK);
    cr_assert_eq(mkb_mkdir_p(trial_dir), MKB_OK);
    return trial_dir;
}

/* A record: kind "verdict", "error" or "skip"; skill_sha and source may be NULL. */
static void put(const char *coord, const char *arm, const char *dsl, int rep, const char *kind, const char *fpr,
                const char *skill_sha, const char *source) {
    json_t *r = json_pack("{s:i, s:s, s:{s:i, s:s, s:s}, s:i, s:s, s:s, s:n, s:n, s:n, s:n, s:{s:s, s:s?, s:s?}, "
                          "s:{s:f, s:i}}",
                          "format", 1, "coordinate", coord, "problem", "id", 28, "name", p28->name, "family",
                          p28->family, "replicate", rep, "arm", arm, "dsl", dsl, "verdict", "error", "skip", "usage",
                          "stamps", "task_fingerprint", fpr, "skill_sha256", skill_sha, "source", source, "budget",
                          "wall_s", 2400.0, "submissions", 10);
    if (!strcmp(kind, "verdict"))
        json_object_set_new(r, "verdict", json_pack("{s:b, s:f}", "passed", 1, "speedup", 1.5));
    else if (!strcmp(kind, "error"))
        json_object_set_new(r, "error", json_string("the sandbox failed"));
    else
        json_object_set_new(r, "skip", json_string("the source wrote no SKILL.md"));
    tdir(coord);
    cr_assert_eq(mkb_store_write_record(&store, p28->name, coord, r), MKB_OK);
    json_decref(r);
}

static void put_skill(const char *coord, const char *text) {
    char p[4200];
    snprintf(p, sizeof p, "%s/SKILL.md", tdir(coord));
    cr_assert_eq(mkb_write_file_atomic(p, text, strlen(text)), MKB_OK);
}

static void sha_of(const char *text, char out[MKB_SHA256_HEX]) { mkb_sha256_hex(text, strlen(text), out); }

static const struct mkb_plan_trial *find(const struct mkb_plan *p, const char *coord) {
    for (int64_t i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].coordinate, coord)) return &p->t[i];
    cr_assert_fail("%s is not in the plan", coord);
    return NULL;
}

static void make(struct mkb_plan_inputs in, struct mkb_plan *p) {
    cr_assert_eq(mkb_plan_make(&in, &store, p), MKB_OK, "%s", mkb_error_message());
}

Test(plan, an_empty_store_runs_everything_in_order) {
    struct mkb_plan p;
    make(inputs(false, false, NULL), &p);
    cr_assert_eq(p.n, 8, "2 replicates x 4 paper arms");
    cr_assert_eq(p.count[MKB_PLAN_RUN], 8);
    cr_assert_eq(p.n_run, 8);
    const char *want[] = {"p28_r1_solo_cutedsl", "p28_r1_solo_tirx", "p28_r1_cutedsl2tirx_skill",
                          "p28_r1_tirx2cutedsl_skill"};
    for (int i = 0; i < 4; i++) cr_assert_str_eq(p.t[i].coordinate, want[i]);
    const struct mkb_plan_trial *sk = find(&p, "p28_r2_cutedsl2tirx_skill");
    cr_assert(sk->source >= 0);
    cr_assert_str_eq(p.t[sk->source].coordinate, "p28_r2_solo_cutedsl");
    cr_assert(strstr(sk->reason, "waits for p28_r2_solo_cutedsl"), "%s", sk->reason);
    cr_assert_str_eq(sk->dsl->name, "tirx");
    mkb_plan_free(&p);

    make(inputs(true, false, NULL), &p);
    cr_assert_eq(p.n, 16, "2 replicates x 8 arms with the controls");
    const struct mkb_plan_trial *self = find(&p, "p28_r1_self_tirx");
    cr_assert_str_eq(p.t[self->source].coordinate, "p28_r1_solo_tirx");
    cr_assert_eq(find(&p, "p28_r1_placebo_cutedsl")->source, -1);
    mkb_plan_free(&p);
}

Test(plan, a_selected_skill_trial_pulls_in_its_source) {
    const char *globs[] = {"p28_r2_tirx2cutedsl_skill", NULL};
    struct mkb_plan p;
    make(inputs(false, false, globs), &p);
    cr_assert_eq(p.n, 2);
    cr_assert_eq(p.n_selected, 1);
    cr_assert_str_eq(p.t[0].coordinate, "p28_r2_solo_tirx");
    cr_assert(!p.t[0].selected && p.t[1].selected);
    mkb_plan_free(&p);
    const char *none[] = {"p99_*", NULL};
    make(inputs(false, false, none), &p);
    cr_assert_eq(p.n, 0);
    mkb_plan_free(&p);
}

Test(plan, statuses_and_staleness) {
    char sha[MKB_SHA256_HEX];
    put("p28_r1_solo_cutedsl", "solo_cutedsl", "cutedsl", 1, "verdict", "fp-1", NULL, NULL);
    put_skill("p28_r1_solo_cutedsl", "# skill one\n");
    sha_of("# skill one\n", sha);
    put("p28_r1_cutedsl2tirx_skill", "cutedsl2tirx_skill", "tirx", 1, "verdict", "fp-1", sha, "p28_r1_solo_cutedsl");
    put("p28_r1_solo_tirx", "solo_tirx", "tirx", 1, "error", "fp-1", NULL, NULL);
    /* the source of tirx2cutedsl has an error: its dependent, already recorded, is stale */
    put("p28_r1_tirx2cutedsl_skill", "tirx2cutedsl_skill", "cutedsl", 1, "skip", "fp-1", NULL, "p28_r1_solo_tirx");
    tdir("p28_r2_solo_cutedsl"); /* interrupted: a directory, no record */

    struct mkb_plan p;
    make(inputs(false, false, NULL), &p);
    cr_assert_eq(find(&p, "p28_r1_solo_cutedsl")->status, MKB_PLAN_REUSE);
    cr_assert_eq(find(&p, "p28_r1_cutedsl2tirx_skill")->status, MKB_PLAN_REUSE);
    const struct mkb_plan_trial *t = find(&p, "p28_r1_solo_tirx");
    cr_assert_eq(t->status, MKB_PLAN_RERUN);
    cr_assert(t->run && strstr(t->reason, "the sandbox failed"), "%s", t->reason);
    t = find(&p, "p28_r1_tirx2cutedsl_skill");
    cr_assert_eq(t->status, MKB_PLAN_STALE);
    cr_assert(strstr(t->reason, "p28_r1_solo_tirx runs again"), "%s", t->reason);
    cr_assert(t->blocked && !t->run);
    t = find(&p, "p28_r2_solo_cutedsl");
    cr_assert(t->status == MKB_PLAN_RUN && t->dir_exists && strstr(t->reason, "interrupted"), "%s", t->reason);
    mkb_plan_free(&p);

    /* the source's SKILL.md changes: its dependent is stale, and with --rerun-stale it runs */
    put_skill("p28_r1_solo_cutedsl", "# skill one, edited\n");
    make(inputs(false, false, NULL), &p);
    t = find(&p, "p28_r1_cutedsl2tirx_skill");
    cr_assert_eq(t->status, MKB_PLAN_STALE);
    cr_assert(strstr(t->reason, "the skill changed"), "%s", t->reason);
    cr_assert(t->blocked);
    cr_assert(p.n_blocked >= 2);
    mkb_plan_free(&p);
    make(inputs(false, true, NULL), &p);
    t = find(&p, "p28_r1_cutedsl2tirx_skill");
    cr_assert(t->status == MKB_PLAN_STALE && t->run && !t->blocked);
    mkb_plan_free(&p);

    /* the task changes: everything recorded is stale; a dependent that has to run waits on a
       blocked source and is blocked too */
    fingerprint_now = "fp-2";
    make(inputs(false, false, NULL), &p);
    t = find(&p, "p28_r1_solo_cutedsl");
    cr_assert_eq(t->status, MKB_PLAN_STALE);
    cr_assert(strstr(t->reason, "the task changed"), "%s", t->reason);
    t = find(&p, "p28_r2_cutedsl2tirx_skill");
    cr_assert_eq(t->status, MKB_PLAN_RUN);
    cr_assert(!t->blocked, "its source p28_r2_solo_cutedsl has no record, so it runs");
    mkb_plan_free(&p);
    put("p28_r2_solo_cutedsl", "solo_cutedsl", "cutedsl", 2, "verdict", "fp-1", NULL, NULL);
    make(inputs(false, false, NULL), &p);
    t = find(&p, "p28_r2_cutedsl2tirx_skill");
    cr_assert(t->status == MKB_PLAN_RUN && t->blocked && !t->run, "%s", t->reason);
    cr_assert(strstr(t->reason, "blocked: its source p28_r2_solo_cutedsl is stale"), "%s", t->reason);
    mkb_plan_free(&p);
}

Test(plan, a_skip_goes_stale_when_the_source_gains_a_skill) {
    put("p28_r1_solo_tirx", "solo_tirx", "tirx", 1, "verdict", "fp-1", NULL, NULL);
    put("p28_r1_tirx2cutedsl_skill", "tirx2cutedsl_skill", "cutedsl", 1, "skip", "fp-1", NULL, "p28_r1_solo_tirx");
    struct mkb_plan p;
    make(inputs(false, false, NULL), &p);
    cr_assert_eq(find(&p, "p28_r1_tirx2cutedsl_skill")->status, MKB_PLAN_REUSE);
    mkb_plan_free(&p);
    put_skill("p28_r1_solo_tirx", "# now there is one\n");
    make(inputs(false, false, NULL), &p);
    const struct mkb_plan_trial *t = find(&p, "p28_r1_tirx2cutedsl_skill");
    cr_assert_eq(t->status, MKB_PLAN_STALE);
    cr_assert(strstr(t->reason, "now has a SKILL.md"), "%s", t->reason);
    mkb_plan_free(&p);
}

Test(plan, placebo_stamp_and_budget) {
    struct mkb_skill pl;
    cr_assert_eq(mkb_skill_placebo(&pl), MKB_OK);
    put("p28_r1_placebo_tirx", "placebo_tirx", "tirx", 1, "verdict", "fp-1", pl.sha256, NULL);
    put("p28_r1_placebo_cutedsl", "placebo_cutedsl", "cutedsl", 1, "verdict", "fp-1", "0000", NULL);
    mkb_skill_release(&pl);
    struct mkb_plan p;
    make(inputs(true, false, NULL), &p);
    cr_assert_eq(find(&p, "p28_r1_placebo_tirx")->status, MKB_PLAN_REUSE);
    cr_assert_eq(find(&p, "p28_r1_placebo_cutedsl")->status, MKB_PLAN_STALE);
    mkb_plan_free(&p);
    struct mkb_plan_inputs in = inputs(true, false, NULL);
    in.budget.submissions = 5;
    make(in, &p);
    const struct mkb_plan_trial *t = find(&p, "p28_r1_placebo_tirx");
    cr_assert_eq(t->status, MKB_PLAN_STALE);
    cr_assert(strstr(t->reason, "the budget changed"), "%s", t->reason);
    mkb_plan_free(&p);
}

Test(plan, json_and_text_forms) {
    struct mkb_plan p;
    make(inputs(false, false, NULL), &p);
    json_t *j = mkb_plan_json(&p);
    cr_assert_eq(json_integer_value(json_object_get(j, "to_run")), 8);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "counts"), "RUN")), 8);
    json_t *t2 = json_array_get(json_object_get(j, "trials"), 2);
    cr_assert_str_eq(json_string_value(json_object_get(t2, "source")), "p28_r1_solo_cutedsl");
    json_decref(j);
    char *buf;
    size_t n;
    FILE *f = open_memstream(&buf, &n);
    mkb_plan_print(&p, f);
    fclose(f);
    cr_assert(strstr(buf, "RUN     p28_r1_solo_cutedsl") && strstr(buf, "8 trials: 8 RUN"), "%s", buf);
    free(buf);
    mkb_plan_free(&p);
}
