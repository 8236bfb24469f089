/* The DSL registry (dsl/dsl.h: what a task tells the agent) and the DSL environments
 * (dsl/env.h: what `mkb env` installs and the grader enforces) describe the same DSLs: every
 * name is in both tables exactly once, names read one way in `<src>2<dst>_skill`, and the
 * package the task names is one the environment pins. */
#include <criterion/criterion.h>
#include <string.h>

#include "dsl/dsl.h"
#include "dsl/env.h"

Test(dsl, both_tables_name_the_same_dsls) {
    cr_assert_eq(mkb_dsl_count, mkb_dsl_env_count, "%lld DSLs in dsl.c, %lld in env.c", (long long)mkb_dsl_count,
                 (long long)mkb_dsl_env_count);
    for (int64_t i = 0; i < mkb_dsl_count; i++) {
        const struct mkb_dsl_env *e = NULL;
        cr_assert_eq(mkb_dsl_env_find(mkb_dsls[i].name, &e), MKB_OK, "%s has no environment", mkb_dsls[i].name);
        const struct mkb_dsl *d = NULL;
        cr_assert_eq(mkb_dsl_find(mkb_dsl_envs[i].name, &d), MKB_OK, "%s has no registry row", mkb_dsl_envs[i].name);
        for (int64_t j = 0; j < i; j++) cr_assert_str_neq(mkb_dsls[i].name, mkb_dsls[j].name);
    }
}

Test(dsl, names_read_one_way_in_arm_names) {
    for (int64_t i = 0; i < mkb_dsl_count; i++) {
        const char *n = mkb_dsls[i].name;
        cr_assert(n[0] >= 'a' && n[0] <= 'z', "%s", n);
        for (const char *p = n; *p; p++)
            cr_assert((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9' && *p != '2'), "'%s' has '%c'", n, *p);
    }
}

Test(dsl, the_task_package_is_pinned) {
    for (int64_t i = 0; i < mkb_dsl_count; i++) {
        const struct mkb_dsl_env *e = NULL;
        cr_assert_eq(mkb_dsl_env_find(mkb_dsls[i].name, &e), MKB_OK);
        size_t n = strlen(mkb_dsls[i].package);
        int found = 0;
        for (int k = 0; k < MKB_DSL_MAX_LIST && e->pins[k]; k++)
            if (!strncmp(e->pins[k], mkb_dsls[i].package, n) && strchr("=<>!~[ ", e->pins[k][n])) found = 1;
        cr_assert(found, "%s: the task names package %s, which the environment does not pin", mkb_dsls[i].name,
                  mkb_dsls[i].package);
    }
}

Test(dsl, unknown_names_get_a_clear_error) {
    const struct mkb_dsl *d;
    cr_assert_eq(mkb_dsl_find("triton", &d), MKB_ERR_NOT_FOUND);
    cr_assert(strstr(mkb_error_message(), "no DSL named 'triton'"), "%s", mkb_error_message());
}
