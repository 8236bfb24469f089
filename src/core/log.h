/* Logging to stderr with levels; MKB_LOG=debug|info|warn|error selects the threshold.
 * Results never go through here: they go to stdout from the commands. */
#ifndef MKB_CORE_LOG_H
#define MKB_CORE_LOG_H

enum mkb_log_level { MKB_LOG_DEBUG, MKB_LOG_INFO, MKB_LOG_WARN, MKB_LOG_ERROR };

void mkb_log_set_level(enum mkb_log_level level);
enum mkb_log_level mkb_log_get_level(void);
void mkb_log_msg(enum mkb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define mkb_debug(...) mkb_log_msg(MKB_LOG_DEBUG, __VA_ARGS__)
#define mkb_info(...) mkb_log_msg(MKB_LOG_INFO, __VA_ARGS__)
#define mkb_warn(...) mkb_log_msg(MKB_LOG_WARN, __VA_ARGS__)

#endif
