/* Iterations over strided operands for the CUDA kernels (kernels.h): broadcasting each view to
 * the iteration shape, then dropping size-1 dims and merging dims that are contiguous for every
 * operand, so the kernels' per-element index arithmetic has as few dims as the layout allows.
 * Host code only; it does not touch the GPU. */
#include <string.h>

#include "backend/cuda/kernels.h"

void mkb_cu_iter_init(struct mkb_cu_iter *it, int nd, const int64_t *shape, int n, const struct mkb_cu_view *const *v) {
    memset(it, 0, sizeof *it);
    it->ndim = nd;
    it->narg = n;
    for (int d = 0; d < nd; d++) it->size[d] = shape[d];
    for (int k = 0; k < n; k++) {
        it->data[k] = v[k]->data;
        it->dtype[k] = v[k]->dtype;
        it->offset[k] = v[k]->offset;
        for (int d = 0; d < nd; d++) {
            int id = d - (nd - v[k]->ndim);
            it->stride[k][d] = (id < 0 || v[k]->shape[id] == 1 || shape[d] == 1) ? 0 : v[k]->stride[id];
        }
    }
}

void mkb_cu_iter_collapse(struct mkb_cu_iter *it) {
    /* drop size-1 dims */
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->size[d] == 1) continue;
        it->size[nd] = it->size[d];
        for (int k = 0; k < it->narg; k++) it->stride[k][nd] = it->stride[k][d];
        nd++;
    }
    it->ndim = nd;
    if (nd == 0) return;
    /* merge dim d into d+1 (from the inside out) when stride[d] == stride[d+1] * size[d+1] */
    int out = nd - 1;
    int64_t size[MKB_CU_DIMS], stride[MKB_CU_ARGS][MKB_CU_DIMS];
    size[out] = it->size[nd - 1];
    for (int k = 0; k < it->narg; k++) stride[k][out] = it->stride[k][nd - 1];
    for (int d = nd - 2; d >= 0; d--) {
        bool merge = true;
        for (int k = 0; k < it->narg && merge; k++)
            if (it->stride[k][d] != stride[k][out] * size[out]) merge = false;
        if (merge) {
            size[out] *= it->size[d];
        } else {
            out--;
            size[out] = it->size[d];
            for (int k = 0; k < it->narg; k++) stride[k][out] = it->stride[k][d];
        }
    }
    it->ndim = nd - out;
    for (int d = 0; d < it->ndim; d++) {
        it->size[d] = size[out + d];
        for (int k = 0; k < it->narg; k++) it->stride[k][d] = stride[k][out + d];
    }
}

int64_t mkb_cu_iter_numel(const struct mkb_cu_iter *it) {
    int64_t n = 1;
    for (int d = 0; d < it->ndim; d++) n *= it->size[d];
    return n;
}
