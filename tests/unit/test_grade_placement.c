/* Tests of the grader's placement next to the GPU (src/grade/placement.h): CPU lists parsed and
 * formatted, the GPU's NUMA node and local cores read from a made-up sysfs tree and intersected
 * with the cores the process may use, and every way the system may not say leaves the process
 * where it is with a reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grade/placement.h"

static cpu_set_t set_of(const char *list) {
    cpu_set_t s;
    cr_assert_eq(mkb_cpulist_parse(list, &s), MKB_OK, "%s", list);
    return s;
}

static const char *fmt(const cpu_set_t *s) {
    static char buf[256];
    mkb_cpulist_format(s, buf, sizeof buf);
    return buf;
}

Test(cpulist, parse_and_format_round_trip) {
    cpu_set_t s = set_of("0-3,8,10-11\n");
    cr_assert_eq(CPU_COUNT(&s), 7);
    cr_assert(CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && CPU_ISSET(11, &s) && !CPU_ISSET(4, &s) && !CPU_ISSET(9, &s));
    cr_assert_str_eq(fmt(&s), "0-3,8,10-11");
    s = set_of("");
    cr_assert_eq(CPU_COUNT(&s), 0);
    cr_assert_str_eq(fmt(&s), "");
    s = set_of("5");
    cr_assert_str_eq(fmt(&s), "5");
    s = set_of("0-1,2-3");
    cr_assert_str_eq(fmt(&s), "0-3");
}

Test(cpulist, rejects_what_is_not_a_list) {
    cpu_set_t s;
    const char *bad[] = {"a", "3-1", "1-", "-2", "1,,x", "99999", "1;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_neq(mkb_cpulist_parse(bad[i], &s), MKB_OK, "'%s' was accepted", bad[i]);
        cr_assert(strstr(mkb_error_message(), "CPU list"), "%s", mkb_error_message());
    }
}

Test(cpulist, format_truncates_without_overflow) {
    cpu_set_t s = set_of("0,2,4,6,8,10,12,14");
    char buf[8];
    memset(buf, 'x', sizeof buf);
    mkb_cpulist_format(&s, buf, sizeof buf);
    cr_assert(memchr(buf, 0, sizeof buf) != NULL);
    cr_assert_str_eq(buf, "0,2,4,6");
}

/* a sysfs tree with one GPU: bus id, its node and its local cores (NULL: file absent) */
static char root[64];

static void write_file(const char *rel, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    cr_assert(f, "%s", p);
    fputs(text, f);
    fclose(f);
}

static void make_tree(const char *bus, const char *node, const char *cpulist) {
    snprintf(root, sizeof root, "/tmp/mkb-placement-XXXXXX");
    cr_assert(mkdtemp(root));
    char p[256];
    const char *parts[] = {"bus", "bus/pci", "bus/pci/devices"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", root, parts[i]);
        cr_assert_eq(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s", root, bus);
    cr_assert_eq(mkdir(p, 0755), 0);
    char rel[128];
    if (node) {
        snprintf(rel, sizeof rel, "bus/pci/devices/%s/numa_node", bus);
        write_file(rel, node);
    }
    if (cpulist) {
        snprintf(rel, sizeof rel, "bus/pci/devices/%s/local_cpulist", bus);
        write_file(rel, cpulist);
    }
}

static void drop_tree(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
}

Test(placement, two_sockets_picks_the_gpus_cores) {
    make_tree("0000:9a:00.0", "1\n", "48-95,144-191\n");
    cpu_set_t allowed = set_of("0-191");
    struct mkb_placement pl;
    /* CUDA reports the bus id in upper case; sysfs names it in lower case */
    mkb_placement_decide(root, "0000:9A:00.0", &allowed, &pl);
    cr_assert_eq(pl.node, 1);
    cr_assert_eq(pl.ncpus, 96);
    cr_assert_eq(pl.nallowed, 192);
    cr_assert(pl.restricts);
    cr_assert_str_eq(fmt(&pl.cpus), "48-95,144-191");
    json_t *j = mkb_placement_json(&pl, true, "");
    cr_assert_eq(json_integer_value(json_object_get(j, "gpu_numa_node")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(j, "cpus")), "48-95,144-191");
    cr_assert(json_is_true(json_object_get(j, "applied")));
    cr_assert_null(json_object_get(j, "note"));
    json_decref(j);
    drop_tree();
}

Test(placement, a_job_cgroup_comes_first) {
    make_tree("0000:19:00.0", "0\n", "0-47,96-143\n");
    /* a Slurm job given cores on both sockets: only its own cores on the GPU's socket */
    cpu_set_t allowed = set_of("40-55");
    struct mkb_placement pl;
    mkb_placement_decide(root, "0000:19:00.0", &allowed, &pl);
    cr_assert_str_eq(fmt(&pl.cpus), "40-47");
    cr_assert(pl.restricts);
    /* a job whose cores are all on the GPU's socket: placing changes nothing */
    allowed = set_of("0-15");
    mkb_placement_decide(root, "0000:19:00.0", &allowed, &pl);
    cr_assert_eq(pl.ncpus, 16);
    cr_assert_not(pl.restricts);
    /* a job with no core on the GPU's socket: left where it is, with the reason */
    allowed = set_of("50-60");
    mkb_placement_decide(root, "0000:19:00.0", &allowed, &pl);
    cr_assert_eq(pl.ncpus, 0);
    cr_assert(strstr(pl.why, "none of the 11 cores") && strstr(pl.why, "node 0"), "%s", pl.why);
    char why[200];
    cr_assert_not(mkb_placement_apply(&pl, why, sizeof why));
    cr_assert_str_eq(why, pl.why);
    drop_tree();
}

Test(placement, the_system_does_not_say) {
    cpu_set_t allowed = set_of("0-7");
    struct mkb_placement pl;
    mkb_placement_decide("/nonexistent-sysfs", "0000:19:00.0", &allowed, &pl);
    cr_assert_eq(pl.ncpus, 0);
    cr_assert_eq(pl.node, -1);
    cr_assert(strstr(pl.why, "does not say which NUMA node"), "%s", pl.why);
    mkb_placement_decide("/sys", "", &allowed, &pl);
    cr_assert(strstr(pl.why, "PCI bus id is not known"), "%s", pl.why);
    /* a one-node machine: numa_node is -1 */
    make_tree("0000:19:00.0", "-1\n", "0-7\n");
    mkb_placement_decide(root, "0000:19:00.0", &allowed, &pl);
    cr_assert_eq(pl.ncpus, 0);
    cr_assert(strstr(pl.why, "no NUMA node"), "%s", pl.why);
    json_t *j = mkb_placement_json(&pl, false, NULL);
    cr_assert(strstr(json_string_value(json_object_get(j, "note")), "no NUMA node"));
    json_decref(j);
    drop_tree();
    /* a node but no readable local cores */
    make_tree("0000:19:00.0", "0\n", "garbage\n");
    mkb_placement_decide(root, "0000:19:00.0", &allowed, &pl);
    cr_assert_eq(pl.ncpus, 0);
    cr_assert(strstr(pl.why, "local cores cannot be read"), "%s", pl.why);
    drop_tree();
}

Test(placement, apply_moves_this_process) {
    cpu_set_t before;
    cr_assert_eq(sched_getaffinity(0, sizeof before, &before), 0);
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &before)) cpu = c;
    char list[16];
    snprintf(list, sizeof list, "%d", cpu);
    make_tree("0000:19:00.0", "0\n", list);
    struct mkb_placement pl;
    mkb_placement_decide(root, "0000:19:00.0", &before, &pl);
    cr_assert_eq(pl.ncpus, 1);
    char why[200];
    cr_assert(mkb_placement_apply(&pl, why, sizeof why), "%s", why);
    cpu_set_t after;
    cr_assert_eq(sched_getaffinity(0, sizeof after, &after), 0);
    cr_assert_eq(CPU_COUNT(&after), 1);
    cr_assert(CPU_ISSET(cpu, &after));
    sched_setaffinity(0, sizeof before, &before);
    drop_tree();
}
