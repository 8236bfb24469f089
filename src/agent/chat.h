/* The chat-completions client: one POST <base>/chat/completions per call through libcurl, with
 * timeouts, retries (exponential backoff with jitter, Retry-After honoured) on 429, 5xx, timeouts,
 * dropped connections and malformed replies, and the usage each call reports: prompt, completion,
 * cached and reasoning tokens, the cost when the provider gives it, the latency.
 *
 * Failures that retrying cannot fix come back at once, classified (enum mkb_chat_fail) so the
 * agent can react: a rejected key, an unknown model, a prompt over the context window, a server
 * without tool calling. Nothing waits or sends past the options' deadline.
 * With stream set it asks for server-sent events and assembles them into the same reply (nothing
 * is shown as it arrives); a stream that stalls is a failed attempt.
 * It does not keep a conversation or count a budget: the agent loop (agent.h) does.
 *
 * Ownership: mkb_chat_client_new() returns a client freed with mkb_chat_client_free(); a reply's
 * json fields are new references released together by mkb_chat_reply_release(). The client
 * keeps a copy of the target and the options (extra_body is borrowed and must outlive it). */
#ifndef MKB_AGENT_CHAT_H
#define MKB_AGENT_CHAT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/provider.h"
#include "core/status.h"

/* Multiplies every wait between attempts, Retry-After included (tests set it to 0.001 so a
 * scripted 429 with Retry-After: 2 costs 2 ms). Read by mkb_chat_options_default(). */
#define MKB_RETRY_SCALE_ENV "MKB_AGENT_RETRY_SCALE"

struct mkb_chat_options {
    double request_timeout_s; /* one attempt, connect to last byte: 600 */
    double connect_timeout_s; /* 30 */
    int max_attempts;         /* attempts per call, the first included: 8 */
    double retry_base_s;      /* first backoff: 2, doubling per attempt */
    double retry_max_s;       /* longest backoff: 120 (a Retry-After may ask for up to 600) */
    double retry_scale;       /* see MKB_RETRY_SCALE_ENV: 1 */
    double deadline;          /* mkb_chat_now() time after which nothing is sent or waited: 0 none */
    const volatile sig_atomic_t *cancel; /* when non-NULL and set, the call stops: NULL */
    const json_t *extra_body; /* object merged into every request (provider routing, reasoning
                                 settings, sampling); borrowed; NULL for none */
    bool stream;              /* ask for server-sent events and put the reply back together
                                 (some models answer only so): false */
    double stall_s;           /* with stream: an attempt that receives nothing this long fails: 300 */
};

/* Defaults as documented above, retry_scale from MKB_AGENT_RETRY_SCALE when set. */
void mkb_chat_options_default(struct mkb_chat_options *o);

enum mkb_chat_fail {
    MKB_CHAT_OK = 0,
    MKB_CHAT_AUTH,      /* 401/403: the key was rejected */
    MKB_CHAT_MODEL,     /* the provider does not know the model */
    MKB_CHAT_CONTEXT,   /* the prompt does not fit the model's context window */
    MKB_CHAT_TOOLS,     /* the server does not do tool calling */
    MKB_CHAT_REQUEST,   /* another request error (4xx) or a bad URL */
    MKB_CHAT_DEADLINE,  /* the deadline came before a reply */
    MKB_CHAT_CANCELLED, /* the cancel flag was set */
    MKB_CHAT_EXHAUSTED, /* every attempt failed with a retryable error */
};
const char *mkb_chat_fail_name(enum mkb_chat_fail f);

struct mkb_chat_usage {
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;    /* prompt tokens served from the provider's cache */
    int64_t reasoning_tokens; /* part of completion_tokens */
    double cost;              /* USD as the provider reported it */
    bool cost_reported;
    double latency_s; /* the successful attempt, request to last byte */
    double wall_s;    /* the whole call, retries and waits included */
};

struct mkb_chat_reply {
    json_t *message;        /* the assistant message (role, content, tool_calls, reasoning...) */
    json_t *attempts;       /* one object per failed attempt: http, error, wait_s */
    json_t *usage_raw;      /* the provider's usage object as sent, or NULL */
    char finish_reason[32]; /* "stop", "tool_calls", "length", ... or "" */
    char model[256];        /* the model that answered, as the server names it */
    char id[128];           /* the server's completion id */
    char provider[64];      /* the upstream provider when the server names one (OpenRouter) */
    struct mkb_chat_usage usage;
    enum mkb_chat_fail fail; /* MKB_CHAT_OK on success; set on every failure */
    int http_status;         /* of the last attempt, 0 when none answered */
};

struct mkb_chat_client;

enum mkb_status mkb_chat_client_new(const struct mkb_model_target *target, const struct mkb_chat_options *opt,
                                    struct mkb_chat_client **out);
void mkb_chat_client_free(struct mkb_chat_client *c);
/* Change the deadline (mkb_chat_now() seconds, 0 for none) for the calls that follow. */
void mkb_chat_client_set_deadline(struct mkb_chat_client *c, double deadline);

/* One call. request is the body without "model" (messages, tools, max_tokens...); the client
 * adds the model and merges extra_body. On failure *out is still filled (fail, http_status,
 * attempts) and must be released; the status carries a message naming the cause. */
enum mkb_status mkb_chat_complete(struct mkb_chat_client *c, const json_t *request, struct mkb_chat_reply *out);
void mkb_chat_reply_release(struct mkb_chat_reply *r);

/* Monotonic seconds: the clock of deadlines. */
double mkb_chat_now(void);

/* Parse an HTTP Retry-After value (delta seconds or an HTTP date) into seconds from now;
 * -1 when it is neither. now_epoch is the current time for the date form. */
double mkb_chat_parse_retry_after(const char *value, double now_epoch);

#endif
