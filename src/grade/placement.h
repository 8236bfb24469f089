/* Where a grade runs on the host: the CPU cores and the memory next to the GPU it times.
 *
 * On a machine with more than one NUMA node (most GPU servers: two sockets, each with its own
 * memory and PCIe root), a process that the scheduler starts on the far socket launches its
 * kernels across the socket link and allocates its Python objects in the far memory; a 0.1 ms
 * kernel then takes measurably longer end to end, and which socket a grade lands on changes from
 * run to run. The grader child therefore restricts itself to the cores of the GPU's NUMA node
 * (those it may use at all: a Slurm job's cgroup comes first) and prefers that node's memory,
 * before the interpreter starts. Where the system does not say which node the GPU is on, or none
 * of the allowed cores is on it, nothing changes and the verdict says why.
 *
 * The decision reads Linux's sysfs (/sys/bus/pci/devices/<bus id>/{numa_node,local_cpulist}); the
 * root is a parameter so that tests can give it a made-up tree. */
#ifndef MKB_GRADE_PLACEMENT_H
#define MKB_GRADE_PLACEMENT_H

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

struct mkb_placement {
    int node;          /* the GPU's NUMA node; -1 when the system does not say */
    cpu_set_t cpus;    /* the cores to run on: the GPU's local ones among those allowed */
    int ncpus;         /* how many; 0 when there is nothing to change */
    int nallowed;      /* how many cores the process may use at all */
    bool restricts;    /* whether cpus is smaller than the allowed set (else a placement changes nothing) */
    char why[200];     /* when ncpus is 0: why not */
};

/* Parse a Linux CPU list ("0-3,8,10-11\n"; empty is the empty set) into *set. */
enum mkb_status mkb_cpulist_parse(const char *text, cpu_set_t *set);
/* Format *set as a CPU list ("0-3,8"); "" for the empty set. Truncates to n bytes. */
void mkb_cpulist_format(const cpu_set_t *set, char *buf, size_t n);

/* Decide the placement for the GPU with this PCI bus id ("0000:19:00.0", any case) under
 * sysfs_root ("/sys" on a real host), given the cores the process may use. Never fails: what
 * cannot be read leaves out->ncpus 0 with out->why saying so. */
void mkb_placement_decide(const char *sysfs_root, const char *pci_bus_id, const cpu_set_t *allowed,
                          struct mkb_placement *out);

/* Apply it to this process: every existing thread (threads started later inherit it) runs on
 * out->cpus, and this thread's new memory comes from out->node where it can. Returns whether the
 * cores were set; *why (size n) says what did not work. */
bool mkb_placement_apply(const struct mkb_placement *p, char *why, size_t n);

/* The placement as the verdict records it: {gpu_numa_node, allowed, cpus, applied, note}. */
json_t *mkb_placement_json(const struct mkb_placement *p, bool applied, const char *note);

#endif
