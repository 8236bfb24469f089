/* File-tree helpers the protocol needs on top of core/fs.h: remove a tree, copy a file or a
 * tree, list a tree's regular files, the SHA-256 manifest and fingerprint of a directory, and
 * reading a file an untrusted process may have planted (no symlinks followed, size capped).
 *
 * None of these follow symbolic links: a link in a tree is removed as a link, copied as nothing
 * (skipped and counted) and never read through. Errors name the path.
 * Ownership: lists and manifests are malloc'ed and freed with the functions named below. */
#ifndef MKB_PROTOCOL_FILES_H
#define MKB_PROTOCOL_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sha256.h"
#include "core/status.h"

/* rm -rf without following links; fine if path does not exist. */
enum mkb_status mkb_rmtree(const char *path);

/* Copy a regular file (mode 0644, or 0755 when the source is executable), atomically. */
enum mkb_status mkb_copy_file(const char *src, const char *dst);

/* Copy the regular files and directories of src under dst (created). */
enum mkb_status mkb_copy_tree(const char *src, const char *dst);

/* The regular files under dir, as sorted paths relative to it ("a/b.txt"); directories are
 * walked, links and special files are skipped. */
struct mkb_file_list {
    char **paths;
    int64_t n;
};
enum mkb_status mkb_list_files(const char *dir, struct mkb_file_list *out);
void mkb_file_list_free(struct mkb_file_list *l);

/* The manifest of dir: one line "<sha256>  <path>\n" per regular file in path order (the format
 * of sha256sum), leaving out the top-level names in skip (NULL-terminated or NULL); and the
 * fingerprint, the SHA-256 of that text. *manifest (optional) is malloc'ed. */
enum mkb_status mkb_dir_fingerprint(const char *dir, const char *const *skip, char fingerprint[MKB_SHA256_HEX],
                                    char **manifest, int64_t *n_files);

/* Read a regular file that an untrusted process controls: refuses links and non-regular files
 * (MKB_ERR_INVALID), MKB_ERR_NOT_FOUND when absent, and reads at most max bytes (*truncated says
 * whether there was more). *data is malloc'ed and NUL-terminated. */
enum mkb_status mkb_read_untrusted(const char *path, int64_t max, char **data, size_t *len, bool *truncated);


/* Append one line (a '\n' is added) to path with O_APPEND and fsync. */
enum mkb_status mkb_append_line(const char *path, const char *line);

#endif
