/* Device-side element access: the conversions of tensor/dtype.c, restated for the GPU so that
 * every store rounds to exactly the bits the CPU backend produces.
 *
 *   ld_f64 / st_f64:   widen any dtype to double exactly / round a double into any dtype with
 *                      dtype.h's rules (the one integer rounding core, round_to_code, as in
 *                      dtype.c: nearest-even in one step from the double's bits; fp8 and fp4
 *                      saturate; canonical NaNs; float-to-integer truncates and saturates).
 *   ld_i64 / st_i64:   exact integer access (store to a float type goes through dtype.c's
 *                      round-to-odd, so int64 values above 2^53 round once).
 *   ldf / stf:         the fp32 math path of compute precision: fp32, fp16 and bf16 widen to
 *                      float exactly, and a float rounds once into fp32/fp16/bf16 (bit-identical
 *                      to rounding the same value held in a double, since a float is exact in
 *                      one).
 * fp4 (packed two per byte) is stored with two word-sized atomics on the element's own nibble,
 * so neighbouring threads may write the two halves of one byte.
 * This header has no state; every function is __device__ inline. */
#ifndef MKB_BACKEND_CUDA_DTYPE_CUH
#define MKB_BACKEND_CUDA_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "backend/cuda/kernels.h"

#define MKB_DEV __device__ __forceinline__

namespace mkb_cu {

MKB_DEV uint64_t f64_bits(double v) { return (uint64_t)__double_as_longlong(v); }
MKB_DEV double f64_from_bits(uint64_t b) { return __longlong_as_double((long long)b); }
MKB_DEV double pow2(int k) { return f64_from_bits((uint64_t)(k + 1023) << 52); }

struct fmt {
    int man, bias;
};

/* dtype.c's round_to_code, line for line. */
MKB_DEV uint64_t round_to_code(uint64_t mag, fmt f) {
    int efield = (int)(mag >> 52);
    if (efield == 0) return 0;
    int e = efield - 1023;
    uint64_t sig = (mag & 0x000fffffffffffffull) | 0x0010000000000000ull;
    int emin = 1 - f.bias;
    int eq = e < emin ? emin : e;
    int shift = 52 - f.man + (eq - e);
    if (shift > 54) return 0;
    uint64_t n = sig >> shift;
    uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (n & 1))) n++;
    return ((uint64_t)(eq - emin) << f.man) + n;
}

MKB_DEV double decode_mag(uint32_t code, fmt f) {
    uint32_t efield = code >> f.man, frac = code & ((1u << f.man) - 1);
    if (efield == 0) return (double)frac * pow2(1 - f.bias - f.man);
    return (double)((1u << f.man) | frac) * pow2((int)efield - f.bias - f.man);
}

MKB_DEV uint16_t f64_to_bf16(double v) {
    uint64_t b = f64_bits(v);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7fc0;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7f80;
    uint64_t code = round_to_code(mag, fmt{7, 127});
    if (code >= 0x7f80) return sign | 0x7f80;
    return sign | (uint16_t)code;
}

MKB_DEV uint16_t f64_to_f16(double v) {
    uint64_t b = f64_bits(v);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7e00;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7c00;
    uint64_t code = round_to_code(mag, fmt{10, 15});
    if (code >= 0x7c00) return sign | 0x7c00;
    return sign | (uint16_t)code;
}

MKB_DEV uint8_t f64_to_f8e4m3(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 56) & 0x80);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7f;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7e;
    uint64_t code = round_to_code(mag, fmt{3, 7});
    if (code > 0x7e) code = 0x7e;
    return sign | (uint8_t)code;
}

MKB_DEV uint8_t f64_to_f8e5m2(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 56) & 0x80);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7e;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7b;
    uint64_t code = round_to_code(mag, fmt{2, 15});
    if (code > 0x7b) code = 0x7b;
    return sign | (uint8_t)code;
}

MKB_DEV uint8_t f64_to_f4e2m1(double v) {
    uint64_t b = f64_bits(v);
    uint8_t sign = (uint8_t)((b >> 60) & 0x8);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag > 0x7ff0000000000000ull) return 0x7;
    if (mag == 0x7ff0000000000000ull) return sign | 0x7;
    uint64_t code = round_to_code(mag, fmt{1, 1});
    if (code > 0x7) code = 0x7;
    return sign | (uint8_t)code;
}

MKB_DEV double bf16_to_f64(uint16_t h) { return (double)__uint_as_float((uint32_t)h << 16); }

MKB_DEV double f16_to_f64(uint16_t h) {
    double s = (h & 0x8000) ? -1.0 : 1.0;
    uint32_t mag = h & 0x7fff;
    if (mag >= 0x7c00) return mag == 0x7c00 ? s * __longlong_as_double(0x7ff0000000000000ll) : __longlong_as_double(0x7ff8000000000000ll);
    return s * decode_mag(mag, fmt{10, 15});
}

MKB_DEV double f8e4m3_to_f64(uint8_t x) {
    double s = (x & 0x80) ? -1.0 : 1.0;
    uint32_t mag = x & 0x7f;
    if (mag == 0x7f) return __longlong_as_double(0x7ff8000000000000ll);
    return s * decode_mag(mag, fmt{3, 7});
}

MKB_DEV double f8e5m2_to_f64(uint8_t x) {
    double s = (x & 0x80) ? -1.0 : 1.0;
    uint32_t mag = x & 0x7f;
    if (mag >= 0x7c) return mag == 0x7c ? s * __longlong_as_double(0x7ff0000000000000ll) : __longlong_as_double(0x7ff8000000000000ll);
    return s * decode_mag(mag, fmt{2, 15});
}

MKB_DEV double f4e2m1_to_f64(uint8_t nibble) {
    double s = (nibble & 0x8) ? -1.0 : 1.0;
    return s * decode_mag(nibble & 0x7, fmt{1, 1});
}

/* dtype.c's f64_to_int: truncate toward zero, saturate, NaN gives 0. */
MKB_DEV int64_t f64_to_int(double v, int64_t lo, int64_t hi) {
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

MKB_DEV int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

MKB_DEV double i64_to_f64_odd(int64_t v) {
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int s = 0;
    while ((u >> s) >= (1ull << 53)) s++;
    uint64_t n = u >> s;
    if (s && (u & ((1ull << s) - 1))) n |= 1;
    double d = __dmul_rn((double)n, pow2(s));
    return v < 0 ? -d : d;
}

/* fp4: a nibble of the byte holding element i; written with atomics on the aligned word. */
MKB_DEV uint8_t ld_nibble(const void *base, int64_t i) {
    uint8_t byte = ((const uint8_t *)base)[i >> 1];
    return (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xf);
}

MKB_DEV void st_nibble(void *base, int64_t i, uint8_t nibble) {
    uintptr_t addr = (uintptr_t)((uint8_t *)base + (i >> 1));
    unsigned int *word = (unsigned int *)(addr & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)((addr & 3) * 8 + ((i & 1) ? 4 : 0));
    atomicAnd(word, ~(0xfu << shift));
    atomicOr(word, (unsigned int)(nibble & 0xf) << shift);
}

MKB_DEV double ld_f64(int dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_F64: return ((const double *)base)[i];
    case MKB_DTYPE_F32: return (double)((const float *)base)[i];
    case MKB_DTYPE_F16: return f16_to_f64(((const uint16_t *)base)[i]);
    case MKB_DTYPE_BF16: return bf16_to_f64(((const uint16_t *)base)[i]);
    case MKB_DTYPE_F8E4M3: return f8e4m3_to_f64(((const uint8_t *)base)[i]);
    case MKB_DTYPE_F8E5M2: return f8e5m2_to_f64(((const uint8_t *)base)[i]);
    case MKB_DTYPE_F4E2M1: return f4e2m1_to_f64(ld_nibble(base, i));
    case MKB_DTYPE_I64: return (double)((const int64_t *)base)[i];
    case MKB_DTYPE_I32: return (double)((const int32_t *)base)[i];
    case MKB_DTYPE_I16: return (double)((const int16_t *)base)[i];
    case MKB_DTYPE_I8: return (double)((const int8_t *)base)[i];
    case MKB_DTYPE_U8: return (double)((const uint8_t *)base)[i];
    default: return ((const uint8_t *)base)[i] ? 1.0 : 0.0; /* bool */
    }
}

MKB_DEV void st_f64(int dt, void *base, int64_t i, double v) {
    switch (dt) {
    case MKB_DTYPE_F64: ((double *)base)[i] = v; return;
    case MKB_DTYPE_F32: ((float *)base)[i] = __double2float_rn(v); return;
    case MKB_DTYPE_F16: ((uint16_t *)base)[i] = f64_to_f16(v); return;
    case MKB_DTYPE_BF16: ((uint16_t *)base)[i] = f64_to_bf16(v); return;
    case MKB_DTYPE_F8E4M3: ((uint8_t *)base)[i] = f64_to_f8e4m3(v); return;
    case MKB_DTYPE_F8E5M2: ((uint8_t *)base)[i] = f64_to_f8e5m2(v); return;
    case MKB_DTYPE_F4E2M1: st_nibble(base, i, f64_to_f4e2m1(v)); return;
    case MKB_DTYPE_I64: ((int64_t *)base)[i] = f64_to_int(v, INT64_MIN, INT64_MAX); return;
    case MKB_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)f64_to_int(v, INT32_MIN, INT32_MAX); return;
    case MKB_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)f64_to_int(v, INT16_MIN, INT16_MAX); return;
    case MKB_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)f64_to_int(v, INT8_MIN, INT8_MAX); return;
    case MKB_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)f64_to_int(v, 0, UINT8_MAX); return;
    default: ((uint8_t *)base)[i] = v != 0.0; return;
    }
}

MKB_DEV bool is_int(int dt) { return dt >= MKB_DTYPE_I64; }

MKB_DEV int64_t ld_i64(int dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_I64: return ((const int64_t *)base)[i];
    case MKB_DTYPE_I32: return ((const int32_t *)base)[i];
    case MKB_DTYPE_I16: return ((const int16_t *)base)[i];
    case MKB_DTYPE_I8: return ((const int8_t *)base)[i];
    case MKB_DTYPE_U8: return ((const uint8_t *)base)[i];
    case MKB_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return f64_to_int(ld_f64(dt, base, i), INT64_MIN, INT64_MAX);
    }
}

MKB_DEV void st_i64(int dt, void *base, int64_t i, int64_t v) {
    switch (dt) {
    case MKB_DTYPE_I64: ((int64_t *)base)[i] = v; return;
    case MKB_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)clamp_i64(v, INT32_MIN, INT32_MAX); return;
    case MKB_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)clamp_i64(v, INT16_MIN, INT16_MAX); return;
    case MKB_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)clamp_i64(v, INT8_MIN, INT8_MAX); return;
    case MKB_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)clamp_i64(v, 0, UINT8_MAX); return;
    case MKB_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; return;
    case MKB_DTYPE_F64: ((double *)base)[i] = (double)v; return;
    default: st_f64(dt, base, i, i64_to_f64_odd(v)); return;
    }
}

/* ---- the fp32 math path ---- */

MKB_DEV float bf16_bits_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Round to nearest even (the hardware conversion); NaN becomes the canonical 0x7fc0 (dtype.c's
 * choice; the hardware's is 0x7fff). */
MKB_DEV uint16_t f32_to_bf16_bits(float f) {
    __nv_bfloat16_raw r = __nv_bfloat16_raw(__float2bfloat16_rn(f));
    return f != f ? (uint16_t)0x7fc0 : r.x;
}

MKB_DEV float f16_bits_to_f32(uint16_t h) {
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
}

MKB_DEV uint16_t f32_to_f16_bits(float f) {
    if (f != f) return 0x7e00;
    __half_raw r = __half_raw(__float2half_rn(f));
    return r.x;
}

/* Load an arithmetic dtype (fp64/fp32/fp16/bf16) as the math type M. */
template <typename M> MKB_DEV M ldm(int dt, const void *base, int64_t i);

template <> MKB_DEV float ldm<float>(int dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_F32: return ((const float *)base)[i];
    case MKB_DTYPE_BF16: return bf16_bits_to_f32(((const uint16_t *)base)[i]);
    case MKB_DTYPE_F16: return f16_bits_to_f32(((const uint16_t *)base)[i]);
    default: return (float)ld_f64(dt, base, i); /* not reached: fp64 math for fp64 operands */
    }
}

template <> MKB_DEV double ldm<double>(int dt, const void *base, int64_t i) {
    switch (dt) {
    case MKB_DTYPE_F64: return ((const double *)base)[i];
    case MKB_DTYPE_F32: return (double)((const float *)base)[i];
    case MKB_DTYPE_BF16: return (double)bf16_bits_to_f32(((const uint16_t *)base)[i]);
    case MKB_DTYPE_F16: return (double)f16_bits_to_f32(((const uint16_t *)base)[i]);
    default: return ld_f64(dt, base, i);
    }
}

/* Store the math type M into an arithmetic dtype with one rounding. */
MKB_DEV void stm(int dt, void *base, int64_t i, float v) {
    switch (dt) {
    case MKB_DTYPE_F32: ((float *)base)[i] = v; return;
    case MKB_DTYPE_BF16: ((uint16_t *)base)[i] = f32_to_bf16_bits(v); return;
    case MKB_DTYPE_F16: ((uint16_t *)base)[i] = f32_to_f16_bits(v); return;
    default: st_f64(dt, base, i, (double)v); return;
    }
}

MKB_DEV void stm(int dt, void *base, int64_t i, double v) { st_f64(dt, base, i, v); }

/* Round a double to dt and widen back (dtype.c's mkb_dtype_round, for arithmetic dtypes). */
MKB_DEV double round_to(int dt, double v) {
    switch (dt) {
    case MKB_DTYPE_F64: return v;
    case MKB_DTYPE_F32: return (double)__double2float_rn(v);
    case MKB_DTYPE_F16: return f16_to_f64(f64_to_f16(v));
    case MKB_DTYPE_BF16: return bf16_to_f64(f64_to_bf16(v));
    default: return v;
    }
}

/* ---- typed storage for the vectorised contiguous paths ---- */
struct bf16s {
    uint16_t b;
};
struct f16s {
    uint16_t b;
};

MKB_DEV float to_f(float v) { return v; }
MKB_DEV float to_f(bf16s v) { return bf16_bits_to_f32(v.b); }
MKB_DEV float to_f(f16s v) { return f16_bits_to_f32(v.b); }
MKB_DEV double to_f(double v) { return v; }

template <typename T> MKB_DEV T from_f(float v);
template <> MKB_DEV float from_f<float>(float v) { return v; }
template <> MKB_DEV bf16s from_f<bf16s>(float v) { return bf16s{f32_to_bf16_bits(v)}; }
template <> MKB_DEV f16s from_f<f16s>(float v) { return f16s{f32_to_f16_bits(v)}; }
template <> MKB_DEV double from_f<double>(float v) { return (double)v; }
template <typename T> MKB_DEV T from_d(double v);
template <> MKB_DEV double from_d<double>(double v) { return v; }
template <> MKB_DEV float from_d<float>(double v) { return __double2float_rn(v); }
template <> MKB_DEV bf16s from_d<bf16s>(double v) { return bf16s{f64_to_bf16(v)}; }
template <> MKB_DEV f16s from_d<f16s>(double v) { return f16s{f64_to_f16(v)}; }

} // namespace mkb_cu

#endif
