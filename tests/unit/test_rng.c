/* Tests of src/tensor/philox.h: the raw Philox4x32-10 generator against the published
 * known-answer vectors, the documented stream layout recomputed here from the raw generator,
 * the accuracy of the polynomial ln and cos against long-double libm, the distributions'
 * statistics (moments, tails, Kolmogorov-Smirnov, chi-square), and pinned first values that
 * catch any change of the stream layout.
 * Seeds are fixed, so every statistic here is a deterministic number: the thresholds are
 * set at about the 0.1% level of the statistic's null distribution and cannot flake.
 * It does not test the generator ops that fill tensors (those belong to the backends). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tensor/philox.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- the raw generator ---- */

/* Random123 1.x, examples/kat_vectors, the three philox4x32 10-round lines:
 * counter c0..c3, key k0 k1, expected x0..x3. */
Test(rng, philox_known_answers) {
    const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
         0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    for (int k = 0; k < 3; k++) {
        const uint32_t *v = kat[k];
        struct mkb_philox_block b = mkb_philox4x32_10(v[0], v[1], v[2], v[3], v[4], v[5]);
        for (int j = 0; j < 4; j++)
            cr_assert_eq(b.x[j], v[6 + j], "vector %d word %d: %08x, expected %08x", k, j, b.x[j], v[6 + j]);
    }
}

/* The counter and key layout of docs/rng.md, rebuilt from the raw generator. */
Test(rng, stream_layout) {
    const uint64_t seeds[] = {0, 7, 0x100000000ull, 0xfedcba9876543210ull};
    const uint64_t idx[] = {0, 1, 12345, 0xffffffffull, 0x100000000ull, 0x123456789abcull};
    const uint32_t streams[] = {0, 1, 0xffffffffu};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 3; t++)
            for (int k = 0; k < 6; k++) {
                uint64_t seed = seeds[s], i = idx[k];
                uint32_t st = streams[t];
                struct mkb_philox_block b =
                    mkb_philox4x32_10((uint32_t)(i & 0xffffffffu), (uint32_t)(i >> 32), st, 0x6d6b6221u,
                                      (uint32_t)(seed & 0xffffffffu), (uint32_t)(seed >> 32));
                struct mkb_philox_block e = mkb_philox_element(seed, st, i);
                for (int j = 0; j < 4; j++) cr_assert_eq(e.x[j], b.x[j]);

                /* key: the first two words */
                cr_assert_eq(mkb_draw_key(seed, st, i), (uint64_t)b.x[0] << 32 | b.x[1]);
                /* uniform53: the top 32 bits from x0 and 21 more from the top of x1 */
                double u = b.x[0] * 0x1p-32 + (b.x[1] >> 11) * 0x1p-53;
                cr_assert_eq(mkb_draw_uniform(seed, st, i, 0.0, 1.0), u);
                cr_assert_eq(mkb_draw_uniform(seed, st, i, -3.0, 5.0), -3.0 + 8.0 * u);
                /* integer: the last two words modulo the range size */
                uint64_t r = (uint64_t)b.x[2] << 32 | b.x[3];
                cr_assert_eq(mkb_draw_int(seed, st, i, 10, 19), 10 + (int64_t)(r % 10));
                cr_assert_eq(mkb_draw_int(seed, st, i, -1000000, 1000000), -1000000 + (int64_t)(r % 2000001));
                /* normal: Box-Muller with libm's ln and cos, to a few ulps */
                double v = b.x[2] * 0x1p-32 + (b.x[3] >> 11) * 0x1p-53;
                double z = sqrt(-2.0 * log1p(-u)) * cos(2.0 * M_PI * v);
                cr_assert(fabs(mkb_draw_normal(seed, st, i) - z) < 1e-14 * (1 + fabs(z)), "%a vs %a",
                          mkb_draw_normal(seed, st, i), z);
            }
}

/* The first draws of seed 7, stream 0. These were produced by this implementation (printed
 * once as hex floats) and are pinned here to catch any change of the stream layout or of the
 * ln/cos polynomials: every input of every problem depends on them. docs/rng.md lists them. */
Test(rng, pinned_first_values) {
    const double normal[4] = {-0x1.34b197d7ec4b9p+1, 0x1.2cab71d2a6374p-2, -0x1.dcbd2b8d2a2bfp-3,
                              0x1.b74d268d0e585p+0};
    const double uniform[4] = {0x1.e8a1ed615e134p-1, 0x1.574a9c20da7ccp-2, 0x1.1b9a98b18deb7p-1,
                               0x1.8e6568e04a2c1p-1};
    const int64_t ints[4] = {7, 0, 0, 5};
    const uint64_t keys[4] = {0xf450f6b0af09a550ull, 0x55d2a708369f3016ull, 0x8dcd4c58c6f5ba5bull,
                              0xc732b47025160dfbull};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(mkb_draw_normal(7, 0, (uint64_t)i), normal[i], "normal %d: %a", i, mkb_draw_normal(7, 0, (uint64_t)i));
        cr_assert_eq(mkb_draw_uniform(7, 0, (uint64_t)i, 0.0, 1.0), uniform[i], "uniform %d", i);
        cr_assert_eq(mkb_draw_int(7, 0, (uint64_t)i, 0, 9), ints[i], "int %d", i);
        cr_assert_eq(mkb_draw_key(7, 0, (uint64_t)i), keys[i], "key %d", i);
    }
}

/* ---- the polynomial ln and cos ---- */

static uint64_t lcg_state = 0x853c49e6748fea9bull;
static uint64_t lcg_next(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return lcg_state;
}

Test(rng, log_accuracy) {
    cr_assert_eq(mkb_rng_log(1.0), 0.0);
    cr_assert_eq(mkb_rng_log(0.5), -0x1.62e42fefa39efp-1);
    double worst = 0, at = 1;
    for (int t = 0; t < 3000000; t++) {
        uint64_t r = lcg_next();
        double x;
        switch (t % 4) {
        case 0: x = (double)((r >> 11) | 1) * 0x1p-53; break;          /* uniform in (0, 1) */
        case 1: x = 1.0 - (double)((r >> 40) + 1) * 0x1p-53; break;     /* just below 1 */
        case 2: x = ldexp((double)((r >> 11) | 1) * 0x1p-53, -(int)(r % 1000)); break; /* tiny */
        default: x = ldexp((double)((r >> 11) | 1), -1074 + (int)(r % 52)); break;      /* subnormal */
        }
        if (!(x > 0 && x <= 1)) continue;
        long double ref = logl((long double)x);
        double rel = (double)fabsl(((long double)mkb_rng_log(x) - ref) / ref);
        if (rel > worst) {
            worst = rel;
            at = x;
        }
    }
    cr_assert_lt(worst, 1e-15, "max relative error %g at %a", worst, at);
    /* the draws' extreme argument, 1 - u with u = 1 - 2^-53 */
    cr_assert(fabs(mkb_rng_log(0x1p-53) / log(0x1p-53) - 1) < 1e-15);
    cr_assert(fabs(mkb_rng_log(0x1p-1074) / -744.44007192138126 - 1) < 1e-15);
}

Test(rng, cos2pi_accuracy) {
    const long double PI = 3.141592653589793238462643383279502884L;
    cr_assert_eq(mkb_rng_cos2pi(0.0), 1.0);
    cr_assert_eq(mkb_rng_cos2pi(0.5), -1.0);
    cr_assert(fabs(mkb_rng_cos2pi(0.25)) < 1e-16);
    cr_assert(fabs(mkb_rng_cos2pi(0.75)) < 1e-16);
    double worst = 0, at = 0;
    for (int t = 0; t < 3000000; t++) {
        uint64_t r = lcg_next();
        double v = (t % 3 == 0) ? (double)(r >> 11) * 0x1p-53
                                : (double)(r % 8) / 8 + ((t % 3 == 1) ? 1 : -1) * (double)((r >> 20) % 1024) * 0x1p-53;
        if (!(v >= 0 && v < 1)) continue;
        double err = (double)fabsl((long double)mkb_rng_cos2pi(v) - cosl(2 * PI * (long double)v));
        if (err > worst) {
            worst = err;
            at = v;
        }
    }
    cr_assert_lt(worst, 1e-15, "max absolute error %g at %a", worst, at);
    /* and against double libm, whose own argument rounding costs up to ~7e-16 */
    for (int t = 0; t < 100000; t++) {
        double v = (double)(lcg_next() >> 11) * 0x1p-53;
        cr_assert(fabs(mkb_rng_cos2pi(v) - cos(2 * M_PI * v)) < 2e-15, "%a", v);
    }
}

/* ---- distributions ---- */

/* The standard normal CDF. */
static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* sqrt(n) times the Kolmogorov-Smirnov distance of sorted x[0..n) from cdf. Its null
 * distribution is Kolmogorov's: P(K > 1.95) ~ 0.001. */
static double ks_statistic(double *x, int64_t n, double (*cdf)(double)) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double f = cdf(x[i]);
        double a = f - (double)i / (double)n, b = (double)(i + 1) / (double)n - f;
        if (a > d) d = a;
        if (b > d) d = b;
    }
    return d * sqrt((double)n);
}

Test(rng, normal_statistics) {
    enum { N = 1000000 };
    double *z = malloc(N * sizeof *z);
    cr_assert_not_null(z);
    double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    int64_t tail = 0;
    for (int64_t i = 0; i < N; i++) {
        double x = mkb_draw_normal(2024, 5, (uint64_t)i);
        cr_assert(isfinite(x));
        z[i] = x;
        s1 += x;
        s2 += x * x;
        s3 += x * x * x;
        s4 += x * x * x * x;
        tail += fabs(x) > 3.0;
    }
    double mean = s1 / N, var = s2 / N - mean * mean, skew = s3 / N, kurt = s4 / N;
    /* standard errors of the four sample moments: sqrt(1/n), sqrt(2/n), sqrt(15/n), sqrt(96/n)
     * (Var z^3 = E z^6 = 15, Var z^4 = E z^8 - 9 = 96); bounds at 4 of them */
    cr_assert(fabs(mean) < 4 * sqrt(1.0 / N), "mean %g", mean);
    cr_assert(fabs(var - 1) < 4 * sqrt(2.0 / N), "variance %g", var);
    cr_assert(fabs(skew) < 4 * sqrt(15.0 / N), "third moment %g", skew);
    cr_assert(fabs(kurt - 3) < 4 * sqrt(96.0 / N), "fourth moment %g", kurt);
    double p3 = erfc(3.0 / sqrt(2.0)); /* 0.0026998 */
    double frac = (double)tail / N;
    cr_assert(fabs(frac - p3) < 4 * sqrt(p3 * (1 - p3) / N), "beyond 3 sigma: %g, expected %g", frac, p3);
    double k = ks_statistic(z, N, phi);
    cr_assert_lt(k, 1.95, "Kolmogorov-Smirnov sqrt(n) D = %g", k);
    /* the largest |z| Box-Muller can give with 53-bit u is sqrt(2 * 53 ln 2) = 8.57 */
    cr_assert(z[0] > -8.58 && z[N - 1] < 8.58);
    free(z);
}

static double uniform_cdf_m2_3(double x) { return x < -2 ? 0 : x > 3 ? 1 : (x + 2) / 5; }

Test(rng, uniform_range_and_statistics) {
    enum { N = 1000000 };
    double *u = malloc(N * sizeof *u);
    cr_assert_not_null(u);
    double s1 = 0;
    for (int64_t i = 0; i < N; i++) {
        double x = mkb_draw_uniform(99, 2, (uint64_t)i, -2.0, 3.0);
        cr_assert(x >= -2.0 && x < 3.0, "%a out of [-2, 3)", x);
        u[i] = x;
        s1 += x;
    }
    double mean = s1 / N;
    cr_assert(fabs(mean - 0.5) < 4 * 5 / sqrt(12.0 * N), "mean %g", mean);
    double k = ks_statistic(u, N, uniform_cdf_m2_3);
    cr_assert_lt(k, 1.95, "Kolmogorov-Smirnov sqrt(n) D = %g", k);
    /* the range ends: [0, 1) of the 53-bit grid, 0 and 1 - 2^-53 included as possible values */
    cr_assert_eq(mkb_uniform53(0, 0), 0.0);
    cr_assert_eq(mkb_uniform53(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
    cr_assert_eq(mkb_uniform53(0, 0x800u), 0x1p-53);
    cr_assert_eq(mkb_uniform53(0, 0x7ffu), 0.0, "the low 11 bits of the second word are unused");
    free(u);
}

Test(rng, integer_range_and_chi_square) {
    enum { N = 1000000, LO = -3, HI = 6, K = HI - LO + 1 };
    int64_t count[K] = {0};
    for (int64_t i = 0; i < N; i++) {
        int64_t x = mkb_draw_int(31337, 4, (uint64_t)i, LO, HI);
        cr_assert(x >= LO && x <= HI, "%lld out of range", (long long)x);
        count[x - LO]++;
    }
    double chi2 = 0, e = (double)N / K;
    for (int k = 0; k < K; k++) {
        cr_assert_gt(count[k], 0);
        chi2 += (count[k] - e) * (count[k] - e) / e;
    }
    cr_assert_lt(chi2, 27.88, "chi-square %g with %d degrees of freedom (0.1%% point 27.88)", chi2, K - 1);
    /* a single value, and the full 64-bit range (r itself, offset by 2^63) */
    for (uint64_t i = 0; i < 100; i++) {
        cr_assert_eq(mkb_draw_int(5, 0, i, 42, 42), 42);
        cr_assert_eq(mkb_draw_int(5, 0, i, -7, -7), -7);
        struct mkb_philox_block b = mkb_philox_element(5, 0, i);
        uint64_t r = (uint64_t)b.x[2] << 32 | b.x[3];
        cr_assert_eq(mkb_draw_int(5, 0, i, INT64_MIN, INT64_MAX), (int64_t)(r ^ 0x8000000000000000ull));
        cr_assert_eq(mkb_draw_int(5, 0, i, INT64_MIN, 0), (int64_t)(0x8000000000000000ull + r % 0x8000000000000001ull));
    }
}

/* Different seeds (both halves of the 64-bit seed) and different streams give unrelated
 * values; the same arguments give the same value. */
Test(rng, streams_and_seeds_distinct) {
    const uint64_t seeds[] = {0, 1, 7, 0x100000000ull, 0x100000007ull};
    const uint32_t streams[] = {0, 1, 2, 0x80000000u};
    enum { NS = 5, NT = 4, M = 2000 };
    uint64_t *keys = malloc(NS * NT * M * sizeof *keys);
    cr_assert_not_null(keys);
    int64_t n = 0;
    for (int s = 0; s < NS; s++)
        for (int t = 0; t < NT; t++)
            for (uint64_t i = 0; i < M; i++) {
                keys[n++] = mkb_draw_key(seeds[s], streams[t], i);
                cr_assert_eq(mkb_draw_key(seeds[s], streams[t], i), keys[n - 1], "deterministic");
            }
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int64_t i = 1; i < n; i++) cr_assert_neq(keys[i], keys[i - 1], "a repeated key across seeds/streams");
    free(keys);
    /* normals of neighbouring streams are uncorrelated: |r| < 4 / sqrt(n) */
    double sxy = 0, sxx = 0, syy = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        double x = mkb_draw_normal(7, 0, i), y = mkb_draw_normal(7, 1, i);
        sxy += x * y;
        sxx += x * x;
        syy += y * y;
    }
    double r = sxy / sqrt(sxx * syy);
    cr_assert(fabs(r) < 4 / sqrt(100000.0), "correlation %g", r);
}

Test(rng, keys_distinct) {
    enum { N = 200000 };
    uint64_t *k = malloc(N * sizeof *k);
    cr_assert_not_null(k);
    for (uint64_t i = 0; i < N; i++) k[i] = mkb_draw_key(123, 9, i);
    qsort(k, N, sizeof *k, cmp_u64);
    for (int64_t i = 1; i < N; i++) cr_assert_neq(k[i], k[i - 1], "keys collide (chance ~1e-9)");
    /* and every bit of the key is used: each of the 64 bits is set in about half the keys */
    for (int b = 0; b < 64; b++) {
        int64_t ones = 0;
        for (int64_t i = 0; i < N; i++) ones += (k[i] >> b) & 1;
        cr_assert(fabs((double)ones / N - 0.5) < 4 * 0.5 / sqrt((double)N), "bit %d set in %lld keys", b,
                  (long long)ones);
    }
    free(k);
}
