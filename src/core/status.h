/* Status codes and the relayed error trace.
 *
 * Every fallible function returns enum mkb_status. The first failure records a message with
 * mkb_error(); each caller that relays it with MKB_TRY() appends its file:line, so the trace
 * printed at the top reads like a short backtrace. The trace is per thread.
 * This file does not print anything by itself and never exits the process. */
#ifndef MKB_CORE_STATUS_H
#define MKB_CORE_STATUS_H

#include <stdarg.h>

enum mkb_status {
    MKB_OK = 0,
    MKB_ERR_INVALID,   /* bad input from the user or a file: exit code 2 */
    MKB_ERR_NOT_FOUND, /* a named thing does not exist: exit code 2 */
    MKB_ERR_CHECK,     /* the thing checked failed (e.g. a mismatch): exit code 1 */
    MKB_ERR_IO,        /* the file system or another system call failed: exit code 3 */
    MKB_ERR_NOMEM,     /* out of memory: exit code 3 */
    MKB_ERR_UNSUPPORTED, /* a valid request this build or backend cannot do: exit code 3 */
    MKB_ERR_INTERNAL,  /* a bug in mkb: exit code 3 */
};

/* Process exit codes, documented in the README. */
enum mkb_exit {
    MKB_EXIT_OK = 0,
    MKB_EXIT_CHECK = 1,
    MKB_EXIT_USAGE = 2,
    MKB_EXIT_SYSTEM = 3,
};

const char *mkb_status_name(enum mkb_status s);
int mkb_status_exit_code(enum mkb_status s);

/* Record a failure and return it: `return mkb_error(MKB_ERR_IO, "cannot open '%s': %s", p, e);`.
 * Replaces any earlier trace of this thread. */
enum mkb_status mkb_error(enum mkb_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
enum mkb_status mkb_verror(enum mkb_status s, const char *fmt, va_list ap);

/* Append "at file:line" to the current trace; used by MKB_TRY. */
enum mkb_status mkb_error_relay(enum mkb_status s, const char *file, int line);

/* Prefix the current message with more context: "reading 'x.json': <old message>". */
enum mkb_status mkb_error_wrap(enum mkb_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The current message (without the relay trace) and the full trace; never NULL. */
const char *mkb_error_message(void);
const char *mkb_error_trace(void);
void mkb_error_clear(void);

#define MKB_TRY(expr)                                                                             \
    do {                                                                                          \
        enum mkb_status mkb_try_s_ = (expr);                                                      \
        if (mkb_try_s_ != MKB_OK) return mkb_error_relay(mkb_try_s_, __FILE__, __LINE__);         \
    } while (0)

/* Programmer-bug checks that stay on in release builds. */
#define MKB_ASSERT(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) mkb_assert_fail(#cond, __FILE__, __LINE__);                                  \
    } while (0)
_Noreturn void mkb_assert_fail(const char *cond, const char *file, int line);

#endif
