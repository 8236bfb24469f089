/* Tests of src/tensor/dtype.c: every conversion rule of dtype.h checked against values computed
 * here independently (a frexp/nearbyint reference for every float format, an integer
 * bias-trick reference for bf16, the compiler's own _Float16 conversion for fp16, literal
 * tables for fp4), exhaustively over every bit pattern of the 16-, 8- and 4-bit formats and
 * over every rounding boundary between adjacent values.
 * It does not test tensors or ops built on these conversions. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"

/* ---- helpers ---- */

static uint64_t bits_of(double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static double double_of(uint64_t b) {
    double v;
    memcpy(&v, &b, 8);
    return v;
}

static uint64_t splitmix_state = 0x1234567887654321ull;
static uint64_t next_u64(void) {
    uint64_t z = (splitmix_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A random double with a random sign, 52 random fraction bits and an exponent uniform in
 * [elo, ehi] (normal doubles only). */
static double random_double(int elo, int ehi) {
    uint64_t r = next_u64();
    int e = elo + (int)(next_u64() % (uint64_t)(ehi - elo + 1));
    uint64_t b = (r & 0x000fffffffffffffull) | ((uint64_t)(e + 1023) << 52) | (r & 0x8000000000000000ull);
    return double_of(b);
}

/* The description of a float format for the reference rounding. */
struct ref_fmt {
    enum mkb_dtype dt;
    int man;        /* fraction bits */
    int emin, emax; /* exponents of the smallest and largest normal binades */
    double max;     /* largest finite value */
    int saturate;   /* 1: overflow and Inf go to ±max; 0: overflow goes to ±Inf */
    int patterns;   /* number of bit patterns (0: not enumerable here) */
};

static const struct ref_fmt FMTS[] = {
    {MKB_DTYPE_F32, 23, -126, 127, FLT_MAX, 0, 0},
    {MKB_DTYPE_BF16, 7, -126, 127, 0x1.fep127, 0, 65536},
    {MKB_DTYPE_F16, 10, -14, 15, 65504.0, 0, 65536},
    {MKB_DTYPE_F8E4M3, 3, -6, 8, 448.0, 1, 256},
    {MKB_DTYPE_F8E5M2, 2, -14, 15, 57344.0, 1, 256},
    {MKB_DTYPE_F4E2M1, 1, 0, 2, 6.0, 1, 16},
};
#define NFMTS ((int)(sizeof FMTS / sizeof FMTS[0]))

/* Reference rounding by floating-point arithmetic: the quantum of v's binade (or of the
 * subnormal range) is a power of two, so v / quantum is exact and nearbyint() rounds it to
 * nearest even under the default rounding mode. */
static double ref_round(const struct ref_fmt *f, double v) {
    if (isnan(v)) return f->dt == MKB_DTYPE_F4E2M1 ? 6.0 : NAN;
    if (isinf(v)) return f->saturate ? copysign(f->max, v) : v;
    if (v == 0) return v;
    int e;
    frexp(v, &e);
    e -= 1; /* |v| in [2^e, 2^(e+1)) */
    if (e < f->emin) e = f->emin;
    double q = ldexp(1.0, e - f->man);
    double r = nearbyint(v / q) * q;
    if (fabs(r) > f->max) r = f->saturate ? copysign(f->max, v) : copysign(INFINITY, v);
    return r;
}

/* The value of a bit pattern, decoded here from the field definitions with ldexp. */
static double ref_decode(const struct ref_fmt *f, uint32_t pat) {
    int total = f->dt == MKB_DTYPE_F4E2M1 ? 4 : f->dt == MKB_DTYPE_F8E4M3 || f->dt == MKB_DTYPE_F8E5M2 ? 8 : 16;
    int ebits = total - 1 - f->man;
    int bias = 1 - f->emin;
    uint32_t s = pat >> (total - 1), ef = (pat >> f->man) & ((1u << ebits) - 1), m = pat & ((1u << f->man) - 1);
    double sign = s ? -1.0 : 1.0;
    if (f->dt == MKB_DTYPE_F8E4M3 && ef == 15 && m == 7) return NAN;
    if ((f->dt == MKB_DTYPE_F16 || f->dt == MKB_DTYPE_BF16 || f->dt == MKB_DTYPE_F8E5M2) &&
        ef == (1u << ebits) - 1)
        return m ? NAN : sign * INFINITY;
    if (ef == 0) return sign * ldexp((double)m, f->emin - f->man);
    return sign * ldexp(1.0 + ldexp((double)m, -f->man), (int)ef - bias);
}

static uint32_t encode(enum mkb_dtype dt, double v) {
    switch (dt) {
    case MKB_DTYPE_BF16: return mkb_f64_to_bf16(v);
    case MKB_DTYPE_F16: return mkb_f64_to_f16(v);
    case MKB_DTYPE_F8E4M3: return mkb_f64_to_f8e4m3(v);
    case MKB_DTYPE_F8E5M2: return mkb_f64_to_f8e5m2(v);
    case MKB_DTYPE_F4E2M1: return mkb_f64_to_f4e2m1(v);
    default: cr_assert_fail("no bit encoder for %s", mkb_dtype_name(dt));
    }
    return 0;
}

static double decode(enum mkb_dtype dt, uint32_t pat) {
    switch (dt) {
    case MKB_DTYPE_BF16: return mkb_bf16_to_f64((uint16_t)pat);
    case MKB_DTYPE_F16: return mkb_f16_to_f64((uint16_t)pat);
    case MKB_DTYPE_F8E4M3: return mkb_f8e4m3_to_f64((uint8_t)pat);
    case MKB_DTYPE_F8E5M2: return mkb_f8e5m2_to_f64((uint8_t)pat);
    case MKB_DTYPE_F4E2M1: return mkb_f4e2m1_to_f64((uint8_t)pat);
    default: cr_assert_fail("no bit decoder for %s", mkb_dtype_name(dt));
    }
    return 0;
}

/* Same value, with -0 distinguished from +0 and NaN equal to NaN. */
static int same(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* ---- names, sizes, limits ---- */

Test(dtype, names_sizes_kinds) {
    for (int i = 0; i < MKB_DTYPE_COUNT; i++) {
        enum mkb_dtype dt;
        cr_assert(mkb_dtype_from_name(mkb_dtype_name((enum mkb_dtype)i), &dt), "%d", i);
        cr_assert_eq(dt, (enum mkb_dtype)i);
    }
    enum mkb_dtype dt = MKB_DTYPE_F64;
    cr_assert_not(mkb_dtype_from_name("float16", &dt));
    cr_assert_not(mkb_dtype_from_name("", &dt));
    cr_assert_not(mkb_dtype_from_name(NULL, &dt));
    cr_assert_eq(dt, MKB_DTYPE_F64, "a failed parse must not write");
    cr_assert(mkb_dtype_from_name("fp8e4m3", &dt));
    cr_assert_eq(dt, MKB_DTYPE_F8E4M3);

    cr_assert_eq(mkb_dtype_bits(MKB_DTYPE_BF16), 16);
    cr_assert_eq(mkb_dtype_bits(MKB_DTYPE_F4E2M1), 4);
    cr_assert_eq(mkb_dtype_bits(MKB_DTYPE_BOOL), 8);
    cr_assert_str_eq(mkb_dtype_numpy(MKB_DTYPE_F16), "<f2");
    cr_assert_str_eq(mkb_dtype_numpy(MKB_DTYPE_BF16), "<u2");
    cr_assert_str_eq(mkb_dtype_numpy(MKB_DTYPE_I64), "<i8");
    cr_assert_str_eq(mkb_dtype_numpy(MKB_DTYPE_BOOL), "|b1");

    int nfloat = 0, nint = 0;
    for (int i = 0; i < MKB_DTYPE_COUNT; i++) {
        cr_assert_neq(mkb_dtype_is_float((enum mkb_dtype)i), mkb_dtype_is_int((enum mkb_dtype)i));
        nfloat += mkb_dtype_is_float((enum mkb_dtype)i);
        nint += mkb_dtype_is_int((enum mkb_dtype)i);
    }
    cr_assert_eq(nfloat, 7);
    cr_assert_eq(nint, 6);
    cr_assert(mkb_dtype_is_int(MKB_DTYPE_BOOL));

    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_F4E2M1, 0), 0);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_F4E2M1, 1), 1);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_F4E2M1, 2), 1);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_F4E2M1, 7), 4);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_BF16, 3), 6);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_F64, 5), 40);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_BOOL, 5), 5);
    cr_assert_eq(mkb_dtype_nbytes(MKB_DTYPE_I32, (int64_t)1 << 33), (int64_t)1 << 35);
}

Test(dtype, max_is_largest_finite) {
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F64), DBL_MAX);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F32), (double)FLT_MAX);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F16), ldexp(2.0 - ldexp(1, -10), 15));
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_BF16), ldexp(2.0 - ldexp(1, -7), 127));
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F8E4M3), 1.75 * 256);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F8E5M2), 1.75 * 32768);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_F4E2M1), 6.0);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_I32), 2147483647.0);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_I8), 127.0);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_U8), 255.0);
    cr_assert_eq(mkb_dtype_max(MKB_DTYPE_BOOL), 1.0);
    /* each float max is the largest finite decoded pattern, and survives rounding */
    for (int k = 1; k < NFMTS; k++) {
        const struct ref_fmt *f = &FMTS[k];
        double best = 0;
        for (int p = 0; p < f->patterns; p++) {
            double x = decode(f->dt, (uint32_t)p);
            if (isfinite(x) && x > best) best = x;
        }
        cr_assert_eq(best, mkb_dtype_max(f->dt), "%s", mkb_dtype_name(f->dt));
        cr_assert_eq(mkb_dtype_round(f->dt, best), best);
        cr_assert_eq(mkb_dtype_round(f->dt, -best), -best);
    }
}

/* eps is the gap above 1: 1 + eps is representable, 1 + eps/2 is a tie that goes to 1 (even),
 * 1 + 3/4 eps goes to 1 + eps. */
Test(dtype, eps_is_the_gap_above_one) {
    const enum mkb_dtype fl[] = {MKB_DTYPE_F64, MKB_DTYPE_F32, MKB_DTYPE_F16, MKB_DTYPE_BF16,
                                 MKB_DTYPE_F8E4M3, MKB_DTYPE_F8E5M2, MKB_DTYPE_F4E2M1};
    const int man[] = {52, 23, 10, 7, 3, 2, 1};
    for (int k = 0; k < 7; k++) {
        double eps = mkb_dtype_eps(fl[k]);
        cr_assert_eq(eps, ldexp(1.0, -man[k]), "%s", mkb_dtype_name(fl[k]));
        cr_assert_eq(mkb_dtype_round(fl[k], 1.0 + eps), 1.0 + eps);
        if (fl[k] != MKB_DTYPE_F64) {
            cr_assert_eq(mkb_dtype_round(fl[k], 1.0 + eps / 2), 1.0, "%s", mkb_dtype_name(fl[k]));
            cr_assert_eq(mkb_dtype_round(fl[k], 1.0 + 0.75 * eps), 1.0 + eps);
        }
    }
    const enum mkb_dtype in[] = {MKB_DTYPE_I64, MKB_DTYPE_I32, MKB_DTYPE_I16, MKB_DTYPE_I8, MKB_DTYPE_U8,
                                 MKB_DTYPE_BOOL};
    for (int k = 0; k < 6; k++) cr_assert_eq(mkb_dtype_eps(in[k]), 0.0);
}

/* ---- special values ---- */

Test(dtype, nan_inf_zero) {
    /* NaN: stays NaN, except fp4 (no NaN) which gives +6 */
    cr_assert(isnan(mkb_bf16_to_f64(mkb_f64_to_bf16(NAN))));
    cr_assert(isnan(mkb_bf16_to_f64(mkb_f64_to_bf16(-NAN))));
    cr_assert(isnan(mkb_f16_to_f64(mkb_f64_to_f16(NAN))));
    cr_assert_eq(mkb_f64_to_f8e4m3(NAN) & 0x7f, 0x7f, "e4m3fn NaN is S.1111.111");
    cr_assert(isnan(mkb_f8e4m3_to_f64(mkb_f64_to_f8e4m3(NAN))));
    cr_assert(isnan(mkb_f8e5m2_to_f64(mkb_f64_to_f8e5m2(NAN))));
    uint8_t e5 = mkb_f64_to_f8e5m2(NAN);
    cr_assert((e5 & 0x7c) == 0x7c && (e5 & 3) != 0, "e5m2 NaN has exponent 11111, fraction != 0");
    cr_assert_eq(mkb_f4e2m1_to_f64(mkb_f64_to_f4e2m1(NAN)), 6.0);
    cr_assert_eq(mkb_f4e2m1_to_f64(mkb_f64_to_f4e2m1(-NAN)), 6.0);
    cr_assert(isnan(mkb_dtype_round(MKB_DTYPE_F32, NAN)));
    cr_assert(isnan(mkb_dtype_round(MKB_DTYPE_F64, NAN)));

    /* Inf: kept by the IEEE formats, saturated by fp8/fp4 */
    cr_assert_eq(mkb_f64_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(mkb_f64_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(mkb_f64_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(mkb_f64_to_f16(-INFINITY), 0xfc00);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F32, -INFINITY), -INFINITY);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, INFINITY), 448.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, -INFINITY), -448.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, INFINITY), 57344.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, -INFINITY), -57344.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, INFINITY), 6.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, -INFINITY), -6.0);
    /* e5m2's Inf patterns still decode to Inf */
    cr_assert_eq(mkb_f8e5m2_to_f64(0x7c), INFINITY);
    cr_assert_eq(mkb_f8e5m2_to_f64(0xfc), -INFINITY);

    /* ±0 keep their sign in every float format */
    cr_assert_eq(mkb_f64_to_bf16(-0.0), 0x8000);
    cr_assert_eq(mkb_f64_to_f16(-0.0), 0x8000);
    cr_assert_eq(mkb_f64_to_f8e4m3(-0.0), 0x80);
    cr_assert_eq(mkb_f64_to_f8e5m2(-0.0), 0x80);
    cr_assert_eq(mkb_f64_to_f4e2m1(-0.0), 0x8);
    cr_assert_eq(mkb_f64_to_bf16(0.0), 0);
    cr_assert_eq(mkb_f64_to_f4e2m1(0.0), 0);
    for (int k = 0; k < NFMTS; k++) {
        cr_assert(same(mkb_dtype_round(FMTS[k].dt, -0.0), -0.0), "%s", mkb_dtype_name(FMTS[k].dt));
        cr_assert(same(mkb_dtype_round(FMTS[k].dt, 0.0), 0.0));
    }
}

/* The largest value that still rounds down to max, and the smallest that overflows. The
 * boundary is the midpoint between max and the next value the format would have (2^(emax+1),
 * or for e4m3fn 480, whose pattern is NaN); the midpoint itself is a tie that goes to the
 * even neighbour, which is the overflow side in every format here. */
Test(dtype, overflow_boundary) {
    struct {
        enum mkb_dtype dt;
        double max, next;
        double over; /* what an overflow gives */
    } c[] = {
        {MKB_DTYPE_F16, 65504.0, 65536.0, INFINITY},
        {MKB_DTYPE_BF16, 0x1.fep127, 0x1p128, INFINITY},
        {MKB_DTYPE_F32, FLT_MAX, 0x1p128, INFINITY},
        {MKB_DTYPE_F8E4M3, 448.0, 480.0, 448.0},
        {MKB_DTYPE_F8E5M2, 57344.0, 65536.0, 57344.0},
        {MKB_DTYPE_F4E2M1, 6.0, 8.0, 6.0},
    };
    for (int k = 0; k < 6; k++) {
        double mid = (c[k].max + c[k].next) / 2;
        const char *n = mkb_dtype_name(c[k].dt);
        cr_assert_eq(mkb_dtype_round(c[k].dt, nextafter(mid, 0)), c[k].max, "%s below", n);
        cr_assert_eq(mkb_dtype_round(c[k].dt, -nextafter(mid, 0)), -c[k].max, "%s -below", n);
        cr_assert_eq(mkb_dtype_round(c[k].dt, mid), c[k].over, "%s tie", n);
        cr_assert_eq(mkb_dtype_round(c[k].dt, -mid), -c[k].over, "%s -tie", n);
        cr_assert_eq(mkb_dtype_round(c[k].dt, 1e300), c[k].over, "%s huge", n);
        cr_assert_eq(mkb_dtype_round(c[k].dt, -DBL_MAX), -c[k].over, "%s -huge", n);
    }
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, 65519.0), 65504.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, 65520.0), INFINITY);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, 464.0), 448.0); /* tie to even 448 */
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, 1e6), 448.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, 61439.0), 57344.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, 1e9), 57344.0);
    cr_assert_eq(mkb_f64_to_f8e5m2(1e9), 0x7b, "saturates to the finite max, not Inf");
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 5.0), 4.0); /* tie between 4 (even) and 6 */
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, nextafter(5.0, 6)), 6.0);
}

Test(dtype, subnormals) {
    struct {
        enum mkb_dtype dt;
        double min_sub, min_normal;
    } c[] = {
        {MKB_DTYPE_F16, 0x1p-24, 0x1p-14},   {MKB_DTYPE_BF16, 0x1p-133, 0x1p-126},
        {MKB_DTYPE_F32, 0x1p-149, 0x1p-126}, {MKB_DTYPE_F8E4M3, 0x1p-9, 0x1p-6},
        {MKB_DTYPE_F8E5M2, 0x1p-16, 0x1p-14}, {MKB_DTYPE_F4E2M1, 0.5, 1.0},
    };
    for (int k = 0; k < 6; k++) {
        enum mkb_dtype dt = c[k].dt;
        double s = c[k].min_sub;
        const char *n = mkb_dtype_name(dt);
        cr_assert_eq(mkb_dtype_round(dt, s), s, "%s smallest subnormal", n);
        cr_assert_eq(mkb_dtype_round(dt, -s), -s, "%s", n);
        cr_assert(same(mkb_dtype_round(dt, s / 2), 0.0), "%s half of it is a tie to 0", n);
        cr_assert(same(mkb_dtype_round(dt, -s / 2), -0.0), "%s -half keeps the sign", n);
        cr_assert_eq(mkb_dtype_round(dt, nextafter(s / 2, INFINITY)), s, "%s just above half", n);
        cr_assert(same(mkb_dtype_round(dt, s / 3), 0.0), "%s", n);
        cr_assert(same(mkb_dtype_round(dt, 1e-300), 0.0), "%s", n);
        cr_assert(same(mkb_dtype_round(dt, -4.9e-324), -0.0), "%s double subnormal", n);
        cr_assert_eq(mkb_dtype_round(dt, 1.5 * s), 2 * s, "%s tie 1.5 -> 2 (even)", n);
        cr_assert_eq(mkb_dtype_round(dt, 2.5 * s), 2 * s, "%s tie 2.5 -> 2 (even)", n);
        cr_assert_eq(mkb_dtype_round(dt, nextafter(2.5 * s, 0)), 2 * s, "%s", n);
        cr_assert_eq(mkb_dtype_round(dt, nextafter(2.5 * s, INFINITY)), 3 * s, "%s", n);
        cr_assert_eq(mkb_dtype_round(dt, c[k].min_normal), c[k].min_normal, "%s", n);
        /* every multiple of the quantum below the normal range is exact */
        for (double x = s; x < c[k].min_normal; x += s) cr_assert_eq(mkb_dtype_round(dt, x), x, "%s %a", n, x);
        /* the largest subnormal plus half a quantum is a tie that rounds up into the normals */
        double top = c[k].min_normal - s;
        cr_assert_eq(mkb_dtype_round(dt, top + s / 2), c[k].min_normal, "%s", n);
    }
}

/* Ties to even in the normal range, and the double-rounding trap: a value just above a bf16
 * tie that is itself a tie in fp32 must still round up (converting through fp32 would not). */
Test(dtype, ties_to_even_and_no_double_rounding) {
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, 1.0 + 0x1p-11), 1.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, 1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, -(1.0 + 3 * 0x1p-11)), -(1.0 + 0x1p-9));
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_BF16, 1.0 + 0x1p-8), 1.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_BF16, 1.0 + 3 * 0x1p-8), 1.0 + 0x1p-6);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_BF16, 256.0 + 1.0), 256.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_BF16, 256.0 + 3.0), 260.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, 1.0 + 0x1p-4), 1.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, 1.0 + 3 * 0x1p-4), 1.25);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, 1.125), 1.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E5M2, 1.375), 1.5);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 1.25), 1.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 1.75), 2.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 2.5), 2.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 3.5), 4.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 0.25), 0.0);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F4E2M1, 0.75), 1.0);

    double trap = 1.0 + 0x1p-8 + 0x1p-30;
    cr_assert_eq((double)(float)trap, 1.0 + 0x1p-8, "the trap is a tie after fp32 rounding");
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_BF16, trap), 1.0 + 0x1p-7);
    double trap16 = 1.0 + 0x1p-11 + 0x1p-40;
    cr_assert_eq((double)(float)trap16, 1.0 + 0x1p-11);
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F16, trap16), 1.0 + 0x1p-10);
    double trap8 = 1.0 + 0x1p-4 + 0x1p-30;
    cr_assert_eq(mkb_dtype_round(MKB_DTYPE_F8E4M3, trap8), 1.125);
}

/* ---- exhaustive over bit patterns ---- */

Test(dtype, exhaustive_decode_and_identity) {
    for (int k = 1; k < NFMTS; k++) {
        const struct ref_fmt *f = &FMTS[k];
        const char *n = mkb_dtype_name(f->dt);
        int nan_count = 0;
        for (int p = 0; p < f->patterns; p++) {
            double x = decode(f->dt, (uint32_t)p), want = ref_decode(f, (uint32_t)p);
            cr_assert(same(x, want), "%s pattern %#x decodes to %a, expected %a", n, p, x, want);
            if (isnan(x)) {
                nan_count++;
                continue;
            }
            uint32_t back = encode(f->dt, x);
            if (isinf(x) && f->saturate) {
                cr_assert_eq(back, (uint32_t)p - 1, "%s Inf saturates to max", n); /* 0x7c -> 0x7b */
                cr_assert_eq(mkb_dtype_round(f->dt, x), copysign(f->max, x), "%s", n);
            } else {
                cr_assert_eq(back, (uint32_t)p, "%s pattern %#x -> %a -> %#x", n, p, x, back);
                cr_assert(same(mkb_dtype_round(f->dt, x), x), "%s", n);
            }
        }
        int want_nans = f->dt == MKB_DTYPE_BF16 ? 2 * 127
                        : f->dt == MKB_DTYPE_F16 ? 2 * 1023
                        : f->dt == MKB_DTYPE_F8E4M3 ? 2
                        : f->dt == MKB_DTYPE_F8E5M2 ? 6
                                                    : 0;
        cr_assert_eq(nan_count, want_nans, "%s NaN patterns", n);
    }
}

Test(dtype, fp4_table) {
    const double v[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    for (int p = 0; p < 16; p++) {
        cr_assert(same(mkb_f4e2m1_to_f64((uint8_t)p), v[p]), "nibble %d", p);
        cr_assert_eq(mkb_f64_to_f4e2m1(v[p]), p);
    }
    cr_assert_eq(mkb_f4e2m1_to_f64(0x13), 1.5, "only the low nibble is read");
}

/* Every rounding boundary: for each pair of adjacent finite values a < b of a format, the
 * midpoint goes to whichever has the even pattern, and the doubles on either side of the
 * midpoint go to a and to b. Negative values mirror. */
Test(dtype, exhaustive_midpoints) {
    for (int k = 1; k < NFMTS; k++) {
        const struct ref_fmt *f = &FMTS[k];
        const char *n = mkb_dtype_name(f->dt);
        int half = f->patterns / 2; /* non-negative patterns are 0 .. half-1, increasing */
        int pairs = 0;
        for (int p = 0; p + 1 < half; p++) {
            double a = decode(f->dt, (uint32_t)p), b = decode(f->dt, (uint32_t)p + 1);
            if (!isfinite(a) || !isfinite(b)) continue;
            cr_assert_lt(a, b, "%s patterns are ordered", n);
            double mid = a + (b - a) / 2; /* exact: both are short doubles */
            uint32_t even = (p % 2 == 0) ? (uint32_t)p : (uint32_t)p + 1;
            cr_assert_eq(encode(f->dt, mid), even, "%s tie between %a and %a", n, a, b);
            cr_assert_eq(encode(f->dt, nextafter(mid, -1)), (uint32_t)p, "%s below %a", n, mid);
            cr_assert_eq(encode(f->dt, nextafter(mid, 1e308)), (uint32_t)p + 1, "%s above %a", n, mid);
            uint32_t s = (uint32_t)half; /* the sign bit */
            cr_assert_eq(encode(f->dt, -mid), s | even, "%s -tie", n);
            cr_assert_eq(encode(f->dt, -nextafter(mid, -1)), s | (uint32_t)p, "%s", n);
            cr_assert_eq(encode(f->dt, -nextafter(mid, 1e308)), s | ((uint32_t)p + 1), "%s", n);
            pairs++;
        }
        int want = f->dt == MKB_DTYPE_BF16 ? 0x7f7f
                   : f->dt == MKB_DTYPE_F16 ? 0x7bff
                   : f->dt == MKB_DTYPE_F8E4M3 ? 0x7e
                   : f->dt == MKB_DTYPE_F8E5M2 ? 0x7b
                                               : 7;
        cr_assert_eq(pairs, want, "%s pairs checked", n);
    }
}

/* ---- random values against the references ---- */

Test(dtype, random_against_reference) {
    for (int k = 0; k < NFMTS; k++) {
        const struct ref_fmt *f = &FMTS[k];
        const char *n = mkb_dtype_name(f->dt);
        for (int t = 0; t < 200000; t++) {
            /* from far below the smallest subnormal to beyond the overflow threshold */
            double v = random_double(f->emin - f->man - 4, f->emax + 3);
            double got = mkb_dtype_round(f->dt, v), want = ref_round(f, v);
            cr_assert(same(got, want), "%s round(%a) = %a, expected %a", n, v, got, want);
        }
        for (int t = 0; t < 20000; t++) {
            double v = random_double(-1022, 1023);
            double got = mkb_dtype_round(f->dt, v), want = ref_round(f, v);
            cr_assert(same(got, want), "%s round(%a) = %a, expected %a", n, v, got, want);
        }
    }
}

/* bf16 against an integer implementation of RNE on the double's bits: re-bias the exponent,
 * add 0x7fff... plus the lowest kept bit, and truncate (the usual bias trick). */
static uint16_t ref_bf16_bits(double v) {
    uint64_t b = bits_of(v);
    uint16_t sign = (uint16_t)(b >> 63 << 15);
    uint64_t frac = b & 0x000fffffffffffffull;
    int E = (int)((b >> 52) & 0x7ff);
    if (E == 0x7ff) return frac ? 0x7fc0 : (uint16_t)(sign | 0x7f80);
    if (E == 0) return sign;
    int e = E - 1023;
    if (e > 127) return sign | 0x7f80;
    if (e >= -126) {
        uint64_t x = ((uint64_t)(e + 127) << 52) | frac;
        x += ((1ull << 44) - 1) + ((x >> 45) & 1);
        return (uint16_t)(sign | (x >> 45)); /* a carry into 255 is Inf */
    }
    uint64_t sig = frac | (1ull << 52);
    int sh = -133 - (e - 52); /* value = sig * 2^(e-52); the quantum is 2^-133 */
    if (sh >= 60) return sign;
    uint64_t x = sig + ((1ull << (sh - 1)) - 1) + ((sig >> sh) & 1);
    return (uint16_t)(sign | (x >> sh));
}

Test(dtype, bf16_against_integer_reference) {
    for (int t = 0; t < 1000000; t++) {
        double v = random_double(-140, 130);
        cr_assert_eq(mkb_f64_to_bf16(v), ref_bf16_bits(v), "%a", v);
    }
    /* exact ties at random patterns: value halfway between pattern p and p+1 */
    for (int t = 0; t < 100000; t++) {
        uint16_t p = (uint16_t)(next_u64() % 0x7f7f);
        double a = mkb_bf16_to_f64(p), b = mkb_bf16_to_f64((uint16_t)(p + 1));
        double mid = a + (b - a) / 2;
        cr_assert_eq(mkb_f64_to_bf16(mid), ref_bf16_bits(mid), "%a", mid);
        cr_assert_eq(mkb_f64_to_bf16(mid), (uint16_t)(p + (p & 1)), "%a", mid);
    }
    const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 4.9e-324, -DBL_MAX, 0x1p-134, 0x1.8p-134};
    for (int i = 0; i < 8; i++) cr_assert_eq(mkb_f64_to_bf16(special[i]), ref_bf16_bits(special[i]), "%a", special[i]);
}

Test(dtype, fp16_against_compiler) {
#ifdef __FLT16_MAX__
    for (int t = 0; t < 1000000; t++) {
        volatile double v = random_double(-30, 18);
        _Float16 h = (_Float16)v;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        cr_assert_eq(mkb_f64_to_f16(v), hb, "%a", v);
        /* and widening agrees */
        cr_assert_eq(mkb_f16_to_f64(hb), (double)h, "%#x", hb);
    }
    for (int p = 0; p < 65536; p++) {
        uint16_t pb = (uint16_t)p;
        _Float16 h;
        memcpy(&h, &pb, 2);
        cr_assert(same(mkb_f16_to_f64(pb), (double)h), "%#x", p);
    }
#else
    cr_skip_test("the compiler has no _Float16 on this target");
#endif
}

/* Rounding is monotone: sorted inputs give sorted outputs. */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Test(dtype, monotone) {
    enum { N = 100000 };
    double *v = malloc(N * sizeof *v);
    cr_assert_not_null(v);
    for (int k = 0; k < NFMTS; k++) {
        const struct ref_fmt *f = &FMTS[k];
        for (int i = 0; i < N; i++) v[i] = random_double(f->emin - f->man - 2, f->emax + 2);
        qsort(v, N, sizeof *v, cmp_double);
        double prev = mkb_dtype_round(f->dt, v[0]);
        for (int i = 1; i < N; i++) {
            double r = mkb_dtype_round(f->dt, v[i]);
            cr_assert_geq(r, prev, "%s: round(%a) = %a < round(%a) = %a", mkb_dtype_name(f->dt), v[i], r,
                          v[i - 1], prev);
            prev = r;
        }
    }
    free(v);
}

/* ---- element access ---- */

Test(dtype, load_store_floats) {
    const enum mkb_dtype fl[] = {MKB_DTYPE_F64, MKB_DTYPE_F32, MKB_DTYPE_F16, MKB_DTYPE_BF16,
                                 MKB_DTYPE_F8E4M3, MKB_DTYPE_F8E5M2, MKB_DTYPE_F4E2M1};
    for (int k = 0; k < 7; k++) {
        _Alignas(8) unsigned char buf[8 * 64];
        double v[64];
        memset(buf, 0xa5, sizeof buf);
        for (int i = 0; i < 64; i++) {
            v[i] = random_double(-8, 4);
            mkb_dtype_store(fl[k], buf, i, v[i]);
        }
        for (int i = 0; i < 64; i++)
            cr_assert(same(mkb_dtype_load(fl[k], buf, i), mkb_dtype_round(fl[k], v[i])), "%s [%d]",
                      mkb_dtype_name(fl[k]), i);
        /* nothing written past the last element */
        int64_t used = mkb_dtype_nbytes(fl[k], 64);
        for (int64_t b = used; b < (int64_t)sizeof buf; b++) cr_assert_eq(buf[b], 0xa5);
    }
    /* bit-exact storage formats */
    uint16_t h[2];
    mkb_dtype_store(MKB_DTYPE_BF16, h, 1, -2.0);
    cr_assert_eq(h[1], 0xc000);
    mkb_dtype_store(MKB_DTYPE_F16, h, 0, 1.0);
    cr_assert_eq(h[0], 0x3c00);
    uint8_t q[2];
    mkb_dtype_store(MKB_DTYPE_F8E4M3, q, 0, 448.0);
    mkb_dtype_store(MKB_DTYPE_F8E5M2, q, 1, -1.0);
    cr_assert_eq(q[0], 0x7e);
    cr_assert_eq(q[1], 0xbc);
}

Test(dtype, fp4_packing) {
    uint8_t b[3] = {0, 0, 0xee};
    mkb_dtype_store(MKB_DTYPE_F4E2M1, b, 0, 1.0);  /* code 2 in the low nibble */
    mkb_dtype_store(MKB_DTYPE_F4E2M1, b, 1, 6.0);  /* code 7 in the high nibble */
    mkb_dtype_store(MKB_DTYPE_F4E2M1, b, 3, -0.5); /* code 9 in byte 1's high nibble */
    cr_assert_eq(b[0], 0x72);
    cr_assert_eq(b[1], 0x90);
    cr_assert_eq(b[2], 0xee);
    mkb_dtype_store(MKB_DTYPE_F4E2M1, b, 0, -3.0); /* overwrite keeps the neighbour */
    cr_assert_eq(b[0], 0x7d);
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_F4E2M1, b, 0), -3.0);
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_F4E2M1, b, 1), 6.0);
    cr_assert(same(mkb_dtype_load(MKB_DTYPE_F4E2M1, b, 2), 0.0));
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_F4E2M1, b, 3), -0.5);
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_F4E2M1, b, 4), -4.0); /* 0xe */
}

Test(dtype, integers_from_double) {
    struct {
        enum mkb_dtype dt;
        double v;
        int64_t want;
    } c[] = {
        {MKB_DTYPE_I32, 2.9, 2},
        {MKB_DTYPE_I32, -2.9, -2},
        {MKB_DTYPE_I32, -0.5, 0},
        {MKB_DTYPE_I32, 1e10, INT32_MAX},
        {MKB_DTYPE_I32, -1e10, INT32_MIN},
        {MKB_DTYPE_I32, 2147483647.9, INT32_MAX},
        {MKB_DTYPE_I32, -2147483648.9, INT32_MIN},
        {MKB_DTYPE_I32, NAN, 0},
        {MKB_DTYPE_I32, INFINITY, INT32_MAX},
        {MKB_DTYPE_I32, -INFINITY, INT32_MIN},
        {MKB_DTYPE_I16, 40000.0, INT16_MAX},
        {MKB_DTYPE_I16, -40000.0, INT16_MIN},
        {MKB_DTYPE_I16, -32767.5, -32767},
        {MKB_DTYPE_I8, 200.0, 127},
        {MKB_DTYPE_I8, -200.0, -128},
        {MKB_DTYPE_I8, -128.7, -128},
        {MKB_DTYPE_I8, 126.99, 126},
        {MKB_DTYPE_U8, -5.0, 0},
        {MKB_DTYPE_U8, -0.99, 0},
        {MKB_DTYPE_U8, 300.0, 255},
        {MKB_DTYPE_U8, 254.99, 254},
        {MKB_DTYPE_U8, NAN, 0},
        {MKB_DTYPE_I64, 1e19, INT64_MAX},
        {MKB_DTYPE_I64, -1e19, INT64_MIN},
        {MKB_DTYPE_I64, 0x1p63, INT64_MAX},
        {MKB_DTYPE_I64, -0x1p63, INT64_MIN},
        {MKB_DTYPE_I64, 0x1.fffffffffffffp62, (int64_t)0x7ffffffffffffc00ll},
        {MKB_DTYPE_I64, -123456789012.75, -123456789012ll},
        {MKB_DTYPE_I64, NAN, 0},
        {MKB_DTYPE_BOOL, 0.0, 0},
        {MKB_DTYPE_BOOL, -0.0, 0},
        {MKB_DTYPE_BOOL, 0.1, 1},
        {MKB_DTYPE_BOOL, -7.0, 1},
        {MKB_DTYPE_BOOL, NAN, 1},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        int64_t buf[1] = {0x5a5a5a5a5a5a5a5all};
        mkb_dtype_store(c[k].dt, buf, 0, c[k].v);
        cr_assert_eq(mkb_dtype_load_i64(c[k].dt, buf, 0), c[k].want, "%s store(%a)", mkb_dtype_name(c[k].dt), c[k].v);
        if (c[k].dt != MKB_DTYPE_I64)
            cr_assert_eq(mkb_dtype_load(c[k].dt, buf, 0), (double)c[k].want);
        cr_assert_eq(mkb_dtype_round(c[k].dt, c[k].v), (double)c[k].want, "%s round(%a)", mkb_dtype_name(c[k].dt),
                     c[k].v);
    }
    /* bool reads any non-zero byte as 1 */
    uint8_t raw[2] = {0, 2};
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_BOOL, raw, 1), 1.0);
    cr_assert_eq(mkb_dtype_load_i64(MKB_DTYPE_BOOL, raw, 1), 1);
    cr_assert_eq(mkb_dtype_load(MKB_DTYPE_BOOL, raw, 0), 0.0);
}

Test(dtype, integers_exact_i64) {
    int64_t buf[4];
    const int64_t v[] = {INT64_MAX, INT64_MIN, (1ll << 53) + 1, -(1ll << 53) - 1, 0x123456789abcdefll};
    for (int k = 0; k < 5; k++) {
        mkb_dtype_store_i64(MKB_DTYPE_I64, buf, 2, v[k]);
        cr_assert_eq(mkb_dtype_load_i64(MKB_DTYPE_I64, buf, 2), v[k]);
    }
    struct {
        enum mkb_dtype dt;
        int64_t v, want;
    } c[] = {
        {MKB_DTYPE_I32, 1ll << 40, INT32_MAX}, {MKB_DTYPE_I32, -(1ll << 40), INT32_MIN},
        {MKB_DTYPE_I32, -7, -7},               {MKB_DTYPE_I16, 70000, INT16_MAX},
        {MKB_DTYPE_I8, -129, -128},            {MKB_DTYPE_I8, 127, 127},
        {MKB_DTYPE_U8, -1, 0},                 {MKB_DTYPE_U8, 256, 255},
        {MKB_DTYPE_U8, 200, 200},              {MKB_DTYPE_BOOL, -5, 1},
        {MKB_DTYPE_BOOL, 0, 0},                {MKB_DTYPE_I64, INT64_MIN, INT64_MIN},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        memset(buf, 0x77, sizeof buf);
        mkb_dtype_store_i64(c[k].dt, buf, 1, c[k].v);
        cr_assert_eq(mkb_dtype_load_i64(c[k].dt, buf, 1), c[k].want, "%s %lld", mkb_dtype_name(c[k].dt),
                     (long long)c[k].v);
    }
    /* into float types: one rounding of the exact integer. 2^62 + 2^54 + 1 lies just above the
     * bf16 tie 2^62 + 2^54, so it rounds up; rounding it to double first would make it the tie
     * and then round down to 2^62. */
    int64_t big = (1ll << 62) + (1ll << 54) + 1;
    uint16_t h;
    mkb_dtype_store_i64(MKB_DTYPE_BF16, &h, 0, big);
    cr_assert_eq(mkb_bf16_to_f64(h), 0x1p62 + 0x1p55);
    mkb_dtype_store_i64(MKB_DTYPE_BF16, &h, 0, -big);
    cr_assert_eq(mkb_bf16_to_f64(h), -(0x1p62 + 0x1p55));
    float fl;
    int64_t bigf = (1ll << 60) + (1ll << 36) + 1; /* just above an fp32 tie */
    mkb_dtype_store_i64(MKB_DTYPE_F32, &fl, 0, bigf);
    cr_assert_eq((double)fl, 0x1p60 + 0x1p37);
    double d;
    mkb_dtype_store_i64(MKB_DTYPE_F64, &d, 0, (1ll << 53) + 1);
    cr_assert_eq(d, 0x1p53, "fp64 ties to even");
    mkb_dtype_store_i64(MKB_DTYPE_F64, &d, 0, (1ll << 53) + 3);
    cr_assert_eq(d, 0x1p53 + 4);
    /* a float element read as int64 truncates */
    d = -3.75;
    cr_assert_eq(mkb_dtype_load_i64(MKB_DTYPE_F64, &d, 0), -3);
    h = mkb_f64_to_bf16(NAN);
    cr_assert_eq(mkb_dtype_load_i64(MKB_DTYPE_BF16, &h, 0), 0);
}
