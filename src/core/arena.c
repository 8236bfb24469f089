/* Arena allocator (see arena.h). Blocks grow geometrically; large requests get their own block. */
#include "core/arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mkb_arena_block {
    struct mkb_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void mkb_arena_init(struct mkb_arena *a) {
    a->head = NULL;
    a->block_size = 4096;
}

void mkb_arena_free(struct mkb_arena *a) {
    struct mkb_arena_block *b = a->head;
    while (b) {
        struct mkb_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

void *mkb_arena_alloc(struct mkb_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    struct mkb_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = a->block_size;
        if (cap < n) cap = n;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
        if (a->block_size < (1u << 20)) a->block_size *= 2;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *mkb_arena_strdup(struct mkb_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = mkb_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

char *mkb_arena_printf(struct mkb_arena *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *p = mkb_arena_alloc(a, (size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}
