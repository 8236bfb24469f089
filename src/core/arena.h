/* Arena: a bump allocator for metadata (shapes, names, tensor headers) freed all at once.
 *
 * Ownership: everything allocated from an arena lives until mkb_arena_free(); nothing in it is
 * freed one by one. Tensor data never lives here (it lives in backend buffers). Allocation
 * failure returns NULL; callers turn that into MKB_ERR_NOMEM. */
#ifndef MKB_CORE_ARENA_H
#define MKB_CORE_ARENA_H

#include <stddef.h>

struct mkb_arena_block;

struct mkb_arena {
    struct mkb_arena_block *head;
    size_t block_size;
};

void mkb_arena_init(struct mkb_arena *a);
void mkb_arena_free(struct mkb_arena *a);
/* Zeroed, 16-byte aligned memory; NULL when out of memory. */
void *mkb_arena_alloc(struct mkb_arena *a, size_t n);
char *mkb_arena_strdup(struct mkb_arena *a, const char *s);
char *mkb_arena_printf(struct mkb_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
