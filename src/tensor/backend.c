/* Backend lookup by name (backend.h). The backends themselves live under src/backend/; this file
 * only maps the names users type to them and says why one is not available. */
#include "tensor/backend.h"

#include <string.h>

enum mkb_status mkb_backend_by_name(const char *name, struct mkb_backend **out) {
    *out = NULL;
    if (!strcmp(name, "cpu")) {
        *out = mkb_backend_cpu();
        return MKB_OK;
    }
    if (!strcmp(name, "cuda")) return mkb_error(MKB_ERR_UNSUPPORTED, "this mkb was built without the CUDA backend");
    return mkb_error(MKB_ERR_INVALID, "unknown backend '%s' (known: cpu, cuda)", name);
}
