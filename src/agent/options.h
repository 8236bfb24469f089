/* The built-in agent's command-line options, shared by every command that runs it (`mkb run`,
 * `mkb agent`): one getopt_long table fragment, one parser, one help text, and the step that
 * turns them and a model id into a struct mkb_agent_config (resolving the provider and key).
 *
 * It does not parse the model id itself, --help or anything not about the agent; a command adds
 * MKB_AGENT_LONG_OPTIONS to its own table and hands codes >= MKB_AGENT_OPT_BASE to
 * mkb_agent_option(). Ownership: struct mkb_agent_cli owns the parsed extra body and system
 * prompt; mkb_agent_cli_release() frees them; a config made from it borrows them, so the cli
 * struct must outlive the config. */
#ifndef MKB_AGENT_OPTIONS_H
#define MKB_AGENT_OPTIONS_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "core/status.h"

#define MKB_AGENT_OPT_BASE 0x4100

enum mkb_agent_opt {
    MKB_AGENT_OPT_BASE_URL = MKB_AGENT_OPT_BASE,
    MKB_AGENT_OPT_API_KEY_ENV,
    MKB_AGENT_OPT_ENV_FILE,
    MKB_AGENT_OPT_PROTOCOL,
    MKB_AGENT_OPT_CONTEXT,
    MKB_AGENT_OPT_MAX_TURNS,
    MKB_AGENT_OPT_MAX_TOKENS,
    MKB_AGENT_OPT_MAX_COST,
    MKB_AGENT_OPT_PRICE,
    MKB_AGENT_OPT_EXTRA_BODY,
    MKB_AGENT_OPT_REQUEST_TIMEOUT,
    MKB_AGENT_OPT_MAX_ATTEMPTS,
    MKB_AGENT_OPT_COMMAND_TIMEOUT,
    MKB_AGENT_OPT_COMMAND_OUTPUT,
    MKB_AGENT_OPT_MAX_OUTPUT_TOKENS,
    MKB_AGENT_OPT_NO_CONFIRM_DONE,
    MKB_AGENT_OPT_SYSTEM_PROMPT,
    MKB_AGENT_OPT_STREAM,
    MKB_AGENT_OPT_NO_STREAM,
    MKB_AGENT_OPT_END
};

/* Entries for a getopt_long table (no terminator): {"base-url", required_argument, 0, code}... */
#define MKB_AGENT_LONG_OPTIONS                                                                    \
    {"base-url", required_argument, 0, MKB_AGENT_OPT_BASE_URL},                                   \
        {"api-key-env", required_argument, 0, MKB_AGENT_OPT_API_KEY_ENV},                         \
        {"env-file", required_argument, 0, MKB_AGENT_OPT_ENV_FILE},                               \
        {"protocol", required_argument, 0, MKB_AGENT_OPT_PROTOCOL},                               \
        {"context-tokens", required_argument, 0, MKB_AGENT_OPT_CONTEXT},                          \
        {"max-turns", required_argument, 0, MKB_AGENT_OPT_MAX_TURNS},                             \
        {"max-tokens", required_argument, 0, MKB_AGENT_OPT_MAX_TOKENS},                           \
        {"max-cost", required_argument, 0, MKB_AGENT_OPT_MAX_COST},                               \
        {"price", required_argument, 0, MKB_AGENT_OPT_PRICE},                                     \
        {"extra-body", required_argument, 0, MKB_AGENT_OPT_EXTRA_BODY},                           \
        {"request-timeout", required_argument, 0, MKB_AGENT_OPT_REQUEST_TIMEOUT},                 \
        {"max-attempts", required_argument, 0, MKB_AGENT_OPT_MAX_ATTEMPTS},                       \
        {"command-timeout", required_argument, 0, MKB_AGENT_OPT_COMMAND_TIMEOUT},                 \
        {"command-output", required_argument, 0, MKB_AGENT_OPT_COMMAND_OUTPUT},                  \
        {"max-output-tokens", required_argument, 0, MKB_AGENT_OPT_MAX_OUTPUT_TOKENS},             \
        {"no-confirm-done", no_argument, 0, MKB_AGENT_OPT_NO_CONFIRM_DONE},                       \
        {"system-prompt", required_argument, 0, MKB_AGENT_OPT_SYSTEM_PROMPT},                     \
        {"stream", no_argument, 0, MKB_AGENT_OPT_STREAM},                                         \
        {"no-stream", no_argument, 0, MKB_AGENT_OPT_NO_STREAM}

struct mkb_agent_cli {
    struct mkb_model_options model; /* base_url, key_env, env_file (borrowed from argv) */
    struct mkb_agent_config cfg;    /* everything but the target, filled as options are parsed */
    int stream;                     /* 1 --stream, 0 --no-stream, -1 the provider's default */
    json_t *extra_body;             /* owned */
    char *system_prompt;            /* owned */
};

/* Defaults (mkb_agent_config_default()). */
void mkb_agent_cli_init(struct mkb_agent_cli *o);
void mkb_agent_cli_release(struct mkb_agent_cli *o);

/* True if code is one of MKB_AGENT_LONG_OPTIONS. */
bool mkb_agent_is_option(int code);
/* Apply one option; MKB_ERR_INVALID with a message naming the option for a bad value. */
enum mkb_status mkb_agent_option(struct mkb_agent_cli *o, int code, const char *arg);
/* Resolve the model (provider, URL, key) and return the finished config in *cfg (which borrows
 * from o). */
enum mkb_status mkb_agent_cli_config(struct mkb_agent_cli *o, const char *model_id, struct mkb_agent_config *cfg);

/* The options' help, for a command's --help (each line indented by two spaces). */
extern const char mkb_agent_options_help[];

#endif
