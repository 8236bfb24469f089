/* Tests of src/analysis/stats.c against published worked examples (each cited where it is used),
 * against brute-force enumeration, and, for the bootstrap, against simulated data with a known
 * mean (interval coverage). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "analysis/stats.h"

#define NEAR(a, b, tol) cr_expect(fabs((a) - (b)) <= (tol), "%s = %.10g, want %.10g (tol %g)", #a, (double)(a), (double)(b), (double)(tol))

/* xoshiro256** as published by Blackman & Vigna (prng.di.unimi.it/xoshiro256starstar.c): from the
 * state {1, 2, 3, 4} the first outputs are 11520, 0, 1509978240, 1215971899390074240 (the first
 * is rotl(2 * 5, 7) * 9 by hand). */
Test(stats, xoshiro_reference_outputs) {
    struct mkb_rng r = {{1, 2, 3, 4}};
    cr_expect_eq(mkb_rng_next(&r), 11520ull);
    cr_expect_eq(mkb_rng_next(&r), 0ull);
    cr_expect_eq(mkb_rng_next(&r), 1509978240ull);
    cr_expect_eq(mkb_rng_next(&r), 1215971899390074240ull);
}

Test(stats, rng_seeded_streams_repeat_and_differ) {
    struct mkb_rng a, b, c;
    mkb_rng_seed(&a, 42);
    mkb_rng_seed(&b, 42);
    mkb_rng_seed(&c, 43);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = mkb_rng_next(&a);
        cr_expect_eq(x, mkb_rng_next(&b));
        same_c += x == mkb_rng_next(&c);
    }
    cr_expect_eq(same_c, 0);
}

Test(stats, rng_below_is_in_range_and_hits_every_value) {
    struct mkb_rng r;
    mkb_rng_seed(&r, 7);
    int hits[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = mkb_rng_below(&r, 7);
        cr_assert_lt(v, 7ull);
        hits[v]++;
    }
    /* each count is Bin(7000, 1/7): mean 1000, sd 29; 850..1150 is beyond 5 sd */
    for (int i = 0; i < 7; i++) cr_expect(hits[i] > 850 && hits[i] < 1150, "value %d drawn %d times", i, hits[i]);
    double u = 0;
    for (int i = 0; i < 10000; i++) {
        double x = mkb_rng_uniform(&r);
        cr_assert(x >= 0 && x < 1);
        u += x;
    }
    NEAR(u / 10000, 0.5, 0.015);
}

/* Newcombe RG (1998), "Two-sided confidence intervals for the single proportion: comparison of
 * seven methods", Statistics in Medicine 17:857-872, Table I, method 3 (score interval without
 * continuity correction): 81/263 -> 0.2553-0.3662; 15/148 -> 0.0624-0.1605; 0/20 -> 0-0.1611;
 * 1/29 -> 0.0061-0.1718. */
Test(stats, wilson_newcombe_1998_table_1) {
    struct {
        int64_t k, n;
        double lo, hi;
    } ex[] = {{81, 263, 0.2553, 0.3662}, {15, 148, 0.0624, 0.1605}, {0, 20, 0.0, 0.1611}, {1, 29, 0.0061, 0.1718}};
    for (int i = 0; i < 4; i++) {
        struct mkb_interval w = mkb_wilson(ex[i].k, ex[i].n, MKB_Z95);
        NEAR(w.lo, ex[i].lo, 0.00005);
        NEAR(w.hi, ex[i].hi, 0.00005);
    }
    struct mkb_interval all = mkb_wilson(5, 5, MKB_Z95);
    cr_expect_eq(all.hi, 1.0);
    cr_expect(all.lo > 0.5 && all.lo < 0.6, "5/5 lower bound %g", all.lo); /* 5/(5+z^2) = 0.5655 */
    struct mkb_interval none = mkb_wilson(0, 0, MKB_Z95);
    cr_expect(isnan(none.lo) && isnan(none.hi));
}

/* Conover WJ (1971), Practical Nonparametric Statistics, p. 97f, as run in R's binom.test
 * documentation: 682 'giant' of 925 progeny against the Mendelian 3/4 gives p = 0.3825. */
Test(stats, binomial_test_conover_mendel) {
    NEAR(mkb_binom_test(682, 925, 0.75), 0.3825, 0.00005);
    /* symmetric case by hand: 2 of 10 at 1/2 -> 2 * (1 + 10 + 45) / 1024 */
    NEAR(mkb_binom_test(2, 10, 0.5), 112.0 / 1024, 1e-12);
    NEAR(mkb_binom_test(5, 10, 0.5), 1.0, 1e-12);
    cr_expect(isnan(mkb_binom_test(0, 0, 0.5)));
    NEAR(mkb_binom_pmf(3, 5, 0.5), 10.0 / 32, 1e-14);
}

/* Zar JH (2010), Biostatistical Analysis, 5th ed., Example 24.8 (also the worked example of the
 * sign test on Wikipedia): hind-leg minus fore-leg lengths of 10 deer, 8 positive and 2 negative
 * differences, two-sided p = 0.109. */
Test(stats, sign_test_zar_deer) {
    double hind[] = {142, 140, 144, 144, 142, 146, 149, 150, 142, 148};
    double fore[] = {138, 136, 147, 139, 143, 141, 143, 145, 136, 146};
    double d[10];
    for (int i = 0; i < 10; i++) d[i] = hind[i] - fore[i];
    struct mkb_sign_test t = mkb_sign_test(d, 10);
    cr_expect_eq(t.n_pos, 8);
    cr_expect_eq(t.n_neg, 2);
    cr_expect_eq(t.n_zero, 0);
    NEAR(t.p, 0.109375, 1e-12);
    double zeros[3] = {0, 0, 0};
    struct mkb_sign_test z = mkb_sign_test(zeros, 3);
    cr_expect_eq(z.n_zero, 3);
    cr_expect(isnan(z.p), "no untied pair: p must be undefined, got %g", z.p);
}

/* Hollander M & Wolfe DA (1973), Nonparametric Statistical Methods, p. 29f (the example of R's
 * wilcox.test): Hamilton depression scale at the first (x) and second (y) visit, 9 patients;
 * V = W+ = 40 and the one-sided exact p = 0.01953 (= 10/512), so the two-sided p is 0.0390625. */
Test(stats, wilcoxon_exact_hollander_wolfe) {
    double x[] = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
    double y[] = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};
    double d[9];
    for (int i = 0; i < 9; i++) d[i] = x[i] - y[i];
    struct mkb_wilcoxon w;
    cr_assert_eq(mkb_wilcoxon(d, 9, MKB_WILCOXON_AUTO, &w), MKB_OK);
    cr_expect_eq(w.method, MKB_WILCOXON_EXACT);
    cr_expect_eq(w.n, 9);
    NEAR(w.w_plus, 40, 1e-12);
    NEAR(w.w_minus, 5, 1e-12);
    NEAR(w.p, 20.0 / 512, 1e-12);
}

/* The signed-rank example of the Wikipedia article "Wilcoxon signed-rank test" (10 pairs, one
 * zero difference, two tied |d| = 5): dropping the zero leaves n = 9, midranks 1.5 for the tie,
 * W+ = 27, W- = 18 (the article's W = 9). Normal approximation by hand: mean 9*10/4 = 22.5,
 * variance 9*10*19/24 - (2^3 - 2)/48 = 71.125, z = (27 - 22.5 - 0.5)/sqrt(71.125) = 0.474295,
 * p = 2(1 - Phi(z)) = 0.635289. The exact conditional p is checked against enumeration of all
 * 2^9 sign patterns on the same midranks. */
Test(stats, wilcoxon_ties_normal_and_exact) {
    double x1[] = {125, 115, 130, 140, 140, 115, 140, 125, 140, 135};
    double x2[] = {110, 122, 125, 120, 140, 124, 123, 137, 135, 145};
    double d[10];
    for (int i = 0; i < 10; i++) d[i] = x1[i] - x2[i];
    struct mkb_wilcoxon w;
    cr_assert_eq(mkb_wilcoxon(d, 10, MKB_WILCOXON_NORMAL, &w), MKB_OK);
    cr_expect_eq(w.method, MKB_WILCOXON_NORMAL);
    cr_expect_eq(w.n, 9);
    cr_expect_eq(w.n_zero, 1);
    NEAR(w.w_plus, 27, 1e-12);
    NEAR(w.w_minus, 18, 1e-12);
    NEAR(w.z, 0.4742953333830018, 1e-12);
    NEAR(w.p, 0.6352893188352069, 1e-12);

    cr_assert_eq(mkb_wilcoxon(d, 10, MKB_WILCOXON_EXACT, &w), MKB_OK);
    /* brute force: midranks of |d| sorted 5,5,7,9,10,12,15,17,20 */
    double ranks[9] = {1.5, 1.5, 3, 4, 5, 6, 7, 8, 9};
    int le = 0, ge = 0;
    for (int mask = 0; mask < 512; mask++) {
        double s = 0;
        for (int i = 0; i < 9; i++)
            if (mask >> i & 1) s += ranks[i];
        le += s <= 27 + 1e-9;
        ge += s >= 27 - 1e-9;
    }
    double want = 2.0 * (le < ge ? le : ge) / 512;
    NEAR(w.p, want > 1 ? 1 : want, 1e-12);
    cr_expect_eq(w.method, MKB_WILCOXON_EXACT);
}

Test(stats, wilcoxon_no_nonzero_difference_is_undefined) {
    double d[4] = {0, 0, 0, 0};
    struct mkb_wilcoxon w;
    cr_assert_eq(mkb_wilcoxon(d, 4, MKB_WILCOXON_AUTO, &w), MKB_OK);
    cr_expect_eq(w.n, 0);
    cr_expect_eq(w.n_zero, 4);
    cr_expect(isnan(w.p));
}

/* Fagerland MW, Lydersen S, Laake P (2013), "The McNemar test for binary matched-pairs data:
 * mid-p and asymptotic are better than exact conditional", BMC Medical Research Methodology
 * 13:91, worked example (airway hyper-responsiveness before/after stem cell transplantation,
 * Bentur et al. 2009): discordant pairs b = 1, c = 7; exact conditional p = 0.070, mid-p = 0.039,
 * asymptotic McNemar p = 0.034. By hand: 2 * 9/256 = 0.0703, 2 * 9/256 - 8/256 = 0.0391. */
Test(stats, mcnemar_fagerland_2013) {
    struct mkb_mcnemar m = mkb_mcnemar(1, 7);
    NEAR(m.p_exact, 18.0 / 256, 1e-12);
    NEAR(m.p_mid, 10.0 / 256, 1e-12);
    NEAR(m.chi2, 4.5, 1e-12);
    NEAR(m.p_asymptotic, 0.034, 0.0005);
    struct mkb_mcnemar sym = mkb_mcnemar(3, 3);
    NEAR(sym.p_exact, 1.0, 1e-12);
    NEAR(sym.p_mid, 1.0, 1e-12);
    struct mkb_mcnemar none = mkb_mcnemar(0, 0);
    cr_expect(isnan(none.p_exact) && isnan(none.p_mid));
}

/* Hyndman & Fan (1996) type 7, R's default: quantile(1:4, 0.25) = 1.75, quantile(1:4, 0.9) = 3.7. */
Test(stats, quantile_type_7) {
    double x[] = {1, 2, 3, 4};
    NEAR(mkb_quantile_sorted(x, 4, 0.25), 1.75, 1e-12);
    NEAR(mkb_quantile_sorted(x, 4, 0.9), 3.7, 1e-12);
    NEAR(mkb_quantile_sorted(x, 4, 0), 1, 0);
    NEAR(mkb_quantile_sorted(x, 4, 1), 4, 0);
}

/* ---- bootstrap ---- */

static void mean_stat(const double *totals, int m, double *stats, int n_stats, void *ctx) {
    (void)m;
    (void)n_stats;
    (void)ctx;
    stats[0] = totals[0] / totals[1];
}

Test(stats, bootstrap_degenerate_and_reproducible) {
    double same[10 * 2];
    for (int i = 0; i < 10; i++) {
        same[2 * i] = 3.0;
        same[2 * i + 1] = 1.0;
    }
    struct mkb_bootstrap b = {500, 1, 0.95};
    struct mkb_interval iv;
    cr_assert_eq(mkb_bootstrap_percentile(same, 10, 2, mean_stat, NULL, 1, &b, 0, &iv), MKB_OK);
    NEAR(iv.lo, 3.0, 1e-12);
    NEAR(iv.hi, 3.0, 1e-12);

    double v[20 * 2];
    for (int i = 0; i < 20; i++) {
        v[2 * i] = (double)i;
        v[2 * i + 1] = 1;
    }
    struct mkb_interval a1, a2, c1, k1;
    cr_assert_eq(mkb_bootstrap_percentile(v, 20, 2, mean_stat, NULL, 1, &b, 5, &a1), MKB_OK);
    cr_assert_eq(mkb_bootstrap_percentile(v, 20, 2, mean_stat, NULL, 1, &b, 5, &a2), MKB_OK);
    cr_expect(a1.lo == a2.lo && a1.hi == a2.hi, "same seed and key must give the same interval");
    struct mkb_bootstrap b2 = {500, 2, 0.95};
    cr_assert_eq(mkb_bootstrap_percentile(v, 20, 2, mean_stat, NULL, 1, &b2, 5, &c1), MKB_OK);
    cr_assert_eq(mkb_bootstrap_percentile(v, 20, 2, mean_stat, NULL, 1, &b, 6, &k1), MKB_OK);
    cr_expect(c1.lo != a1.lo || c1.hi != a1.hi, "another seed should move the interval");
    cr_expect(k1.lo != a1.lo || k1.hi != a1.hi, "another stream key should move the interval");
    cr_expect(a1.lo < 9.5 && a1.hi > 9.5, "[%g, %g] should hold the sample mean 9.5", a1.lo, a1.hi);

    struct mkb_bootstrap off = {0, 1, 0.95};
    cr_assert_eq(mkb_bootstrap_percentile(v, 20, 2, mean_stat, NULL, 1, &off, 5, &a1), MKB_OK);
    cr_expect(isnan(a1.lo) && isnan(a1.hi), "zero resamples must give no interval");
}

/* Coverage on simulated data with a known effect: 400 data sets of 40 clusters whose values are
 * N(0.3, 1); the 95% percentile interval of the mean should hold 0.3 in about 95% of them (the
 * percentile bootstrap runs a little narrow at n = 40; 400 sets give a standard error of 1.1
 * points, so 0.90..0.99 is a > 4-sigma band). */
Test(stats, bootstrap_coverage_of_a_known_mean) {
    struct mkb_rng r;
    mkb_rng_seed(&r, 2024);
    struct mkb_bootstrap b = {1000, 99, 0.95};
    int covered = 0, sets = 400;
    double v[40 * 2];
    for (int s = 0; s < sets; s++) {
        for (int i = 0; i < 40; i++) {
            v[2 * i] = 0.3 + mkb_rng_normal(&r);
            v[2 * i + 1] = 1;
        }
        struct mkb_interval iv;
        cr_assert_eq(mkb_bootstrap_percentile(v, 40, 2, mean_stat, NULL, 1, &b, (uint64_t)s, &iv), MKB_OK);
        covered += iv.lo <= 0.3 && 0.3 <= iv.hi;
    }
    double cov = (double)covered / sets;
    cr_expect(cov >= 0.90 && cov <= 0.99, "coverage %.3f outside 0.90..0.99", cov);
}
