/* Element types: names, sizes, limits, and the exact conversions between double and every
 * storage format (the rules are in dtype.h and docs/numerics.md).
 *
 * Every narrow float format is rounded by one integer routine, round_to_code(), that works on
 * the bits of the double: it rounds to nearest, ties to even, in a single step (no fp32
 * intermediate, no libm, independent of the FPU rounding mode), and returns the format's
 * magnitude code; each format then applies its own overflow and NaN rule. fp32 uses the
 * hardware's (float) conversion, which is the same IEEE rounding.
 * This file does not allocate, has no state, and does not check that a buffer is large enough:
 * callers index within their own storage. */
#include "tensor/dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/status.h"

/* ---- the X-macro tables ---- */

enum mkb_dtype_kind { KIND_F, KIND_I, KIND_U, KIND_B };

static const struct {
    const char *name;
    int bits;
    enum mkb_dtype_kind kind;
    const char *numpy;
} dtype_info[MKB_DTYPE_COUNT] = {
#define X(e, nm, b, k, np) [MKB_DTYPE_##e] = {nm, b, KIND_##k, np},
    MKB_DTYPES(X)
#undef X
};

static bool valid(enum mkb_dtype dt) { return (unsigned)dt < (unsigned)MKB_DTYPE_COUNT; }

const char *mkb_dtype_name(enum mkb_dtype dt) { return valid(dt) ? dtype_info[dt].name : "?"; }

bool mkb_dtype_from_name(const char *name, enum mkb_dtype *dt) {
    if (!name) return false;
    for (int i = 0; i < MKB_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_info[i].name) == 0) {
            *dt = (enum mkb_dtype)i;
            return true;
        }
    }
    return false;
}

int mkb_dtype_bits(enum mkb_dtype dt) { return valid(dt) ? dtype_info[dt].bits : 0; }

const char *mkb_dtype_numpy(enum mkb_dtype dt) { return valid(dt) ? dtype_info[dt].numpy : "?"; }

bool mkb_dtype_is_float(enum mkb_dtype dt) { return valid(dt) && dtype_info[dt].kind == KIND_F; }

bool mkb_dtype_is_int(enum mkb_dtype dt) { return valid(dt) && dtype_info[dt].kind != KIND_F; }

int64_t mkb_dtype_nbytes(enum mkb_dtype dt, int64_t n) {
    MKB_ASSERT(valid(dt) && n >= 0);
    return (n * dtype_info[dt].bits + 7) / 8;
}

/* ---- limits ---- */

double mkb_dtype_eps(enum mkb_dtype dt) {
    switch (dt) {
    case MKB_DTYPE_F64: return 0x1p-52;
    case MKB_DTYPE_F32: return 0x1p-23;
    case MKB_DTYPE_F16: return 0x1p-10;
    case MKB_DTYPE_BF16: return 0x1p-7;
    case MKB_DTYPE_F8E4M3: return 0x1p-3;
    case MKB_DTYPE_F8E5M2: return 0x1p-2;
    case MKB_DTYPE_F4E2M1: return 0x1p-1;
    case MKB_DTYPE_I64:
    case MKB_DTYPE_I32:
    case MKB_DTYPE_I16:
    case MKB_DTYPE_I8:
    case MKB_DTYPE_U8:
    case MKB_DTYPE_BOOL: return 0.0;
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

/* int64's maximum, 2^63 - 1, is not a double: the nearest one, 2^63, is returned. */
double mkb_dtype_max(enum mkb_dtype dt) {
    switch (dt) {
    case MKB_DTYPE_F64: return DBL_MAX;
    case MKB_DTYPE_F32: return FLT_MAX;
    case MKB_DTYPE_F16: return 65504.0;
    case MKB_DTYPE_BF16: return 0x1.fep127;
    case MKB_DTYPE_F8E4M3: return 448.0;
    case MKB_DTYPE_F8E5M2: return 57344.0;
    case MKB_DTYPE_F4E2M1: return 6.0;
    case MKB_DTYPE_I64: return 0x1p63;
    case MKB_DTYPE_I32: return 2147483647.0;
    case MKB_DTYPE_I16: return 32767.0;
    case MKB_DTYPE_I8: return 127.0;
    case MKB_DTYPE_U8: return 255.0;
    case MKB_DTYPE_BOOL: return 1.0;
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

/* ---- the rounding core ---- */

static uint64_t f64_bits(double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static double f64_from_bits(uint64_t b) {
    double v;
    memcpy(&v, &b, 8);
    return v;
}

/* 2^k for -1022 <= k <= 1023, exactly, without libm. */
static double pow2(int k) { return f64_from_bits((uint64_t)(k + 1023) << 52); }

/* A binary float format with a hidden bit: `man` fraction bits, exponent bias `bias`
 * (so the smallest normal exponent is 1 - bias). */
struct fmt {
    int man, bias;
};

static const struct fmt FMT_BF16 = {7, 127};
static const struct fmt FMT_F16 = {10, 15};
static const struct fmt FMT_E4M3 = {3, 7};
static const struct fmt FMT_E5M2 = {2, 15};
static const struct fmt FMT_E2M1 = {1, 1};

/* Round the magnitude of a finite double (its bits with the sign cleared) to the format,
 * to nearest with ties to even, and return the magnitude code: (biased exponent << man) |
 * fraction, with the exponent unbounded above (the caller compares the code with its largest
 * finite one). The code of a value n * 2^(q) where q is the format's quantum at that exponent
 * is ((max(e, emin) - emin) << man) + n: subnormals (e < emin) give n itself, and a rounding
 * carry from 1.111..1 to 10.000..0 moves into the exponent field on its own. */
static uint64_t round_to_code(uint64_t mag, struct fmt f) {
    int efield = (int)(mag >> 52);
    if (efield == 0) return 0; /* a subnormal double is far below half of any format's
                                  smallest subnormal */
    int e = efield - 1023;
    uint64_t sig = (mag & 0x000fffffffffffffull) | 0x0010000000000000ull; /* v = sig * 2^(e-52) */
    int emin = 1 - f.bias;
    int eq = e < emin ? emin : e;   /* the exponent that sets the quantum 2^(eq - man) */
    int shift = 52 - f.man + (eq - e); /* bits of sig below the quantum */
    if (shift > 54) return 0;          /* v < 2^(eq-man) / 2: rounds to zero */
    uint64_t n = sig >> shift;
    uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (n & 1))) n++;
    return ((uint64_t)(eq - emin) << f.man) + n;
}

/* ---- bf16 ---- */

uint16_t mkb_f64_to_bf16(double v) {
    uint64_t b = f64_bits(v);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7fc0; /* NaN: canonical quiet NaN */
    if (mag == 0x7ff0000000000000ull) return sign | 0x7f80;
    uint64_t code = round_to_code(mag, FMT_BF16);
    if (code >= 0x7f80) return sign | 0x7f80; /* overflow to Inf */
    return sign | (uint16_t)code;
}

double mkb_bf16_to_f64(uint16_t h) {
    uint32_t w = (uint32_t)h << 16;
    float f;
    memcpy(&f, &w, 4);
    return (double)f;
}

/* ---- fp16 ---- */

uint16_t mkb_f64_to_f16(double v) {
    uint64_t b = f64_bits(v);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7e00;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7c00;
    uint64_t code = round_to_code(mag, FMT_F16);
    if (code >= 0x7c00) return sign | 0x7c00;
    return sign | (uint16_t)code;
}

/* Value of a magnitude code of a format whose every exponent field is finite (the caller
 * handles Inf/NaN codes first). */
static double decode_mag(uint32_t code, struct fmt f) {
    uint32_t efield = code >> f.man, frac = code & ((1u << f.man) - 1);
    if (efield == 0) return (double)frac * pow2(1 - f.bias - f.man);
    return (double)((1u << f.man) | frac) * pow2((int)efield - f.bias - f.man);
}

double mkb_f16_to_f64(uint16_t h) {
    double s = (h & 0x8000) ? -1.0 : 1.0;
    uint32_t mag = h & 0x7fff;
    if (mag >= 0x7c00) return mag == 0x7c00 ? s * INFINITY : NAN;
    return s * decode_mag(mag, FMT_F16);
}

/* ---- fp8 and fp4: saturating ---- */

uint8_t mkb_f64_to_f8e4m3(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 56) & 0x80);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7f;      /* NaN (S.1111.111) */
    if (mag == 0x7ff0000000000000ull) return sign | 0x7e; /* ±Inf saturates to ±448 */
    uint64_t code = round_to_code(mag, FMT_E4M3);
    if (code > 0x7e) code = 0x7e;
    return sign | (uint8_t)code;
}

double mkb_f8e4m3_to_f64(uint8_t x) {
    double s = (x & 0x80) ? -1.0 : 1.0;
    uint32_t mag = x & 0x7f;
    if (mag == 0x7f) return NAN;
    return s * decode_mag(mag, FMT_E4M3);
}

uint8_t mkb_f64_to_f8e5m2(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 56) & 0x80);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7e; /* quiet NaN */
    if (mag == 0x7ff0000000000000ull) return sign | 0x7b;
    uint64_t code = round_to_code(mag, FMT_E5M2);
    if (code > 0x7b) code = 0x7b; /* ±57344 */
    return sign | (uint8_t)code;
}

double mkb_f8e5m2_to_f64(uint8_t x) {
    double s = (x & 0x80) ? -1.0 : 1.0;
    uint32_t mag = x & 0x7f;
    if (mag >= 0x7c) return mag == 0x7c ? s * INFINITY : NAN;
    return s * decode_mag(mag, FMT_E5M2);
}

uint8_t mkb_f64_to_f4e2m1(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 60) & 0x8);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7; /* no NaN: +6 */
    if (mag == 0x7ff0000000000000ull) return sign | 0x7;
    uint64_t code = round_to_code(mag, FMT_E2M1);
    if (code > 0x7) code = 0x7;
    return sign | (uint8_t)code;
}

double mkb_f4e2m1_to_f64(uint8_t nibble) {
    double s = (nibble & 0x8) ? -1.0 : 1.0;
    return s * decode_mag(nibble & 0x7, FMT_E2M1);
}

/* ---- integers ---- */

/* Truncate toward zero and saturate to [lo, hi]; NaN gives 0. lo and hi are exact doubles
 * for every type but int64, whose bounds are handled with 2^63. */
static int64_t f64_to_int(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (hi == INT64_MAX) {
        if (v >= 0x1p63) return INT64_MAX;
        if (v < -0x1p63) return INT64_MIN;
        return (int64_t)v;
    }
    if (v >= (double)hi) return hi;
    if (v <= (double)lo) return lo;
    return (int64_t)v;
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- element access ---- */

double mkb_dtype_round(enum mkb_dtype dt, double v) {
    switch (dt) {
    case MKB_DTYPE_F64: return v;
    case MKB_DTYPE_F32: return (double)(float)v;
    case MKB_DTYPE_F16: return mkb_f16_to_f64(mkb_f64_to_f16(v));
    case MKB_DTYPE_BF16: return mkb_bf16_to_f64(mkb_f64_to_bf16(v));
    case MKB_DTYPE_F8E4M3: return mkb_f8e4m3_to_f64(mkb_f64_to_f8e4m3(v));
    case MKB_DTYPE_F8E5M2: return mkb_f8e5m2_to_f64(mkb_f64_to_f8e5m2(v));
    case MKB_DTYPE_F4E2M1: return mkb_f4e2m1_to_f64(mkb_f64_to_f4e2m1(v));
    case MKB_DTYPE_I64: return (double)f64_to_int(v, INT64_MIN, INT64_MAX);
    case MKB_DTYPE_I32: return (double)f64_to_int(v, INT32_MIN, INT32_MAX);
    case MKB_DTYPE_I16: return (double)f64_to_int(v, INT16_MIN, INT16_MAX);
    case MKB_DTYPE_I8: return (double)f64_to_int(v, INT8_MIN, INT8_MAX);
    case MKB_DTYPE_U8: return (double)f64_to_int(v, 0, UINT8_MAX);
    case MKB_DTYPE_BOOL: return v != 0.0 ? 1.0 : 0.0; /* NaN != 0 */
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

double mkb_dtype_load(enum mkb_dtype dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_F64: return ((const double *)base)[i];
    case MKB_DTYPE_F32: return (double)((const float *)base)[i];
    case MKB_DTYPE_F16: return mkb_f16_to_f64(((const uint16_t *)base)[i]);
    case MKB_DTYPE_BF16: return mkb_bf16_to_f64(((const uint16_t *)base)[i]);
    case MKB_DTYPE_F8E4M3: return mkb_f8e4m3_to_f64(((const uint8_t *)base)[i]);
    case MKB_DTYPE_F8E5M2: return mkb_f8e5m2_to_f64(((const uint8_t *)base)[i]);
    case MKB_DTYPE_F4E2M1: {
        uint8_t byte = ((const uint8_t *)base)[i >> 1];
        return mkb_f4e2m1_to_f64((i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xf));
    }
    case MKB_DTYPE_I64: return (double)((const int64_t *)base)[i];
    case MKB_DTYPE_I32: return (double)((const int32_t *)base)[i];
    case MKB_DTYPE_I16: return (double)((const int16_t *)base)[i];
    case MKB_DTYPE_I8: return (double)((const int8_t *)base)[i];
    case MKB_DTYPE_U8: return (double)((const uint8_t *)base)[i];
    case MKB_DTYPE_BOOL: return ((const uint8_t *)base)[i] ? 1.0 : 0.0;
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

static void store_f4(void *base, int64_t i, uint8_t nibble) {
    uint8_t *p = (uint8_t *)base + (i >> 1);
    *p = (i & 1) ? (uint8_t)((*p & 0x0f) | (nibble << 4)) : (uint8_t)((*p & 0xf0) | nibble);
}

void mkb_dtype_store(enum mkb_dtype dt, void *base, int64_t i, double v) {
    switch (dt) {
    case MKB_DTYPE_F64: ((double *)base)[i] = v; return;
    case MKB_DTYPE_F32: ((float *)base)[i] = (float)v; return;
    case MKB_DTYPE_F16: ((uint16_t *)base)[i] = mkb_f64_to_f16(v); return;
    case MKB_DTYPE_BF16: ((uint16_t *)base)[i] = mkb_f64_to_bf16(v); return;
    case MKB_DTYPE_F8E4M3: ((uint8_t *)base)[i] = mkb_f64_to_f8e4m3(v); return;
    case MKB_DTYPE_F8E5M2: ((uint8_t *)base)[i] = mkb_f64_to_f8e5m2(v); return;
    case MKB_DTYPE_F4E2M1: store_f4(base, i, mkb_f64_to_f4e2m1(v)); return;
    case MKB_DTYPE_I64: ((int64_t *)base)[i] = f64_to_int(v, INT64_MIN, INT64_MAX); return;
    case MKB_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)f64_to_int(v, INT32_MIN, INT32_MAX); return;
    case MKB_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)f64_to_int(v, INT16_MIN, INT16_MAX); return;
    case MKB_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)f64_to_int(v, INT8_MIN, INT8_MAX); return;
    case MKB_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)f64_to_int(v, 0, UINT8_MAX); return;
    case MKB_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0; return;
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

int64_t mkb_dtype_load_i64(enum mkb_dtype dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_I64: return ((const int64_t *)base)[i];
    case MKB_DTYPE_I32: return ((const int32_t *)base)[i];
    case MKB_DTYPE_I16: return ((const int16_t *)base)[i];
    case MKB_DTYPE_I8: return ((const int8_t *)base)[i];
    case MKB_DTYPE_U8: return ((const uint8_t *)base)[i];
    case MKB_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    /* A float element read as an integer follows the float-to-integer rule. */
    case MKB_DTYPE_F64:
    case MKB_DTYPE_F32:
    case MKB_DTYPE_F16:
    case MKB_DTYPE_BF16:
    case MKB_DTYPE_F8E4M3:
    case MKB_DTYPE_F8E5M2:
    case MKB_DTYPE_F4E2M1: return f64_to_int(mkb_dtype_load(dt, base, i), INT64_MIN, INT64_MAX);
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}

/* An int64 as a double rounded to odd: exact below 2^53, and above it the low bit records
 * whether anything was dropped, so a second rounding to any format of at most 51
 * significant bits (all of ours but fp64) equals one direct rounding: rounding to odd with
 * two spare bits is innocuous. fp64 itself is rounded directly by the (double) conversion. */
static double i64_to_f64_odd(int64_t v) {
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int s = 0;
    while ((u >> s) >= (1ull << 53)) s++;
    uint64_t n = u >> s;
    if (s && (u & ((1ull << s) - 1))) n |= 1;
    double d = (double)n * pow2(s);
    return v < 0 ? -d : d;
}

void mkb_dtype_store_i64(enum mkb_dtype dt, void *base, int64_t i, int64_t v) {
    switch (dt) {
    case MKB_DTYPE_I64: ((int64_t *)base)[i] = v; return;
    case MKB_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)clamp_i64(v, INT32_MIN, INT32_MAX); return;
    case MKB_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)clamp_i64(v, INT16_MIN, INT16_MAX); return;
    case MKB_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)clamp_i64(v, INT8_MIN, INT8_MAX); return;
    case MKB_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)clamp_i64(v, 0, UINT8_MAX); return;
    case MKB_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; return;
    case MKB_DTYPE_F64: ((double *)base)[i] = (double)v; return;
    case MKB_DTYPE_F32:
    case MKB_DTYPE_F16:
    case MKB_DTYPE_BF16:
    case MKB_DTYPE_F8E4M3:
    case MKB_DTYPE_F8E5M2:
    case MKB_DTYPE_F4E2M1: mkb_dtype_store(dt, base, i, i64_to_f64_odd(v)); return;
    case MKB_DTYPE_COUNT: break;
    }
    mkb_assert_fail("valid dtype", __FILE__, __LINE__);
}
