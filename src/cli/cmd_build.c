/* mkb build: render one task per selected problem × DSL into the build directory (protocol/task.h
 * says what a task holds) and print each task's fingerprint and whether it changed. Rebuilding
 * unchanged sources changes nothing and prints the same fingerprints.
 *
 * It does not run agents or touch result stores (mkb run does). A DSL package that is not
 * installed for the docs generator's Python is not an error: the task says so, and so does this
 * command's output. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "dsl/dsl.h"
#include "protocol/select.h"
#include "protocol/task.h"

static const char *const build_usage =
    "usage: mkb build [--problems LIST] [--categories LIST] [--dsls LIST] [--build-dir DIR]\n"
    "                 [--source-dir DIR] [--python PY] [--json]\n"
    "\n"
    "Render one task per problem and DSL into DIR/<problem>_<dsl>/: the instruction, the spec sheet,\n"
    "the C reference, the Python helper that runs it on the CPU at the test scale, the DSL's API\n"
    "reference generated from the installed package, and MANIFEST.sha256. A task's fingerprint is the\n"
    "SHA-256 of its manifest; rebuilding unchanged sources gives the same fingerprints and leaves the\n"
    "directories alone.\n"
    "\n"
    "options:\n"
    "  --problems LIST    comma-separated globs over problem names, ids or unique prefixes (default: all)\n"
    "  --categories LIST  comma-separated families (mlp_norm, ...)\n"
    "  --dsls LIST        comma-separated DSLs (default: every registered DSL)\n"
    "  --build-dir DIR    where tasks go (default: tasks)\n"
    "  --source-dir DIR   the mkb source tree holding src/problems (default: the one mkb was built from)\n"
    "  --python PY        the Python whose installed DSL packages are documented (default: the one each\n"
    "                     DSL is graded with: $MKB_PYTHON, the 'mkb env' environment, python3)\n"
    "  --json             machine-readable output\n"
    "  -h, --help         this help\n"
    "\n"
    "MKB_SITE=DIR[:DIR] adds site directories (DSL wheels unpacked with pip --target) to that Python.\n"
    "Where a DSL package is not installed for that Python, its tasks say so in docs/README.md and the\n"
    "instruction, and this command prints a note; that is not an error.\n";

int cmd_build(int argc, char **argv) {
    static const struct option opts[] = {
        {"problems", required_argument, NULL, 'p'}, {"categories", required_argument, NULL, 'c'},
        {"dsls", required_argument, NULL, 'd'},     {"build-dir", required_argument, NULL, 'b'},
        {"source-dir", required_argument, NULL, 's'}, {"python", required_argument, NULL, 'y'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    if (mkb_cli_wants_help(argc, argv)) {
        fputs(build_usage, stdout);
        return 0;
    }
    const char *problems = NULL, *categories = NULL, *dsls = NULL, *build_dir = "tasks", *source_dir = NULL,
               *python = NULL;
    bool json = false;
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'p': problems = optarg; break;
        case 'c': categories = optarg; break;
        case 'd': dsls = optarg; break;
        case 'b': build_dir = optarg; break;
        case 's': source_dir = optarg; break;
        case 'y': python = optarg; break;
        case 'j': json = true; break;
        case 'h': fputs(build_usage, stdout); return 0;
        case ':': return mkb_cli_usage("build", "option '%s' needs a value", argv[optind - 1]);
        default: return mkb_cli_usage("build", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return mkb_cli_usage("build", "unexpected argument '%s'", argv[optind]);

    const struct mkb_problem **sel;
    int64_t nsel;
    enum mkb_status s = mkb_select_problems(problems, categories, &sel, &nsel);
    if (s != MKB_OK) return mkb_cli_fail("build", s);
    const struct mkb_dsl *dv[64];
    int64_t nd = 0;
    if (dsls) {
        char **items = NULL;
        s = mkb_split_list(dsls, &items);
        for (char **it = items; s == MKB_OK && *it && nd < 64; it++) s = mkb_dsl_find(*it, &dv[nd++]);
        mkb_split_free(items);
    } else {
        for (int64_t i = 0; i < mkb_dsl_count && nd < 64; i++) dv[nd++] = &mkb_dsls[i];
    }
    if (s != MKB_OK) {
        free(sel);
        return mkb_cli_fail("build", s);
    }
    struct mkb_task_opts to = {.build_root = build_dir, .source_dir = source_dir, .python = python};
    struct mkb_task_builder *b;
    s = mkb_task_builder_new(&to, &b);
    if (s != MKB_OK) {
        free(sel);
        return mkb_cli_fail("build", s);
    }
    json_t *tasks = json_array();
    int64_t changed = 0;
    bool noted[64] = {0};
    for (int64_t i = 0; i < nsel && s == MKB_OK; i++)
        for (int64_t k = 0; k < nd && s == MKB_OK; k++) {
            struct mkb_task_info info;
            s = mkb_task_build(b, sel[i], dv[k], &info);
            if (s != MKB_OK) break;
            changed += info.changed;
            if (!info.docs_generated && !noted[k] && !json) {
                fprintf(stderr, "mkb build: note: no API reference for %s in its tasks: %s\n", dv[k]->name,
                        info.docs_note);
                noted[k] = true;
            }
            if (json)
                json_array_append_new(tasks, json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:b, s:s}", "task",
                                                       info.name, "problem", sel[i]->name, "dsl", dv[k]->name, "dir",
                                                       info.dir, "fingerprint", info.fingerprint, "changed",
                                                       info.changed, "files", (json_int_t)info.n_files,
                                                       "docs_generated", info.docs_generated, "docs_note",
                                                       info.docs_note));
            else
                printf("%-12.12s  %-9s  %s\n", info.fingerprint, info.changed ? "written" : "unchanged", info.name);
        }
    mkb_task_builder_free(b);
    free(sel);
    if (s != MKB_OK) {
        json_decref(tasks);
        return mkb_cli_fail("build", s);
    }
    if (json) {
        json_t *root = json_pack("{s:s, s:I, s:I, s:o}", "build_dir", build_dir, "tasks_written", (json_int_t)changed,
                                 "count", (json_int_t)json_array_size(tasks), "tasks", tasks);
        s = mkb_json_print(root);
        json_decref(root);
        return s == MKB_OK ? 0 : mkb_cli_fail("build", s);
    }
    json_decref(tasks);
    printf("%lld task%s in %s, %lld written\n", (long long)(nsel * nd), nsel * nd == 1 ? "" : "s", build_dir,
           (long long)changed);
    return 0;
}
