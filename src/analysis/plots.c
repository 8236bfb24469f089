/* Figures through gnuplot (see plots.h). */
#include "analysis/plots.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/json.h"
#include "core/fs.h"
#include "core/log.h"

const char *const mkb_plot_names[3] = {"paired_ratio", "standing", "ladders"};

#define GREEN 0x2ca02c
#define ORANGE 0xff7f0e
#define GREY 0x9a9a9a

/* ---- small text helpers ---- */

struct text {
    char *buf;
    size_t len;
    FILE *f;
};

static enum mkb_status text_open(struct text *t) {
    t->buf = NULL;
    t->len = 0;
    t->f = open_memstream(&t->buf, &t->len);
    if (!t->f) return mkb_error(MKB_ERR_NOMEM, "out of memory writing a figure");
    return MKB_OK;
}

static enum mkb_status text_save(struct text *t, const char *dir, const char *name, const char *ext) {
    int bad = fclose(t->f) != 0;
    t->f = NULL;
    if (bad) {
        free(t->buf);
        return mkb_error(MKB_ERR_NOMEM, "out of memory writing figure '%s'", name);
    }
    char file[512], path[4096];
    snprintf(file, sizeof file, "%s.%s", name, ext);
    enum mkb_status st = mkb_path_join(path, sizeof path, dir, file);
    if (st == MKB_OK) st = mkb_write_file_atomic(path, t->buf, t->len);
    free(t->buf);
    t->buf = NULL;
    return st;
}

/* A string for a gnuplot single-quoted literal or a double-quoted data field: quotes and
 * backslashes become harmless. */
static void put_safe(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '\'' || *s == '"' || *s == '\\' ? '`' : *s, f);
}


static json_t *group_all(json_t *contrast) {
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(contrast, "groups"), i, g) if (!strcmp(mkb_json_path_str(g, "family"), "all")) return g;
    return NULL;
}

/* The script's frame: both terminals in a loop, so one script rebuilds the SVG and the PNG. */
static void script_begin(FILE *f, const char *name, const char *what, int width, int height) {
    fprintf(f,
            "# mkb figure '%s': %s\n"
            "# Rebuild from the data beside it: gnuplot %s.gp (writes %s.svg and %s.png).\n"
            "do for [fmt in \"svg png\"] {\n"
            "  if (fmt eq \"svg\") {\n"
            "    set terminal svg size %d,%d font \"DejaVu Sans,11\" background \"#ffffff\" noenhanced\n"
            "  } else {\n"
            "    set terminal pngcairo size %d,%d font \"DejaVu Sans,10\" background \"#ffffff\" noenhanced\n"
            "  }\n"
            "  set output \"%s.\".fmt\n"
            "  reset\n",
            name, what, name, name, name, width, height, width, height, name);
}

static void script_end(FILE *f) { fputs("  unset multiplot\n  set output\n}\n", f); }

static void empty_panel(FILE *f, const char *title) {
    fputs("  set title '", f);
    put_safe(f, title);
    fputs("'\n  set xrange [0:1]\n  set yrange [0:1]\n  unset xtics\n  unset ytics\n"
          "  set label 1 'no comparisons' at graph 0.5, 0.5 center\n  plot 1/0 notitle\n  unset label 1\n",
          f);
}

/* ---- paired ratio per problem ---- */

struct pp {
    double ratio;
    long long n, help, harm;
    const char *problem;
};

static int cmp_pp(const void *a, const void *b) {
    const struct pp *x = a, *y = b;
    if (x->ratio != y->ratio) return x->ratio < y->ratio ? -1 : 1;
    return strcmp(x->problem, y->problem);
}

static int is_skill(json_t *c) { return !strcmp(mkb_json_path_str(c, "kind"), "skill"); }

static enum mkb_status paired_ratio(json_t *res, const char *dir) {
    json_t *stores = json_object_get(res, "stores");
    size_t rows = json_array_size(stores), cols = 1, i, j;
    json_t *s, *c;
    json_array_foreach(stores, i, s) {
        size_t k = 0;
        json_array_foreach(json_object_get(s, "contrasts"), j, c) k += is_skill(c);
        if (k > cols) cols = k;
    }
    struct text dat, gp;
    MKB_TRY(text_open(&dat));
    enum mkb_status st = text_open(&gp);
    if (st != MKB_OK) {
        fclose(dat.f);
        free(dat.buf);
        return st;
    }
    fputs("# mkb paired_ratio.dat: one block per panel (model, direction); per problem, sorted by ratio:\n"
          "# x, log2(ratio), colour (0xRRGGBB: green helped, orange harmed, grey neutral by majority), problem,\n"
          "# replicates n, helped, harmed. ratio = geometric mean over replicates of skill value / solo value,\n"
          "# values = speedup clipped to [1/16, 16], failed = 1/16.\n",
          dat.f);
    script_begin(gp.f, "paired_ratio", "paired ratio per problem, per model and direction", 560 * (int)cols,
                 320 * (int)(rows ? rows : 1));
    fprintf(gp.f, "  set multiplot layout %zu,%zu title 'Paired ratio per problem (skill / solo; values clipped to "
                  "[1/16, 16], failed = 1/16)'\n",
            rows ? rows : 1, cols);
    int block = 0;
    json_array_foreach(stores, i, s) {
        size_t used = 0;
        json_array_foreach(json_object_get(s, "contrasts"), j, c) {
            if (!is_skill(c)) continue;
            used++;
            json_t *per = json_object_get(c, "per_problem");
            size_t np = json_array_size(per), k;
            json_t *g = group_all(c);
            char title[512];
            snprintf(title, sizeof title, "%s: %s (n = %lld comparisons, %zu problems)", mkb_json_path_str(s, "model"),
                     mkb_json_path_str(c, "name"), g ? mkb_json_path_int(g, "n_resolved") : 0, np);
            if (np == 0) {
                empty_panel(gp.f, title);
                continue;
            }
            struct pp *v = malloc(sizeof *v * np);
            if (!v) {
                st = mkb_error(MKB_ERR_NOMEM, "out of memory drawing the paired ratios");
                goto done;
            }
            json_t *e;
            json_array_foreach(per, k, e) {
                v[k].ratio = mkb_json_path_real(e, "ratio");
                v[k].n = mkb_json_path_int(e, "n");
                v[k].help = mkb_json_path_int(e, "help");
                v[k].harm = mkb_json_path_int(e, "harm");
                v[k].problem = mkb_json_path_str(e, "problem");
            }
            qsort(v, np, sizeof *v, cmp_pp);
            fprintf(dat.f, "# block %d: ", block);
            put_safe(dat.f, mkb_json_path_str(s, "model"));
            fprintf(dat.f, " %s\n", mkb_json_path_str(c, "name"));
            for (k = 0; k < np; k++) {
                int colour = v[k].help > v[k].harm ? GREEN : v[k].harm > v[k].help ? ORANGE : GREY;
                fprintf(dat.f, "%zu %.6f %d \"", k + 1, log2(v[k].ratio), colour);
                put_safe(dat.f, v[k].problem);
                fprintf(dat.f, "\" %lld %lld %lld\n", v[k].n, v[k].help, v[k].harm);
            }
            fputs("\n\n", dat.f);
            free(v);
            fputs("  set title '", gp.f);
            put_safe(gp.f, title);
            fprintf(gp.f,
                    "'\n  set xrange [0:%zu]\n  set yrange [-8.5:8.5]\n  unset xtics\n"
                    "  set ytics (\"1/256\" -8, \"1/16\" -4, \"1/4\" -2, \"1\" 0, \"4\" 2, \"16\" 4, \"256\" 8)\n"
                    "  set xlabel 'problems, sorted by ratio'\n  set ylabel 'skill / solo'\n  set xzeroaxis lt -1\n"
                    "  set grid ytics lc rgb \"#dddddd\"\n  set style fill solid 0.9 border -1\n  set boxwidth 0.8\n"
                    "  plot 'paired_ratio.dat' index %d using 1:2:3 with boxes lc rgb variable notitle\n",
                    np + 1, block);
            block++;
        }
        for (; used < cols; used++) {
            char title[512];
            snprintf(title, sizeof title, "%s: no skill direction", mkb_json_path_str(s, "model"));
            empty_panel(gp.f, title);
        }
    }
    if (rows == 0) empty_panel(gp.f, "no store");
    script_end(gp.f);
done:
    if (st != MKB_OK) {
        fclose(dat.f);
        fclose(gp.f);
        free(dat.buf);
        free(gp.buf);
        return st;
    }
    st = text_save(&dat, dir, "paired_ratio", "dat");
    if (st != MKB_OK) {
        fclose(gp.f);
        free(gp.buf);
        return st;
    }
    return text_save(&gp, dir, "paired_ratio", "gp");
}

/* ---- transfer by relative standing ---- */

static void standing_block(FILE *f, json_t *standing) {
    static const char *names[] = {"above", "same", "below"};
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object_get(standing, names[k]);
        long long n = mkb_json_path_int(x, "n");
        double h = mkb_json_path_real(x, "help/value"), m = mkb_json_path_real(x, "harm/value"), z = mkb_json_path_real(x, "neutral/value");
        if (n == 0) h = m = z = 0;
        fprintf(f, "\"%s (n=%lld)\" %.4f %.4f %.4f\n", names[k], n, 100 * h, 100 * z, 100 * m);
    }
    fputs("\n\n", f);
}

static void standing_panel(FILE *f, const char *title, int block) {
    fputs("  set title '", f);
    put_safe(f, title);
    fprintf(f,
            "'\n  set yrange [0:100]\n  set ylabel '%% of comparisons'\n  set xlabel 'source solo vs target solo'\n"
            "  set style data histograms\n  set style histogram rowstacked\n  set style fill solid 0.9 border -1\n"
            "  set boxwidth 0.6\n  set key outside bottom center horizontal\n  set grid ytics lc rgb \"#dddddd\"\n"
            "  plot 'standing.dat' index %d using 2:xtic(1) title 'helped' lc rgb \"#%06x\", \\\n"
            "       '' index %d using 3 title 'neutral' lc rgb \"#%06x\", \\\n"
            "       '' index %d using 4 title 'harmed' lc rgb \"#%06x\"\n",
            block, GREEN, block, GREY, block, ORANGE);
}

static enum mkb_status standing(json_t *res, const char *dir) {
    json_t *stores = json_object_get(res, "stores");
    size_t ns = json_array_size(stores), i, j;
    size_t panels = ns + (ns > 1);
    if (panels == 0) panels = 1;
    size_t cols = panels < 3 ? panels : 3, rows = (panels + cols - 1) / cols;
    struct text dat, gp;
    MKB_TRY(text_open(&dat));
    enum mkb_status st = text_open(&gp);
    if (st != MKB_OK) {
        fclose(dat.f);
        free(dat.buf);
        return st;
    }
    fputs("# mkb standing.dat: one block per panel; per standing of the source solo's tier against the target\n"
          "# solo's: label with n, % helped, % neutral, % harmed (skips count as neutral).\n",
          dat.f);
    script_begin(gp.f, "standing", "transfer outcomes by relative standing", 460 * (int)cols, 380 * (int)rows);
    fprintf(gp.f, "  set multiplot layout %zu,%zu title 'Transfer by relative standing (both directions pooled)'\n",
            rows, cols);
    int block = 0;
    json_t *s, *c;
    json_array_foreach(stores, i, s) {
        json_t *pooled = NULL;
        json_array_foreach(json_object_get(s, "contrasts"), j, c) if (!strcmp(mkb_json_path_str(c, "kind"), "pooled")) pooled = c;
        json_t *g = pooled ? group_all(pooled) : NULL;
        char title[512];
        snprintf(title, sizeof title, "%s (n = %lld)", mkb_json_path_str(s, "model"), g ? mkb_json_path_int(g, "n_resolved") : 0);
        if (!g || !json_object_get(g, "standing")) {
            empty_panel(gp.f, title);
            continue;
        }
        fprintf(dat.f, "# block %d: ", block);
        put_safe(dat.f, mkb_json_path_str(s, "model"));
        fputc('\n', dat.f);
        standing_block(dat.f, json_object_get(g, "standing"));
        standing_panel(gp.f, title, block++);
    }
    if (ns > 1) {
        json_t *sp = mkb_json_path(res, "models/standing_pooled");
        long long n = mkb_json_path_int(sp, "above/n") + mkb_json_path_int(sp, "same/n") + mkb_json_path_int(sp, "below/n");
        char title[128];
        snprintf(title, sizeof title, "all models (n = %lld)", n);
        fprintf(dat.f, "# block %d: all models\n", block);
        standing_block(dat.f, sp);
        standing_panel(gp.f, title, block++);
    }
    if (ns == 0) empty_panel(gp.f, "no store");
    script_end(gp.f);
    st = text_save(&dat, dir, "standing", "dat");
    if (st != MKB_OK) {
        fclose(gp.f);
        free(gp.buf);
        return st;
    }
    return text_save(&gp, dir, "standing", "gp");
}

/* ---- ladders per arm ---- */

static enum mkb_status ladders(json_t *res, const char *dir) {
    static const char *rungs[] = {"R@0", "R@0.5", "R@1", "R@2", "R@4"};
    static const char *labels[] = {"0", "0.5", "1", "2", "4"};
    json_t *stores = json_object_get(res, "stores");
    size_t ns = json_array_size(stores), i, j;
    struct text dat, gp;
    MKB_TRY(text_open(&dat));
    enum mkb_status st = text_open(&gp);
    if (st != MKB_OK) {
        fclose(dat.f);
        free(dat.buf);
        return st;
    }
    fputs("# mkb ladders.dat: one block per model; a header line (columns named, arms with n), then per\n"
          "# threshold t: position, t, R@t in % for each arm (every scored attempt of the arm, unpaired).\n",
          dat.f);
    script_begin(gp.f, "ladders", "ladders per arm, per model", 900, 340 * (int)(ns ? ns : 1));
    fprintf(gp.f, "  set multiplot layout %zu,1 title 'Ladders per arm: share passed with speedup >= t'\n", ns ? ns : 1);
    int block = 0;
    json_t *s, *a;
    json_array_foreach(stores, i, s) {
        json_t *arms = json_object_get(s, "arms");
        size_t na = json_array_size(arms);
        char title[512];
        snprintf(title, sizeof title, "%s", mkb_json_path_str(s, "model"));
        if (na == 0) {
            empty_panel(gp.f, title);
            continue;
        }
        fprintf(dat.f, "\"pos\" \"t\"");
        json_array_foreach(arms, j, a) {
            fputs(" \"", dat.f);
            put_safe(dat.f, mkb_json_path_str(a, "arm"));
            fprintf(dat.f, " (n=%lld)\"", mkb_json_path_int(a, "n_scored"));
        }
        fputc('\n', dat.f);
        for (int t = 0; t < 5; t++) {
            fprintf(dat.f, "%d \"%s\"", t, labels[t]);
            json_array_foreach(arms, j, a) {
                double v = mkb_json_path_real(json_object_get(json_object_get(a, "ladder"), rungs[t]), "value");
                if (isfinite(v))
                    fprintf(dat.f, " %.4f", 100 * v);
                else
                    fputs(" NaN", dat.f);
            }
            fputc('\n', dat.f);
        }
        fputs("\n\n", dat.f);
        fputs("  set title '", gp.f);
        put_safe(gp.f, title);
        fprintf(gp.f,
                "'\n  set xrange [-0.2:4.2]\n  set yrange [0:105]\n  set xlabel 'speedup threshold t'\n"
                "  set ylabel 'R@t (%%)'\n  set key outside right top\n  set grid ytics lc rgb \"#dddddd\"\n"
                "  plot for [c=3:%zu] 'ladders.dat' index %d using 1:c:xtic(2) with linespoints lw 2 pt 7 ps 0.8 "
                "title columnheader(c)\n",
                na + 2, block);
        block++;
    }
    if (ns == 0) empty_panel(gp.f, "no store");
    script_end(gp.f);
    st = text_save(&dat, dir, "ladders", "dat");
    if (st != MKB_OK) {
        fclose(gp.f);
        free(gp.buf);
        return st;
    }
    return text_save(&gp, dir, "ladders", "gp");
}

/* ---- running gnuplot ---- */

static int on_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char cand[4096];
        if (n > 0 && n + strlen(prog) + 2 < sizeof cand) {
            snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, prog);
            if (access(cand, X_OK) == 0) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static enum mkb_status run_gnuplot(const char *dir, const char *name) {
    char script[256];
    snprintf(script, sizeof script, "%s.gp", name);
    int fds[2];
    if (pipe(fds) != 0) return mkb_error(MKB_ERR_IO, "cannot run gnuplot: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return mkb_error(MKB_ERR_IO, "cannot run gnuplot: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(fds[1], 2);
        if (chdir(dir) != 0) _exit(126);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char err[2048];
    size_t used = 0;
    for (;;) {
        char buf[512];
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t take = (size_t)r < sizeof err - 1 - used ? (size_t)r : sizeof err - 1 - used;
        memcpy(err + used, buf, take);
        used += take;
    }
    err[used] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return mkb_error(MKB_ERR_IO, "cannot wait for gnuplot: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        while (used > 0 && (err[used - 1] == '\n' || err[used - 1] == ' ')) err[--used] = '\0';
        return mkb_error(MKB_ERR_IO, "gnuplot failed on '%s/%s' (status %d): %s", dir, script,
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1, used ? err : "no message");
    }
    if (used) mkb_debug("gnuplot on %s/%s: %s", dir, script, err);
    return MKB_OK;
}

enum mkb_status mkb_plots_write(json_t *results, const char *dir, int render, int *rendered) {
    *rendered = 0;
    MKB_TRY(paired_ratio(results, dir));
    MKB_TRY(standing(results, dir));
    MKB_TRY(ladders(results, dir));
    if (!render) return MKB_OK;
    if (!on_path("gnuplot")) return MKB_OK;
    for (int i = 0; i < 3; i++) MKB_TRY(run_gnuplot(dir, mkb_plot_names[i]));
    *rendered = 1;
    return MKB_OK;
}
