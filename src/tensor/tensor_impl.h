/* Internals shared by tensor.c, ops.c and the backends; not for reference programs. */
#ifndef MKB_TENSOR_TENSOR_IMPL_H
#define MKB_TENSOR_TENSOR_IMPL_H

#include "tensor/tensor.h"

/* A contiguous tensor header; with a buffer when with_data. Fails the context on error. */
struct mkb_tensor *mkb_tensor_alloc(struct mkb_ctx *c, enum mkb_dtype dt, int ndim, const int64_t *shape,
                                    bool with_data);
/* Storage element index of row-major element i of t. */
int64_t mkb_tensor_offset(const struct mkb_tensor *t, int64_t i);

#endif
