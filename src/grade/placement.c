#include "grade/placement.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum mkb_status mkb_cpulist_parse(const char *text, cpu_set_t *set) {
    CPU_ZERO(set);
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || errno || a < 0 || a >= CPU_SETSIZE)
            return mkb_error(MKB_ERR_INVALID, "'%s' is not a CPU list (at '%.12s')", text, p);
        long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b >= CPU_SETSIZE)
                return mkb_error(MKB_ERR_INVALID, "'%s' is not a CPU list (a bad range before '%.12s')", text, p);
            p = end;
        }
        for (long c = a; c <= b; c++) CPU_SET((int)c, set);
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (*p == ',') p++;
        else if (*p) return mkb_error(MKB_ERR_INVALID, "'%s' is not a CPU list (at '%.12s')", text, p);
    }
    return MKB_OK;
}

void mkb_cpulist_format(const cpu_set_t *set, char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
        int w = e > c ? snprintf(buf + len, len < n ? n - len : 0, "%s%d-%d", len ? "," : "", c, e)
                      : snprintf(buf + len, len < n ? n - len : 0, "%s%d", len ? "," : "", c);
        if (w < 0 || len + (size_t)w >= n) return;
        len += (size_t)w;
        c = e;
    }
}

/* the whole of a small sysfs file, or NULL */
static char *read_small(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 4096);
    if (buf && fread(buf, 1, 4095, f) == 0 && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

void mkb_placement_decide(const char *sysfs_root, const char *pci_bus_id, const cpu_set_t *allowed,
                          struct mkb_placement *out) {
    memset(out, 0, sizeof *out);
    out->node = -1;
    out->nallowed = CPU_COUNT(allowed);
    if (!pci_bus_id || !pci_bus_id[0]) {
        snprintf(out->why, sizeof out->why, "the GPU's PCI bus id is not known");
        return;
    }
    char id[64];
    size_t k = 0;
    for (; pci_bus_id[k] && k + 1 < sizeof id; k++) id[k] = (char)tolower((unsigned char)pci_bus_id[k]);
    id[k] = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", sysfs_root, id);
    char *text = read_small(path);
    if (!text) {
        snprintf(out->why, sizeof out->why, "the system does not say which NUMA node the GPU %s is on", id);
        return;
    }
    out->node = atoi(text);
    free(text);
    if (out->node < 0) {
        snprintf(out->why, sizeof out->why, "the GPU %s belongs to no NUMA node (a machine with one)", id);
        return;
    }
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", sysfs_root, id);
    text = read_small(path);
    cpu_set_t local;
    if (!text || mkb_cpulist_parse(text, &local) != MKB_OK) {
        snprintf(out->why, sizeof out->why, "the GPU %s's local cores cannot be read", id);
        free(text);
        return;
    }
    free(text);
    CPU_AND(&out->cpus, &local, allowed);
    out->ncpus = CPU_COUNT(&out->cpus);
    if (out->ncpus == 0) {
        snprintf(out->why, sizeof out->why, "none of the %d cores this process may use is on the GPU's NUMA node %d",
                 out->nallowed, out->node);
        return;
    }
    out->restricts = out->ncpus < out->nallowed;
}

bool mkb_placement_apply(const struct mkb_placement *p, char *why, size_t n) {
    if (n) why[0] = 0;
    if (p->ncpus == 0) {
        snprintf(why, n, "%s", p->why);
        return false;
    }
    /* every thread of this process: the CUDA driver and CUPTI may have started some already */
    DIR *d = opendir("/proc/self/task");
    int failed = 0, done = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (isdigit((unsigned char)e->d_name[0])) {
                if (sched_setaffinity((pid_t)atoi(e->d_name), sizeof p->cpus, &p->cpus) == 0) done++;
                else failed++;
            }
        closedir(d);
    }
    if (done == 0 && sched_setaffinity(0, sizeof p->cpus, &p->cpus) == 0) done = 1;
    if (done == 0) {
        snprintf(why, n, "the cores of NUMA node %d could not be set: %s", p->node, strerror(errno));
        return false;
    }
    if (failed) snprintf(why, n, "%d of the process's threads could not be moved", failed);
    /* memory: prefer the GPU's node (never bind: a full node falls back to the others) */
    if (p->node >= 0 && p->node < (int)(8 * sizeof(unsigned long))) {
        unsigned long mask = 1UL << p->node;
        if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, &mask, 8 * sizeof mask + 1) != 0 && !why[0])
            snprintf(why, n, "memory cannot be preferred from node %d: %s", p->node, strerror(errno));
    }
    return true;
}

json_t *mkb_placement_json(const struct mkb_placement *p, bool applied, const char *note) {
    char cpus[256];
    mkb_cpulist_format(&p->cpus, cpus, sizeof cpus);
    json_t *j = json_pack("{s:i, s:i, s:s, s:b}", "gpu_numa_node", p->node, "allowed_cores", p->nallowed, "cpus", cpus,
                          "applied", applied);
    if (note && note[0]) json_object_set_new(j, "note", json_string(note));
    else if (p->why[0]) json_object_set_new(j, "note", json_string(p->why));
    return j;
}
