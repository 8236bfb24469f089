/* Element types and the exact conversion rules between them.
 *
 * Every value crosses types through double: load() widens a stored element to double exactly
 * (every supported float format is a subset of fp64; integers up to 2^53 are exact), store()
 * rounds a double into the storage format. Rules (docs/numerics.md has the tables):
 *   - bf16, fp16: IEEE round to nearest, ties to even; overflow gives ±Inf; NaN stays NaN
 *     (canonical quiet NaN); subnormals are kept.
 *   - fp8 e4m3 (the "fn" variant: no Inf, max 448, NaN = S.1111.111) and fp8 e5m2 (IEEE-like,
 *     max 57344): round to nearest even, then SATURATE: finite overflow and ±Inf become ±max;
 *     NaN stays NaN. This is the behaviour of the hardware's satfinite conversions.
 *   - fp4 e2m1 (values ±{0, .5, 1, 1.5, 2, 3, 4, 6}, no Inf or NaN): round to nearest even,
 *     saturate to ±6; NaN becomes +6 (there is no NaN to keep). Packed two per byte: element 2i
 *     in the low nibble, 2i+1 in the high nibble.
 *   - float to integer: truncate toward zero, saturate to the type's range, NaN becomes 0.
 *   - bool: store() gives 1 for any non-zero value (NaN included), load() gives 0 or 1.
 * Conversions are direct from double (no intermediate fp32 step).
 * This file does not allocate and has no state. */
#ifndef MKB_TENSOR_DTYPE_H
#define MKB_TENSOR_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

/* X(ENUM, name, bits, kind, numpy_descr)
 * kind: F = floating, I = signed integer, U = unsigned integer, B = bool.
 * numpy_descr is how mkb writes the raw bits to .npy: formats numpy lacks (bf16, fp8, fp4)
 * are written as unsigned integers of the same width holding the bit patterns (fp4 packed). */
#define MKB_DTYPES(X)                        \
    X(F64, "fp64", 64, F, "<f8")            \
    X(F32, "fp32", 32, F, "<f4")            \
    X(F16, "fp16", 16, F, "<f2")            \
    X(BF16, "bf16", 16, F, "<u2")           \
    X(F8E4M3, "fp8e4m3", 8, F, "|u1")       \
    X(F8E5M2, "fp8e5m2", 8, F, "|u1")       \
    X(F4E2M1, "fp4e2m1", 4, F, "|u1")       \
    X(I64, "int64", 64, I, "<i8")           \
    X(I32, "int32", 32, I, "<i4")           \
    X(I16, "int16", 16, I, "<i2")           \
    X(I8, "int8", 8, I, "|i1")              \
    X(U8, "uint8", 8, U, "|u1")             \
    X(BOOL, "bool", 8, B, "|b1")

enum mkb_dtype {
#define X(e, name, bits, kind, np) MKB_DTYPE_##e,
    MKB_DTYPES(X)
#undef X
        MKB_DTYPE_COUNT
};

const char *mkb_dtype_name(enum mkb_dtype dt);
/* Parses "bf16", "fp32", ...; returns false for an unknown name. */
bool mkb_dtype_from_name(const char *name, enum mkb_dtype *dt);
int mkb_dtype_bits(enum mkb_dtype dt);
const char *mkb_dtype_numpy(enum mkb_dtype dt);
bool mkb_dtype_is_float(enum mkb_dtype dt);
bool mkb_dtype_is_int(enum mkb_dtype dt); /* signed, unsigned or bool */
/* Bytes needed for n elements (fp4 rounds up to whole bytes). */
int64_t mkb_dtype_nbytes(enum mkb_dtype dt, int64_t n);

/* Machine epsilon (2^-mantissa_bits) of a float type, e.g. 2^-7 for bf16; 0 for integers. */
double mkb_dtype_eps(enum mkb_dtype dt);
/* Largest finite value of a float type, or the integer type's maximum. */
double mkb_dtype_max(enum mkb_dtype dt);

/* Round v to dt and widen back: the value a store/load round trip gives. */
double mkb_dtype_round(enum mkb_dtype dt, double v);

/* Element access on raw storage; i is an element index (fp4: nibble index). */
double mkb_dtype_load(enum mkb_dtype dt, const void *base, int64_t i);
void mkb_dtype_store(enum mkb_dtype dt, void *base, int64_t i, double v);
/* Exact integer access for integer/bool types (int64 beyond 2^53 stays exact). */
int64_t mkb_dtype_load_i64(enum mkb_dtype dt, const void *base, int64_t i);
void mkb_dtype_store_i64(enum mkb_dtype dt, void *base, int64_t i, int64_t v);

/* Bit-level conversions (the building blocks of load/store). */
uint16_t mkb_f64_to_bf16(double v);
double mkb_bf16_to_f64(uint16_t b);
uint16_t mkb_f64_to_f16(double v);
double mkb_f16_to_f64(uint16_t b);
uint8_t mkb_f64_to_f8e4m3(double v);
double mkb_f8e4m3_to_f64(uint8_t b);
uint8_t mkb_f64_to_f8e5m2(double v);
double mkb_f8e5m2_to_f64(uint8_t b);
uint8_t mkb_f64_to_f4e2m1(double v); /* low nibble */
double mkb_f4e2m1_to_f64(uint8_t nibble);

#endif
