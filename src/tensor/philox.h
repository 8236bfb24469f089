/* Philox4x32-10 and the element-wise distributions built on it: the ONE definition of every
 * random input value, shared verbatim by the CPU backend and (later) the CUDA backend, so both
 * produce bit-identical inputs. Header-only: static inline functions marked MKB_HD.
 *
 * Stream layout (docs/rng.md restates it with known answers):
 *   key     = (seed & 0xffffffff, seed >> 32)
 *   counter = (i & 0xffffffff, i >> 32, stream, 0x6d6b6221)  -- one Philox block per element i
 *             (i = the element's row-major index in the drawn tensor), "mkb!" tags word 3.
 *   The block's four 32-bit outputs x0..x3 feed one element:
 *   uniform53(x0,x1) = ((x0 << 21) ^ (x1 >> 11)) * 2^-53    in [0, 1), 53 random bits
 *   normal   = sqrt(-2 ln(1 - u)) * cos(2 pi v), u = uniform53(x0,x1), v = uniform53(x2,x3)
 *              (Box-Muller, cosine branch). ln and cos are mkb's own polynomial routines built
 *              from IEEE +, -, *, / and sqrt only, evaluated without FMA contraction, so every
 *              compiler and GPU gives the same bits. Accuracy: a few ulps of fp64.
 *   uniform on [lo, hi) = lo + (hi - lo) * uniform53(x0, x1)
 *   integer on {lo..hi} = lo + (((uint64)x2 << 32 | x3) mod (hi - lo + 1))  (bias < 2^-40
 *              for ranges below 2^24)
 *   permutation of n    = indices sorted by key ((uint64)x0 << 32 | x1), ties by index.
 * The drawn double is then rounded once to the requested dtype (dtype.h rules).
 * Nothing here allocates or has state. */
#ifndef MKB_TENSOR_PHILOX_H
#define MKB_TENSOR_PHILOX_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MKB_HD __host__ __device__ __forceinline__
#else
#define MKB_HD static inline
#endif

#define MKB_PHILOX_TAG 0x6d6b6221u

struct mkb_philox_block {
    uint32_t x[4];
};

/* The raw generator: 10 rounds of Philox4x32 (Salmon et al., SC'11). */
MKB_HD struct mkb_philox_block mkb_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                 uint32_t k0, uint32_t k1) {
    const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)M0 * c0, p1 = (uint64_t)M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += W0;
        k1 += W1;
    }
    struct mkb_philox_block b = {{c0, c1, c2, c3}};
    return b;
}

/* The block that feeds element i of a draw. */
MKB_HD struct mkb_philox_block mkb_philox_element(uint64_t seed, uint32_t stream, uint64_t i) {
    return mkb_philox4x32_10((uint32_t)i, (uint32_t)(i >> 32), stream, MKB_PHILOX_TAG, (uint32_t)seed,
                             (uint32_t)(seed >> 32));
}

MKB_HD double mkb_uniform53(uint32_t a, uint32_t b) {
    uint64_t bits = ((uint64_t)a << 21) ^ ((uint64_t)b >> 11);
    return (double)(bits & ((1ull << 53) - 1)) * 0x1.0p-53;
}

/* Add and multiply that no compiler may fuse: the CPU build uses -ffp-contract=off; the CUDA
 * build will map these to __dadd_rn / __dmul_rn. */
#if defined(__CUDA_ARCH__)
#define MKB_DADD(a, b) __dadd_rn((a), (b))
#define MKB_DMUL(a, b) __dmul_rn((a), (b))
#else
#define MKB_DADD(a, b) ((a) + (b))
#define MKB_DMUL(a, b) ((a) * (b))
#endif

/* ln(x) for x in (0, 1]: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
 * s = (m - 1)/(m + 1), |s| < 0.1716, odd series to s^23 (truncation < 1e-19). A subnormal x
 * is first scaled by 2^54 (exact); the draws never produce one (1 - u >= 2^-53). */
MKB_HD double mkb_rng_log(double x) {
    int scaled = 0;
    if (x < 0x1p-1022) {
        x = MKB_DMUL(x, 0x1p54);
        scaled = 54;
    }
    uint64_t bits;
    __builtin_memcpy(&bits, &x, 8);
    int e = (int)((bits >> 52) & 0x7ff) - 1023 - scaled;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    double m;
    __builtin_memcpy(&m, &bits, 8);
    if (m > 1.4142135623730951) {
        m = MKB_DMUL(m, 0.5);
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = MKB_DMUL(s, s);
    double p = 1.0 / 23.0;
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 21.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 19.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 17.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 15.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 13.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 11.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 9.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 7.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 5.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0 / 3.0);
    p = MKB_DADD(MKB_DMUL(p, s2), 1.0);
    double lnm = MKB_DMUL(MKB_DMUL(2.0, s), p);
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    return MKB_DADD(MKB_DADD(MKB_DMUL((double)e, ln2_hi), lnm), MKB_DMUL((double)e, ln2_lo));
}

/* cos(2 pi v) for v in [0, 1): reduce by octant to t in [0, 1/8] turns, then a Taylor
 * polynomial of sin or cos of y = 2 pi t (|y| <= pi/4, terms to y^18, error < 1e-17). */
MKB_HD double mkb_rng_cos2pi(double v) {
    double q = MKB_DMUL(v, 8.0); /* exact */
    int oct = (int)q;            /* 0..7 */
    double f = q - (double)oct;  /* exact, in [0, 1) */
    /* cos(2 pi v) = cos(pi/4 * (oct + f)); fold to an angle a = pi/4 * g, g in [0, 1]. */
    int use_sin, neg;
    double g;
    switch (oct) {
    case 0: g = f; use_sin = 0; neg = 0; break;
    case 1: g = 1.0 - f; use_sin = 1; neg = 0; break;
    case 2: g = f; use_sin = 1; neg = 1; break;
    case 3: g = 1.0 - f; use_sin = 0; neg = 1; break;
    case 4: g = f; use_sin = 0; neg = 1; break;
    case 5: g = 1.0 - f; use_sin = 1; neg = 1; break;
    case 6: g = f; use_sin = 1; neg = 0; break;
    default: g = 1.0 - f; use_sin = 0; neg = 0; break;
    }
    double y = MKB_DMUL(g, 0.78539816339744830962), y2 = MKB_DMUL(y, y), r;
    if (use_sin) {
        double p = -1.0 / 121645100408832000.0; /* -1/19! */
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 355687428096000.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 1307674368000.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 6227020800.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 39916800.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 362880.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 5040.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 120.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 6.0);
        r = MKB_DADD(y, MKB_DMUL(MKB_DMUL(y, y2), p));
    } else {
        double p = 1.0 / 6402373705728000.0; /* 1/18! */
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 20922789888000.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 87178291200.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 479001600.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 3628800.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 40320.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 1.0 / 720.0);
        p = MKB_DADD(MKB_DMUL(p, y2), -1.0 / 24.0);
        p = MKB_DADD(MKB_DMUL(p, y2), 0.5);
        r = MKB_DADD(1.0, -MKB_DMUL(y2, p));
    }
    return neg ? -r : r;
}

MKB_HD double mkb_draw_normal(uint64_t seed, uint32_t stream, uint64_t i) {
    struct mkb_philox_block b = mkb_philox_element(seed, stream, i);
    double u = mkb_uniform53(b.x[0], b.x[1]), v = mkb_uniform53(b.x[2], b.x[3]);
    double r = sqrt(MKB_DMUL(-2.0, mkb_rng_log(1.0 - u))); /* 1 - u in (0, 1] */
    return MKB_DMUL(r, mkb_rng_cos2pi(v));
}

MKB_HD double mkb_draw_uniform(uint64_t seed, uint32_t stream, uint64_t i, double lo, double hi) {
    struct mkb_philox_block b = mkb_philox_element(seed, stream, i);
    return MKB_DADD(lo, MKB_DMUL(hi - lo, mkb_uniform53(b.x[0], b.x[1])));
}

MKB_HD int64_t mkb_draw_int(uint64_t seed, uint32_t stream, uint64_t i, int64_t lo, int64_t hi) {
    struct mkb_philox_block b = mkb_philox_element(seed, stream, i);
    uint64_t r = ((uint64_t)b.x[2] << 32) | b.x[3];
    /* unsigned arithmetic: hi - lo may exceed INT64_MAX; n == 0 is the full 2^64 range */
    uint64_t n = (uint64_t)hi - (uint64_t)lo + 1;
    return (int64_t)((uint64_t)lo + (n == 0 ? r : r % n));
}

MKB_HD uint64_t mkb_draw_key(uint64_t seed, uint32_t stream, uint64_t i) {
    struct mkb_philox_block b = mkb_philox_element(seed, stream, i);
    return ((uint64_t)b.x[0] << 32) | b.x[1];
}

#endif
