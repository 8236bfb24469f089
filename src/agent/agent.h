/* The built-in agent: a terminal agent in C that takes one trial with any OpenAI-compatible model.
 *
 * The loop: a system prompt and the task's instruction (with the skill, when the arm has one);
 * each turn one model call, then the tools it asked for — bash (run in the trial's sandbox
 * through struct mkb_executor, with a per-command timeout and head+tail truncated output),
 * read_file / write_file / edit_file (confined to the workspace), done — and the budget left
 * appended to what the model reads next. Models without tool calling get a strict text protocol
 * (exactly one ```bash block or the line TASK_COMPLETE per reply; anything else is re-asked).
 * When the conversation nears the model's context window, old command output is elided, then
 * the oldest turns are dropped with a note naming what they ran; the system prompt and the
 * instruction are never touched. It stops when the model is done, the wall clock or a turn,
 * token or cost cap is spent, or the model cannot be reached.
 *
 * Every call's usage (prompt, completion, cached and reasoning tokens, cost, latency, retries)
 * and the whole conversation, with the trial's submissions interleaved as they happen, go to the
 * transcript (transcript.h); totals come back in struct mkb_agent_result.
 *
 * It does not grade, count or accept submissions (the trial's mailbox does: the instruction
 * says how to submit) and does not decide what a trial's record says (the runner does).
 * Ownership: the config and task are borrowed for the call; the result's JSON is a new
 * reference released by mkb_agent_result_release(). */
#ifndef MKB_AGENT_AGENT_H
#define MKB_AGENT_AGENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/chat.h"
#include "agent/exec.h"
#include "agent/provider.h"
#include "core/status.h"

enum mkb_agent_protocol {
    MKB_AGENT_AUTO,  /* tool calls; switch to text if the server refuses tools */
    MKB_AGENT_TOOLS, /* tool calls only */
    MKB_AGENT_TEXT,  /* the text protocol only */
};

struct mkb_agent_config {
    struct mkb_model_target target;
    struct mkb_chat_options chat; /* deadline is set by the agent from the budget */
    enum mkb_agent_protocol protocol;
    int64_t context_tokens;    /* the model's context window: 131072 */
    double context_trigger;    /* trim when the prompt would pass this share of it: 0.8 */
    int64_t max_output_tokens; /* sent as max_tokens; 0 leaves it to the server */
    double command_timeout_s;  /* default per bash command (the model may ask for more): 600 */
    int64_t max_command_output; /* bytes of a command's output shown to the model: 16384 */
    bool confirm_done;         /* ask once more before ending with budget left: true */
    int max_format_errors;     /* consecutive replies without a usable action before giving up: 5 */
    double price_in, price_out, price_cached; /* USD per million tokens, for the cost when the
                                                 provider reports none; 0 for unknown */
    const char *system_prompt; /* replaces the built-in system prompt; NULL for it */
    /* caps; 0 for none */
    int64_t max_turns;
    int64_t max_tokens; /* prompt + completion over the attempt */
    double max_cost;    /* USD */
    const volatile sig_atomic_t *cancel; /* set (e.g. by SIGINT) to stop between steps */
};

/* Defaults as documented on each field (chat options from mkb_chat_options_default()). */
void mkb_agent_config_default(struct mkb_agent_config *c);

struct mkb_agent_task {
    const char *instruction;     /* the rendered task text, skill included */
    const char *workspace;       /* host path of the workspace (file tools act here) */
    const char *sandbox_workspace; /* the same directory as commands see it; NULL if the same */
    const char *transcript_path; /* where the transcript goes (zstd-compressed JSON lines) */
    double t0;                   /* mkb_chat_now() time the trial started (transcript times count
                                    from it); 0 for the start of the call */
    double deadline;             /* mkb_chat_now() time the attempt ends (wall clock budget) */
    int64_t submissions_total;   /* the attempt's submission budget, 0 if none or unknown */
    json_t *meta;                /* borrowed: written into the transcript's start event */
};

/* What the agent needs from the trial around it. */
struct mkb_agent_host {
    struct mkb_executor exec;
    void *ctx;
    /* Submissions made since the last call, as an array of JSON objects (new reference; NULL or
     * empty for none). Called after every command. NULL: the agent reads new lines of
     * submissions_path instead (when set). */
    json_t *(*new_submissions)(void *ctx);
    /* Submissions left, -1 when unknown. NULL: submissions_total minus those seen. */
    int64_t (*submissions_left)(void *ctx);
    const char *submissions_path; /* a submissions.jsonl to follow; NULL for none */
    bool skip_submission_events;  /* count submissions but leave them out of the transcript
                                     (the runner logs them itself) */
};

enum mkb_agent_stop {
    MKB_AGENT_STOP_DONE,        /* the model said it was done */
    MKB_AGENT_STOP_TIME,        /* the wall clock budget ran out */
    MKB_AGENT_STOP_TURNS,       /* max_turns */
    MKB_AGENT_STOP_TOKENS,      /* max_tokens */
    MKB_AGENT_STOP_COST,        /* max_cost */
    MKB_AGENT_STOP_FORMAT,      /* max_format_errors replies in a row had no usable action */
    MKB_AGENT_STOP_CONTEXT,     /* the conversation cannot be made to fit the context window */
    MKB_AGENT_STOP_MODEL_ERROR, /* the model could not be reached or refused the request */
    MKB_AGENT_STOP_CANCELLED,   /* the cancel flag was set */
};
const char *mkb_agent_stop_name(enum mkb_agent_stop s);

struct mkb_agent_result {
    enum mkb_agent_stop stop;
    enum mkb_chat_fail model_fail; /* for STOP_MODEL_ERROR: why (auth and unknown_model are the
                                      user's to fix; the others may pass on a rerun) */
    char error[1024];              /* for STOP_MODEL_ERROR and STOP_CONTEXT */
    int64_t turns, calls, commands, submissions_seen;
    int64_t tokens_in, tokens_out, tokens_cached, tokens_reasoning;
    double cost_usd;    /* reported, or from the prices; 0 when neither */
    bool cost_known;    /* every call's cost was reported or priced */
    double agent_s;     /* wall time of the attempt */
    double model_s;     /* time spent in model calls */
    char protocol[8];   /* "tools" or "text": what was used in the end */
    json_t *usage;      /* the record's usage object: the fields above, per-call list in "calls" */
};
void mkb_agent_result_release(struct mkb_agent_result *r);

/* Run one attempt. The status is for failures of mkb itself (the transcript cannot be written,
 * the executor is broken, out of memory); the model's failures and every budget end are results
 * (stop). */
enum mkb_status mkb_agent_run(const struct mkb_agent_config *cfg, const struct mkb_agent_task *task,
                              const struct mkb_agent_host *host, struct mkb_agent_result *out);

/* The built-in system prompt (for --help and the docs). */
const char *mkb_agent_system_prompt(void);

#endif
