/* File-tree helpers (see files.h). */
#include "protocol/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"

enum mkb_status mkb_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return MKB_OK;
        return mkb_error(MKB_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        /* make it searchable and writable in case the previous owner locked it down */
        if ((st.st_mode & 0700) != 0700) chmod(path, st.st_mode | 0700);
        DIR *d = opendir(path);
        if (!d) return mkb_error(MKB_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
        struct dirent *e;
        enum mkb_status s = MKB_OK;
        while ((e = readdir(d)) && s == MKB_OK) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[4096];
            s = mkb_path_join(child, sizeof child, path, e->d_name);
            if (s == MKB_OK) s = mkb_rmtree(child);
        }
        closedir(d);
        if (s != MKB_OK) return s;
        if (rmdir(path) != 0 && errno != ENOENT)
            return mkb_error(MKB_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
        return MKB_OK;
    }
    if (unlink(path) != 0 && errno != ENOENT) return mkb_error(MKB_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
    return MKB_OK;
}


enum mkb_status mkb_append_line(const char *path, const char *line) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return mkb_error(MKB_ERR_IO, "cannot append to '%s': %s", path, strerror(errno));
    size_t n = strlen(line);
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return mkb_error(MKB_ERR_NOMEM, "out of memory appending to '%s'", path);
    }
    memcpy(buf, line, n);
    buf[n] = '\n';
    /* one write() so that concurrent appenders never interleave within a line */
    ssize_t w = write(fd, buf, n + 1);
    int e = errno;
    free(buf);
    if (w != (ssize_t)(n + 1)) {
        close(fd);
        return mkb_error(MKB_ERR_IO, "cannot append to '%s': %s", path, w < 0 ? strerror(e) : "short write");
    }
    if (fsync(fd) != 0) {
        e = errno;
        close(fd);
        return mkb_error(MKB_ERR_IO, "cannot append to '%s': %s", path, strerror(e));
    }
    close(fd);
    return MKB_OK;
}

enum mkb_status mkb_read_untrusted(const char *path, int64_t max, char **data, size_t *len, bool *truncated) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return mkb_error(MKB_ERR_NOT_FOUND, "'%s' does not exist", path);
        if (errno == ELOOP) return mkb_error(MKB_ERR_INVALID, "'%s' is a symbolic link", path);
        return mkb_error(MKB_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mkb_error(MKB_ERR_INVALID, "'%s' is not a regular file", path);
    }
    char *buf = malloc((size_t)max + 2);
    if (!buf) {
        close(fd);
        return mkb_error(MKB_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    int64_t n = 0;
    while (n < max + 1) {
        ssize_t r = read(fd, buf + n, (size_t)(max + 1 - n));
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return mkb_error(MKB_ERR_IO, "cannot read '%s': %s", path, strerror(e));
        }
        if (r == 0) break;
        n += r;
    }
    close(fd);
    *truncated = n > max;
    if (n > max) n = max;
    buf[n] = '\0';
    *data = buf;
    if (len) *len = (size_t)n;
    return MKB_OK;
}

enum mkb_status mkb_copy_file(const char *src, const char *dst) {
    struct stat st;
    if (lstat(src, &st) != 0) return mkb_error(MKB_ERR_IO, "cannot copy '%s': %s", src, strerror(errno));
    if (!S_ISREG(st.st_mode)) return mkb_error(MKB_ERR_INVALID, "cannot copy '%s': not a regular file", src);
    char *data;
    size_t len;
    MKB_TRY(mkb_read_file(src, &data, &len));
    enum mkb_status s = mkb_write_file_atomic(dst, data, len);
    free(data);
    if (s != MKB_OK) return s;
    if (chmod(dst, (st.st_mode & 0111) ? 0755 : 0644) != 0)
        return mkb_error(MKB_ERR_IO, "cannot set the mode of '%s': %s", dst, strerror(errno));
    return MKB_OK;
}

enum mkb_status mkb_copy_tree(const char *src, const char *dst) {
    MKB_TRY(mkb_mkdir_p(dst));
    DIR *d = opendir(src);
    if (!d) return mkb_error(MKB_ERR_IO, "cannot open directory '%s': %s", src, strerror(errno));
    struct dirent *e;
    enum mkb_status s = MKB_OK;
    while ((e = readdir(d)) && s == MKB_OK) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char a[4096], b[4096];
        if ((s = mkb_path_join(a, sizeof a, src, e->d_name)) != MKB_OK) break;
        if ((s = mkb_path_join(b, sizeof b, dst, e->d_name)) != MKB_OK) break;
        struct stat st;
        if (lstat(a, &st) != 0) {
            s = mkb_error(MKB_ERR_IO, "cannot copy '%s': %s", a, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode))
            s = mkb_copy_tree(a, b);
        else if (S_ISREG(st.st_mode))
            s = mkb_copy_file(a, b);
    }
    closedir(d);
    return s;
}

struct list_ctx {
    struct mkb_file_list *l;
    int64_t cap;
};

static enum mkb_status list_walk(struct list_ctx *c, const char *root, const char *rel) {
    char dir[4096];
    if (rel[0]) MKB_TRY(mkb_path_join(dir, sizeof dir, root, rel));
    else snprintf(dir, sizeof dir, "%s", root);
    DIR *d = opendir(dir);
    if (!d) return mkb_error(MKB_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    struct dirent *e;
    enum mkb_status s = MKB_OK;
    while ((e = readdir(d)) && s == MKB_OK) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char r[4096], full[4096];
        int n = rel[0] ? snprintf(r, sizeof r, "%s/%s", rel, e->d_name) : snprintf(r, sizeof r, "%s", e->d_name);
        if (n < 0 || (size_t)n >= sizeof r) {
            s = mkb_error(MKB_ERR_INVALID, "path too long under '%s'", root);
            break;
        }
        if ((s = mkb_path_join(full, sizeof full, root, r)) != MKB_OK) break;
        struct stat st;
        if (lstat(full, &st) != 0) {
            s = mkb_error(MKB_ERR_IO, "cannot stat '%s': %s", full, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            s = list_walk(c, root, r);
        } else if (S_ISREG(st.st_mode)) {
            if (c->l->n == c->cap) {
                int64_t cap = c->cap ? c->cap * 2 : 64;
                char **np = realloc(c->l->paths, sizeof *np * (size_t)cap);
                if (!np) {
                    s = mkb_error(MKB_ERR_NOMEM, "out of memory listing '%s'", root);
                    break;
                }
                c->l->paths = np;
                c->cap = cap;
            }
            if (!(c->l->paths[c->l->n] = strdup(r))) {
                s = mkb_error(MKB_ERR_NOMEM, "out of memory listing '%s'", root);
                break;
            }
            c->l->n++;
        }
    }
    closedir(d);
    return s;
}

static int cmp_path(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

enum mkb_status mkb_list_files(const char *dir, struct mkb_file_list *out) {
    memset(out, 0, sizeof *out);
    struct list_ctx c = {out, 0};
    enum mkb_status s = list_walk(&c, dir, "");
    if (s != MKB_OK) {
        mkb_file_list_free(out);
        return s;
    }
    if (out->n > 1) qsort(out->paths, (size_t)out->n, sizeof *out->paths, cmp_path);
    return MKB_OK;
}

void mkb_file_list_free(struct mkb_file_list *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->paths[i]);
    free(l->paths);
    l->paths = NULL;
    l->n = 0;
}

enum mkb_status mkb_dir_fingerprint(const char *dir, const char *const *skip, char fingerprint[MKB_SHA256_HEX],
                                    char **manifest, int64_t *n_files) {
    struct mkb_file_list l;
    MKB_TRY(mkb_list_files(dir, &l));
    size_t cap = 4096, used = 0;
    char *text = malloc(cap);
    enum mkb_status s = text ? MKB_OK : mkb_error(MKB_ERR_NOMEM, "out of memory fingerprinting '%s'", dir);
    if (text) text[0] = '\0';
    int64_t count = 0;
    for (int64_t i = 0; i < l.n && s == MKB_OK; i++) {
        bool skipped = false;
        for (int k = 0; skip && skip[k]; k++) skipped = skipped || !strcmp(l.paths[i], skip[k]);
        if (skipped) continue;
        char path[4096], hex[MKB_SHA256_HEX];
        char *data = NULL;
        size_t len;
        if ((s = mkb_path_join(path, sizeof path, dir, l.paths[i])) != MKB_OK) break;
        if ((s = mkb_read_file(path, &data, &len)) != MKB_OK) break;
        s = mkb_sha256_hex(data, len, hex);
        free(data);
        if (s != MKB_OK) break;
        size_t need = strlen(hex) + 2 + strlen(l.paths[i]) + 2;
        if (used + need >= cap) {
            while (used + need >= cap) cap *= 2;
            char *nt = realloc(text, cap);
            if (!nt) {
                s = mkb_error(MKB_ERR_NOMEM, "out of memory fingerprinting '%s'", dir);
                break;
            }
            text = nt;
        }
        used += (size_t)sprintf(text + used, "%s  %s\n", hex, l.paths[i]);
        count++;
    }
    mkb_file_list_free(&l);
    if (s == MKB_OK) s = mkb_sha256_hex(text, used, fingerprint);
    if (s != MKB_OK || !manifest) {
        free(text);
        if (manifest) *manifest = NULL;
    } else {
        *manifest = text;
    }
    if (s == MKB_OK && n_files) *n_files = count;
    return s;
}
