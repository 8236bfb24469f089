/* The built-in agent loop (see agent.h). */
#include "agent/agent.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/files.h"
#include "agent/textproto.h"
#include "agent/transcript.h"
#include "core/log.h"

#define CONTEXT_RETRIES 4      /* trims tried after the server says the prompt is too long */
#define ELIDE_MIN 1024         /* old outputs shorter than this are kept as they are */
#define ELIDE_KEEP 256         /* bytes of an elided output that stay */
#define KEEP_RECENT_TURNS 3    /* the last turns are never elided or dropped */
#define NOTE_MAX_LINES 60      /* dropped-turn summaries kept in the note */
#define READ_MAX_BYTES 65536   /* read_file output */
#define DONE_CONFIRM_MIN_S 120 /* below this much time left, done is taken at once */

/* ---- small string helpers ---- */

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static void fmt_duration(double s, char *buf, size_t cap) {
    if (s < 0) s = 0;
    long t = (long)s;
    if (t >= 3600)
        snprintf(buf, cap, "%ldh %02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, cap, "%ldm %02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%lds", t);
}

/* ---- config ---- */

void mkb_agent_config_default(struct mkb_agent_config *c) {
    memset(c, 0, sizeof *c);
    mkb_chat_options_default(&c->chat);
    c->protocol = MKB_AGENT_AUTO;
    c->context_tokens = 131072;
    c->context_trigger = 0.8;
    c->command_timeout_s = 600;
    c->max_command_output = 16384;
    c->confirm_done = true;
    c->max_format_errors = 5;
}

const char *mkb_agent_stop_name(enum mkb_agent_stop s) {
    switch (s) {
    case MKB_AGENT_STOP_DONE: return "done";
    case MKB_AGENT_STOP_TIME: return "time";
    case MKB_AGENT_STOP_TURNS: return "max_turns";
    case MKB_AGENT_STOP_TOKENS: return "max_tokens";
    case MKB_AGENT_STOP_COST: return "max_cost";
    case MKB_AGENT_STOP_FORMAT: return "format_errors";
    case MKB_AGENT_STOP_CONTEXT: return "context";
    case MKB_AGENT_STOP_MODEL_ERROR: return "model_error";
    case MKB_AGENT_STOP_CANCELLED: return "cancelled";
    }
    return "unknown";
}

void mkb_agent_result_release(struct mkb_agent_result *r) {
    json_decref(r->usage);
    r->usage = NULL;
}

/* ---- prompts ---- */

static const char system_prompt[] =
    "You are an expert GPU kernel engineer working on your own in a Linux terminal. You are taking\n"
    "one timed attempt at a task of MetaKernelBench; the task statement is the first user message.\n"
    "\n"
    "How this works:\n"
    "- You act only through your tools. Each command runs in a fresh `bash -c` inside a sandbox,\n"
    "  starting in the workspace {WORKSPACE}: files you write there persist between commands;\n"
    "  the working directory, variables and background processes do not.\n"
    "- The sandbox has no network and no GPU. The task statement says how to get feedback from\n"
    "  a GPU; follow it exactly.\n"
    "- A command is stopped after its timeout ({TIMEOUT} s unless you ask for more, never past the\n"
    "  time you have left). Output over {OUTPUT} bytes is cut in the middle: send long output to a\n"
    "  file and read it with head, tail or grep.\n"
    "- After every result you see the budget left. When the time runs out the attempt ends\n"
    "  wherever it is and what is in the workspace is what counts: keep a working version in place\n"
    "  early and improve it from there.\n"
    "- Nobody will answer questions. Decide for yourself and keep going until the task is done.\n"
    "- When everything the task asks for is in place, end the attempt ({DONE}).\n";

static const char tools_done[] = "call the done tool";
static const char text_done[] = "reply with the line " MKB_TEXT_DONE_WORD;

const char *mkb_agent_system_prompt(void) { return system_prompt; }

/* The system prompt with its placeholders filled; malloc'ed. */
static char *render_system(const struct mkb_agent_config *cfg, const char *ws, bool text_mode) {
    const char *tpl = cfg->system_prompt ? cfg->system_prompt : system_prompt;
    char timeout[32], output[32];
    snprintf(timeout, sizeof timeout, "%.0f", cfg->command_timeout_s);
    snprintf(output, sizeof output, "%lld", (long long)cfg->max_command_output);
    const char *keys[] = {"{WORKSPACE}", "{TIMEOUT}", "{OUTPUT}", "{DONE}"};
    const char *vals[] = {ws, timeout, output, text_mode ? text_done : tools_done};
    size_t cap = strlen(tpl) + 4096 + strlen(ws) + (text_mode ? strlen(mkb_text_protocol_rules()) : 0);
    char *o = malloc(cap);
    if (!o) return NULL;
    size_t used = 0;
    for (const char *p = tpl; *p;) {
        bool hit = false;
        for (int k = 0; k < 4; k++) {
            size_t kn = strlen(keys[k]);
            if (!strncmp(p, keys[k], kn)) {
                size_t vn = strlen(vals[k]);
                if (used + vn + 1 >= cap) break;
                memcpy(o + used, vals[k], vn);
                used += vn;
                p += kn;
                hit = true;
                break;
            }
        }
        if (!hit) {
            if (used + 2 >= cap) break;
            o[used++] = *p++;
        }
    }
    o[used] = '\0';
    if (text_mode) {
        const char *rules = mkb_text_protocol_rules();
        snprintf(o + used, cap - used, "\n%s", rules);
    }
    return o;
}

/* The tools as the API wants them. New reference. */
static json_t *tool_specs(void) {
    const char *spec =
        "["
        "{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"description\":\"Run a shell command with bash -c "
        "in the workspace, inside the sandbox. Returns its output (stdout and stderr together) and exit code. Each "
        "call is a fresh shell: cd and variables do not persist, files do.\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"command\":{\"type\":\"string\",\"description\":\"the command line\"},\"timeout\":{"
        "\"type\":\"number\",\"description\":\"seconds before the command is stopped (default as the system "
        "prompt says)\"}},\"required\":[\"command\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"Read a text file of the "
        "workspace with line numbers.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":"
        "\"string\"},\"first_line\":{\"type\":\"integer\",\"description\":\"1-based line to start at (default "
        "1)\"},\"max_lines\":{\"type\":\"integer\",\"description\":\"lines to show (default all that fit)\"}},"
        "\"required\":[\"path\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"description\":\"Create or overwrite a file "
        "of the workspace with the given content (parent directories are created).\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
        "\"required\":[\"path\",\"content\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"edit_file\",\"description\":\"Replace one exact "
        "occurrence of old_text in a file of the workspace with new_text. old_text must occur exactly once, "
        "whitespace included.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":"
        "\"string\"},\"old_text\":{\"type\":\"string\"},\"new_text\":{\"type\":\"string\"}},\"required\":["
        "\"path\",\"old_text\",\"new_text\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"done\",\"description\":\"End the attempt. Call it only "
        "when everything the task asks for is in the workspace.\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"summary\":{\"type\":\"string\",\"description\":\"what you leave behind\"}}}}}"
        "]";
    return json_loads(spec, 0, NULL);
}

/* ---- the conversation ---- */

enum entry_kind { E_SYSTEM, E_INSTRUCTION, E_ASSISTANT, E_OBSERVATION, E_NUDGE };

struct entry {
    json_t *msg;
    enum entry_kind kind;
    int64_t turn;
    int64_t bytes; /* serialised size, for the context estimate */
    bool elided;
    char *summary; /* for assistant entries: what the turn did, one line */
};

struct convo {
    struct entry *v;
    int64_t n, cap;
    char *instruction; /* the instruction message as first sent (with the opening budget) */
    char *note;        /* what dropped turns did, appended to the instruction */
    int64_t dropped_turns;
    double bytes_per_token;
    int64_t extra_bytes; /* sent with every request besides the messages (the tool specs) */
};

static int64_t msg_bytes(const json_t *m) {
    char *s = json_dumps(m, JSON_COMPACT);
    int64_t n = s ? (int64_t)strlen(s) : 0;
    free(s);
    return n;
}

static enum mkb_status convo_push(struct convo *c, json_t *msg, enum entry_kind kind, int64_t turn, char *summary) {
    if (!msg) {
        free(summary);
        return mkb_error(MKB_ERR_NOMEM, "out of memory building a message");
    }
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 64;
        struct entry *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) {
            json_decref(msg);
            free(summary);
            return mkb_error(MKB_ERR_NOMEM, "out of memory growing the conversation");
        }
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = (struct entry){msg, kind, turn, msg_bytes(msg), false, summary};
    return MKB_OK;
}

static void convo_free(struct convo *c) {
    for (int64_t i = 0; i < c->n; i++) {
        json_decref(c->v[i].msg);
        free(c->v[i].summary);
    }
    free(c->v);
    free(c->instruction);
    free(c->note);
}

static int64_t convo_tokens(const struct convo *c) {
    int64_t b = c->extra_bytes;
    for (int64_t i = 0; i < c->n; i++) b += c->v[i].bytes;
    return (int64_t)((double)b / c->bytes_per_token);
}

static json_t *convo_messages(const struct convo *c) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < c->n; i++) json_array_append(a, c->v[i].msg);
    return a;
}

static void set_content(struct entry *e, const char *text) {
    json_object_set_new(e->msg, "content", json_string(text));
    e->bytes = msg_bytes(e->msg);
}

/* Shorten one old entry; true if it changed. */
static bool elide_entry(struct entry *e) {
    if (e->elided) return false;
    bool changed = false;
    if (e->kind == E_OBSERVATION || e->kind == E_NUDGE || e->kind == E_ASSISTANT) {
        const char *text = json_string_value(json_object_get(e->msg, "content"));
        size_t n = text ? strlen(text) : 0;
        if (n > ELIDE_MIN) {
            size_t keep = ELIDE_KEEP;
            while (keep > 0 && ((unsigned char)text[keep] & 0xc0) == 0x80) keep--; /* whole UTF-8 characters */
            char *s = xprintf("%.*s\n[... %zu bytes elided by mkb to fit the context window ...]", (int)keep, text,
                              n - keep);
            if (s) {
                set_content(e, s);
                free(s);
                changed = true;
            }
        }
    }
    if (e->kind == E_ASSISTANT) {
        /* long tool-call arguments (files written) shrink to a mention */
        json_t *calls = json_object_get(e->msg, "tool_calls");
        size_t i;
        json_t *call;
        json_array_foreach(calls, i, call) {
            json_t *fn = json_object_get(call, "function");
            const char *args = json_string_value(json_object_get(fn, "arguments"));
            if (!args || strlen(args) <= ELIDE_MIN) continue;
            json_t *a = json_loads(args, 0, NULL);
            if (!json_is_object(a)) {
                json_decref(a);
                continue;
            }
            const char *k;
            json_t *v;
            json_object_foreach(a, k, v) {
                const char *s = json_string_value(v);
                if (s && strlen(s) > 200) {
                    char note[96];
                    snprintf(note, sizeof note, "[%zu bytes elided by mkb to fit the context window]", strlen(s));
                    json_object_set_new(a, k, json_string(note));
                }
            }
            char *na = json_dumps(a, JSON_COMPACT);
            json_decref(a);
            if (na) {
                json_object_set_new(fn, "arguments", json_string(na));
                free(na);
                changed = true;
            }
        }
        if (changed) e->bytes = msg_bytes(e->msg);
    }
    e->elided = true;
    return changed;
}

/* Rewrite the instruction entry as the instruction plus the note on dropped turns. */
static void refresh_instruction(struct convo *c) {
    if (c->n < 2 || !c->note) return;
    char *s = xprintf("%s\n\n[mkb] To fit the model's context window, the %lld oldest turns of this attempt were "
                      "removed from the conversation. What they did (files they wrote are still in the "
                      "workspace):\n%s",
                      c->instruction, (long long)c->dropped_turns, c->note);
    if (s) {
        set_content(&c->v[1], s);
        free(s);
    }
}

static void note_add(struct convo *c, const char *line) {
    size_t old = c->note ? strlen(c->note) : 0;
    char *n = realloc(c->note, old + strlen(line) + 2);
    if (!n) return;
    c->note = n;
    strcpy(c->note + old, line);
    strcat(c->note, "\n");
    /* keep the last NOTE_MAX_LINES lines */
    int lines = 0;
    for (char *p = c->note; *p; p++) lines += *p == '\n';
    while (lines > NOTE_MAX_LINES) {
        char *nl = strchr(c->note, '\n');
        memmove(c->note, nl + 1, strlen(nl + 1) + 1);
        lines--;
    }
}

/* Index of the first entry of the turn after the protected head, or -1. */
static int64_t first_turn_start(const struct convo *c) {
    for (int64_t i = 2; i < c->n; i++)
        if (c->v[i].kind == E_ASSISTANT) return i;
    return -1;
}

static int64_t count_turns(const struct convo *c) {
    int64_t t = 0;
    for (int64_t i = 0; i < c->n; i++) t += c->v[i].kind == E_ASSISTANT;
    return t;
}

struct trim_stats {
    int64_t tokens_before, tokens_after, elided, dropped;
};

/* Make the estimate fit target tokens: elide old outputs, then drop the oldest turns. Never
 * touches the system prompt, the instruction or the last KEEP_RECENT_TURNS turns (the last one
 * when keep_recent is 1). */
static void trim(struct convo *c, int64_t target, int keep_recent, struct trim_stats *st) {
    st->tokens_before = convo_tokens(c);
    st->elided = st->dropped = 0;
    int64_t turns = count_turns(c);
    /* the index where the protected recent turns begin */
    int64_t recent = c->n, seen = 0;
    for (int64_t i = c->n - 1; i >= 2; i--) {
        if (c->v[i].kind == E_ASSISTANT && ++seen == keep_recent) {
            recent = i;
            break;
        }
    }
    if (turns < keep_recent) recent = 2;
    for (int64_t i = 2; i < recent && convo_tokens(c) > target; i++)
        if (elide_entry(&c->v[i])) st->elided++;
    while (convo_tokens(c) > target) {
        int64_t s = first_turn_start(c);
        if (s < 0 || s >= recent) break;
        int64_t e = s + 1;
        while (e < c->n && c->v[e].kind != E_ASSISTANT) e++;
        if (e > recent) break;
        if (c->v[s].summary) note_add(c, c->v[s].summary);
        for (int64_t i = s; i < e; i++) {
            json_decref(c->v[i].msg);
            free(c->v[i].summary);
        }
        memmove(c->v + s, c->v + e, (size_t)(c->n - e) * sizeof *c->v);
        c->n -= e - s;
        recent -= e - s;
        c->dropped_turns++;
        st->dropped++;
        refresh_instruction(c);
    }
    st->tokens_after = convo_tokens(c);
}

/* Bytes of serialised messages per token, as measured, kept within what text and code give. */
static double clamp_bpt(double bpt) {
    if (bpt < 1.5) return 1.5;
    if (bpt > 6) return 6;
    return bpt;
}

/* The numbers in a context-length error, where the server states them: the window
 * ("maximum context length is N tokens", "context size (N tokens)") and what was sent
 * ("resulted in M tokens", "you requested M tokens", "request (M tokens)"). 0 when absent. */
static void parse_context_error(const char *msg, int64_t *max_tok, int64_t *sent_tok) {
    static const char *const max_pats[] = {"maximum context length is ", "context size (", "context window of ",
                                           "context length of ", NULL};
    static const char *const sent_pats[] = {"resulted in ", "you requested ", "request (", "prompt has ", NULL};
    *max_tok = *sent_tok = 0;
    for (int i = 0; max_pats[i] && !*max_tok; i++) {
        const char *p = strcasestr(msg, max_pats[i]);
        if (p) *max_tok = strtoll(p + strlen(max_pats[i]), NULL, 10);
    }
    for (int i = 0; sent_pats[i] && !*sent_tok; i++) {
        const char *p = strcasestr(msg, sent_pats[i]);
        if (p) *sent_tok = strtoll(p + strlen(sent_pats[i]), NULL, 10);
    }
    if (*max_tok < 0) *max_tok = 0;
    if (*sent_tok < 0) *sent_tok = 0;
}

/* trim() keeping the last KEEP_RECENT_TURNS turns, then only the last one if that is not enough. */
static void fit(struct convo *c, int64_t target, struct trim_stats *ts) {
    trim(c, target, KEEP_RECENT_TURNS, ts);
    if (ts->tokens_after > target) {
        struct trim_stats more;
        trim(c, target, 1, &more);
        ts->elided += more.elided;
        ts->dropped += more.dropped;
        ts->tokens_after = more.tokens_after;
    }
}

/* ---- the run ---- */

struct run {
    const struct mkb_agent_config *cfg;
    const struct mkb_agent_task *task;
    const struct mkb_agent_host *host;
    struct mkb_agent_result *res;
    struct mkb_agent_transcript *tr;
    struct mkb_chat_client *chat;
    struct convo convo;
    struct mkb_workspace ws;
    const char *ws_shown;
    bool text_mode;
    bool tool_turns; /* a tool call has happened (no protocol switch after that) */
    double t0;
    json_t *calls; /* per-call usage list */
    bool cost_unknown;
    int64_t sub_offset; /* bytes of submissions_path already read */
    bool time_out;      /* a command hit the deadline */
    bool done;          /* the model ended the attempt */
    int64_t window;     /* the context window in tokens: the config's, or less when a server said so */
};

static double time_left(const struct run *r) { return r->task->deadline - mkb_chat_now(); }

static int64_t subs_left(const struct run *r) {
    if (r->host && r->host->submissions_left) return r->host->submissions_left(r->host->ctx);
    if (r->task->submissions_total > 0) {
        int64_t left = r->task->submissions_total - r->res->submissions_seen;
        return left < 0 ? 0 : left;
    }
    return -1;
}

/* "[mkb] budget left: ..." */
static char *budget_line(const struct run *r) {
    char t[32], parts[512];
    fmt_duration(time_left(r), t, sizeof t);
    int n = snprintf(parts, sizeof parts, "[mkb] budget left: %s of wall clock", t);
    int64_t sl = subs_left(r);
    if (sl >= 0 && n < (int)sizeof parts) {
        if (r->task->submissions_total > 0)
            n += snprintf(parts + n, sizeof parts - (size_t)n, "; %lld of %lld submissions", (long long)sl,
                          (long long)r->task->submissions_total);
        else
            n += snprintf(parts + n, sizeof parts - (size_t)n, "; %lld submissions", (long long)sl);
    }
    if (r->cfg->max_turns > 0 && n < (int)sizeof parts)
        n += snprintf(parts + n, sizeof parts - (size_t)n, "; %lld turns", (long long)(r->cfg->max_turns - r->res->turns));
    if (r->cfg->max_tokens > 0 && n < (int)sizeof parts)
        n += snprintf(parts + n, sizeof parts - (size_t)n, "; %lld tokens",
                      (long long)(r->cfg->max_tokens - r->res->tokens_in - r->res->tokens_out));
    if (r->cfg->max_cost > 0 && n < (int)sizeof parts)
        n += snprintf(parts + n, sizeof parts - (size_t)n, "; $%.2f of $%.2f", r->cfg->max_cost - r->res->cost_usd,
                      r->cfg->max_cost);
    return xprintf("%s", parts);
}

static enum mkb_status note_event(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static enum mkb_status note_event(struct run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    if (!s) return mkb_error(MKB_ERR_NOMEM, "out of memory");
    mkb_info("agent: %s", s);
    json_t *ev = json_pack("{s:s}", "text", s);
    free(s);
    return mkb_agent_transcript_add(r->tr, "note", ev);
}

/* New submissions from the host (or submissions.jsonl) into the transcript. */
static enum mkb_status poll_submissions(struct run *r) {
    json_t *subs = NULL;
    if (r->host && r->host->new_submissions) {
        subs = r->host->new_submissions(r->host->ctx);
    } else if (r->host && r->host->submissions_path) {
        FILE *f = fopen(r->host->submissions_path, "rb");
        if (!f) return MKB_OK;
        if (fseek(f, r->sub_offset, SEEK_SET) == 0) {
            subs = json_array();
            char *line = NULL;
            size_t cap = 0;
            ssize_t n;
            while (subs && (n = getline(&line, &cap, f)) > 0) {
                if (line[n - 1] != '\n') break; /* a line still being written */
                r->sub_offset += n;
                json_t *s = json_loads(line, 0, NULL);
                if (json_is_object(s))
                    json_array_append_new(subs, s);
                else
                    json_decref(s);
            }
            free(line);
        }
        fclose(f);
    }
    if (!subs) return MKB_OK;
    size_t i;
    json_t *s;
    enum mkb_status st = MKB_OK;
    json_array_foreach(subs, i, s) {
        r->res->submissions_seen++;
        if (r->host->skip_submission_events) continue;
        st = mkb_agent_transcript_add(r->tr, "submission", json_pack("{s:O, s:I}", "submission", s, "index",
                                                                (json_int_t)r->res->submissions_seen));
        if (st != MKB_OK) break;
    }
    json_decref(subs);
    return st;
}

/* Text of a message's content (a string, or text parts joined). malloc'ed; "" for none. */
static char *content_text(const json_t *msg) {
    const json_t *c = json_object_get(msg, "content");
    if (json_is_string(c)) return strdup(json_string_value(c));
    if (json_is_array(c)) {
        size_t total = 1, i;
        const json_t *p;
        json_array_foreach(c, i, p) {
            const char *t = json_string_value(json_object_get(p, "text"));
            if (t) total += strlen(t);
        }
        char *s = malloc(total);
        if (!s) return NULL;
        s[0] = '\0';
        json_array_foreach(c, i, p) {
            const char *t = json_string_value(json_object_get(p, "text"));
            if (t) strcat(s, t);
        }
        return s;
    }
    return strdup("");
}

/* The reasoning a reply carries (reasoning_content, reasoning), for the transcript. */
static const char *reasoning_text(const json_t *msg) {
    const char *s = json_string_value(json_object_get(msg, "reasoning_content"));
    if (!s) s = json_string_value(json_object_get(msg, "reasoning"));
    return s;
}

/* A one-line summary of an action for dropped-turn notes. */
static char *action_summary(int64_t turn, const char *tool, const char *detail) {
    char d[161];
    size_t n = 0;
    for (const char *p = detail ? detail : ""; *p && n < 160; p++) d[n++] = (*p == '\n' || *p == '\t') ? ' ' : *p;
    d[n] = '\0';
    return xprintf("- turn %lld: %s%s%s%s", (long long)turn, tool, d[0] ? ": " : "", d,
                   detail && strlen(detail) > 160 ? " ..." : "");
}

struct tool_out {
    char *text;     /* what the model reads */
    bool done;      /* the done tool */
    bool ran;       /* a command ran */
};

/* Run a bash command for the model; the text says how it ended. */
static enum mkb_status run_command(struct run *r, const char *command, double timeout, struct tool_out *o,
                                   json_t *ev) {
    double left = time_left(r);
    bool capped = false;
    if (timeout <= 0) timeout = r->cfg->command_timeout_s;
    if (timeout > left) timeout = left, capped = true;
    if (timeout <= 0) {
        o->text = strdup("[mkb] not run: the attempt's time budget has run out");
        r->time_out = true;
        return MKB_OK;
    }
    struct mkb_exec_result x;
    MKB_TRY(r->host->exec.exec(r->host->exec.ctx, command, timeout, r->cfg->max_command_output, &x));
    r->res->commands++;
    o->ran = true;
    char tail[512];
    if (x.timed_out && r->cfg->cancel && *r->cfg->cancel) {
        snprintf(tail, sizeof tail, "[mkb] the command was stopped after %.1f s: the run was interrupted", x.wall_s);
    } else if (x.timed_out && capped) {
        snprintf(tail, sizeof tail, "[mkb] the command was stopped after %.1f s: the attempt's time budget ran out",
                 x.wall_s);
        r->time_out = true;
    } else if (x.timed_out) {
        snprintf(tail, sizeof tail,
                 "[mkb] the command was stopped at its %.0f s timeout (pass a larger timeout if it needs longer)",
                 timeout);
    } else {
        snprintf(tail, sizeof tail, "[exit code %d, %.1f s]", x.exit_code, x.wall_s);
    }
    char trunc[256] = "";
    if (x.truncated)
        snprintf(trunc, sizeof trunc,
                 "\n[mkb] the output had %lld bytes; only the first and last %lld are shown (redirect it to a file "
                 "and read parts with head, tail or grep)",
                 (long long)x.output_bytes, (long long)(r->cfg->max_command_output / 2));
    size_t on = strlen(x.output);
    o->text = xprintf("%s%s%s%s", x.output, on && x.output[on - 1] != '\n' ? "\n" : "", tail, trunc);
    json_object_set_new(ev, "exit_code", json_integer(x.exit_code));
    json_object_set_new(ev, "timed_out", json_boolean(x.timed_out));
    json_object_set_new(ev, "wall_s", json_real(x.wall_s));
    json_object_set_new(ev, "output_bytes", json_integer(x.output_bytes));
    json_object_set_new(ev, "timeout_s", json_real(timeout));
    mkb_exec_result_release(&x);
    if (!o->text) return mkb_error(MKB_ERR_NOMEM, "out of memory");
    return MKB_OK;
}

/* Run one tool call by name with its parsed arguments (an object, or NULL with why_bad set). */
static enum mkb_status dispatch(struct run *r, const char *name, const json_t *args, const char *bad_args,
                                struct tool_out *o, json_t *ev, char **summary) {
    memset(o, 0, sizeof *o);
    if (bad_args) {
        o->text = xprintf("[mkb] error: the arguments of %s are not valid JSON (%s). Call it again with a JSON "
                          "object, e.g. {\"command\": \"ls\"} for bash.",
                          name, bad_args);
        return o->text ? MKB_OK : mkb_error(MKB_ERR_NOMEM, "out of memory");
    }
    if (!strcmp(name, "bash")) {
        const char *cmd = json_string_value(json_object_get(args, "command"));
        if (!cmd || !*cmd) {
            o->text = strdup("[mkb] error: bash needs a non-empty string argument \"command\"");
            return MKB_OK;
        }
        const json_t *to = json_object_get(args, "timeout");
        double timeout = json_is_number(to) ? json_number_value(to) : 0;
        if (json_is_string(to)) timeout = atof(json_string_value(to));
        *summary = action_summary(r->res->turns, "bash", cmd);
        return run_command(r, cmd, timeout, o, ev);
    }
    const char *path = json_string_value(json_object_get(args, "path"));
    if (!strcmp(name, "done")) {
        o->done = true;
        o->text = strdup("[mkb] ending the attempt");
        return MKB_OK;
    }
    if (!strcmp(name, "read_file") || !strcmp(name, "write_file") || !strcmp(name, "edit_file")) {
        if (!path) {
            o->text = xprintf("[mkb] error: %s needs a string argument \"path\"", name);
            return MKB_OK;
        }
        enum mkb_status s;
        char *text = NULL;
        if (!strcmp(name, "read_file")) {
            const json_t *fl = json_object_get(args, "first_line"), *ml = json_object_get(args, "max_lines");
            s = mkb_ws_read(&r->ws, path, json_is_integer(fl) ? (int64_t)json_integer_value(fl) : 1,
                            json_is_integer(ml) ? (int64_t)json_integer_value(ml) : 0,
                            READ_MAX_BYTES < r->cfg->max_command_output * 4 ? READ_MAX_BYTES
                                                                            : r->cfg->max_command_output * 4,
                            &text);
            *summary = action_summary(r->res->turns, "read_file", path);
        } else if (!strcmp(name, "write_file")) {
            const char *content = json_string_value(json_object_get(args, "content"));
            if (!content) {
                o->text = strdup("[mkb] error: write_file needs a string argument \"content\"");
                return MKB_OK;
            }
            s = mkb_ws_write(&r->ws, path, content, json_string_length(json_object_get(args, "content")), &text);
            *summary = action_summary(r->res->turns, "write_file", path);
        } else {
            const char *old_t = json_string_value(json_object_get(args, "old_text"));
            const char *new_t = json_string_value(json_object_get(args, "new_text"));
            if (!old_t || !new_t) {
                o->text = strdup("[mkb] error: edit_file needs string arguments \"old_text\" and \"new_text\"");
                return MKB_OK;
            }
            s = mkb_ws_edit(&r->ws, path, old_t, new_t, &text);
            *summary = action_summary(r->res->turns, "edit_file", path);
        }
        if (s == MKB_ERR_NOMEM) return s;
        if (s != MKB_OK) {
            o->text = xprintf("[mkb] error: %s", mkb_error_message());
            mkb_error_clear();
        } else {
            o->text = text;
        }
        json_object_set_new(ev, "ok", json_boolean(s == MKB_OK));
        return o->text ? MKB_OK : mkb_error(MKB_ERR_NOMEM, "out of memory");
    }
    o->text = xprintf("[mkb] error: there is no tool '%s'; the tools are bash, read_file, write_file, edit_file "
                      "and done",
                      name);
    return o->text ? MKB_OK : mkb_error(MKB_ERR_NOMEM, "out of memory");
}

/* The assistant message as it goes back to the API: role, content, tool_calls, and the
 * provider's reasoning field when it must be replayed. */
static json_t *assistant_entry(const struct run *r, const json_t *reply, const char *content) {
    json_t *m = json_pack("{s:s}", "role", "assistant");
    if (!m) return NULL;
    const json_t *calls = json_object_get(reply, "tool_calls");
    bool has_calls = json_is_array(calls) && json_array_size(calls) > 0;
    if (content && *content)
        json_object_set_new(m, "content", json_string(content));
    else
        json_object_set_new(m, "content", has_calls ? json_null() : json_string(""));
    if (has_calls && !r->text_mode) json_object_set(m, "tool_calls", (json_t *)calls);
    const char *rf = r->cfg->target.reasoning_field;
    if (rf[0]) {
        json_t *v = json_object_get(reply, rf);
        if (v && !json_is_null(v)) json_object_set(m, rf, v);
    }
    return m;
}

/* Record a model call's usage; false if it had no usable reply. */
static void account_call(struct run *r, const struct mkb_chat_reply *rep, json_t *ev) {
    const struct mkb_chat_usage *u = &rep->usage;
    r->res->calls++;
    r->res->model_s += u->wall_s;
    r->res->tokens_in += u->prompt_tokens;
    r->res->tokens_out += u->completion_tokens;
    r->res->tokens_cached += u->cached_tokens;
    r->res->tokens_reasoning += u->reasoning_tokens;
    double cost = 0;
    const char *cost_source = "none";
    if (u->cost_reported) {
        cost = u->cost;
        cost_source = "provider";
    } else if (r->cfg->price_in > 0 || r->cfg->price_out > 0) {
        double cached_price = r->cfg->price_cached > 0 ? r->cfg->price_cached : r->cfg->price_in;
        cost = ((double)(u->prompt_tokens - u->cached_tokens) * r->cfg->price_in +
                (double)u->cached_tokens * cached_price + (double)u->completion_tokens * r->cfg->price_out) /
               1e6;
        cost_source = "prices";
    } else if (rep->fail == MKB_CHAT_OK) {
        r->cost_unknown = true;
    }
    r->res->cost_usd += cost;
    json_t *call = json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:f, s:f, s:i, s:s}", "turn",
                             (json_int_t)r->res->turns, "prompt_tokens", (json_int_t)u->prompt_tokens,
                             "completion_tokens", (json_int_t)u->completion_tokens, "cached_tokens",
                             (json_int_t)u->cached_tokens, "reasoning_tokens", (json_int_t)u->reasoning_tokens, "cost",
                             cost, "cost_source", cost_source, "latency_s", u->latency_s, "wall_s", u->wall_s,
                             "retries", (int)json_array_size(rep->attempts), "finish_reason", rep->finish_reason);
    if (call) {
        if (rep->fail != MKB_CHAT_OK) json_object_set_new(call, "fail", json_string(mkb_chat_fail_name(rep->fail)));
        json_array_append(r->calls, call);
        json_object_update(ev, call);
        json_decref(call);
    }
    if (rep->attempts && json_array_size(rep->attempts)) json_object_set(ev, "attempts", rep->attempts);
    if (rep->model[0]) json_object_set_new(ev, "model", json_string(rep->model));
    if (rep->provider[0]) json_object_set_new(ev, "provider", json_string(rep->provider));
    if (rep->id[0]) json_object_set_new(ev, "id", json_string(rep->id));
    if (rep->usage_raw) json_object_set(ev, "usage", rep->usage_raw);
    json_object_set_new(ev, "http", json_integer(rep->http_status));
}

static enum mkb_status push_user(struct run *r, const char *text, enum entry_kind kind) {
    MKB_TRY(convo_push(&r->convo, json_pack("{s:s, s:s}", "role", "user", "content", text), kind, r->res->turns, NULL));
    return mkb_agent_transcript_add(r->tr, "message", json_pack("{s:s, s:s, s:I, s:s}", "role", "user", "content", text,
                                                          "turn", (json_int_t)r->res->turns, "kind",
                                                          kind == E_NUDGE ? "nudge" : "observation"));
}

/* The system entry for the current protocol. */
static enum mkb_status set_system(struct run *r) {
    char *sys = render_system(r->cfg, r->ws_shown, r->text_mode);
    if (!sys) return mkb_error(MKB_ERR_NOMEM, "out of memory");
    json_t *m = json_pack("{s:s, s:s}", "role", "system", "content", sys);
    if (!m) {
        free(sys);
        return mkb_error(MKB_ERR_NOMEM, "out of memory");
    }
    enum mkb_status st = mkb_agent_transcript_add(
        r->tr, "message", json_pack("{s:s, s:s, s:s}", "role", "system", "content", sys, "protocol",
                                    r->text_mode ? "text" : "tools"));
    free(sys);
    if (st != MKB_OK) {
        json_decref(m);
        return st;
    }
    if (r->convo.n == 0) return convo_push(&r->convo, m, E_SYSTEM, 0, NULL);
    json_decref(r->convo.v[0].msg);
    r->convo.v[0].msg = m;
    r->convo.v[0].bytes = msg_bytes(m);
    return st;
}

/* Append the budget to the last observation the model will read. */
static void append_budget(struct run *r, const char *extra) {
    if (r->convo.n == 0) return;
    struct entry *e = &r->convo.v[r->convo.n - 1];
    char *b = budget_line(r);
    const char *c = json_string_value(json_object_get(e->msg, "content"));
    char *s = xprintf("%s\n\n%s%s%s", c ? c : "", b ? b : "", extra ? "\n" : "", extra ? extra : "");
    if (s) set_content(e, s);
    free(s);
    free(b);
}

/* Checks before a turn; true (with stop set) when the attempt must end. */
static bool should_stop(struct run *r) {
    struct mkb_agent_result *res = r->res;
    const struct mkb_agent_config *cfg = r->cfg;
    if (cfg->cancel && *cfg->cancel) return res->stop = MKB_AGENT_STOP_CANCELLED, true;
    if (r->time_out || time_left(r) <= 0) return res->stop = MKB_AGENT_STOP_TIME, true;
    if (cfg->max_turns > 0 && res->turns >= cfg->max_turns) return res->stop = MKB_AGENT_STOP_TURNS, true;
    if (cfg->max_tokens > 0 && res->tokens_in + res->tokens_out >= cfg->max_tokens)
        return res->stop = MKB_AGENT_STOP_TOKENS, true;
    if (cfg->max_cost > 0 && res->cost_usd >= cfg->max_cost) return res->stop = MKB_AGENT_STOP_COST, true;
    return false;
}

/* The reply was a request to end: confirm once while budget is left. true: end now. */
static bool take_done(struct run *r, bool *pending) {
    if (!r->cfg->confirm_done || *pending || time_left(r) < DONE_CONFIRM_MIN_S) return true;
    *pending = true;
    return false;
}

static const char confirm_text[] =
    "[mkb] You asked to end the attempt while budget is left (above). What is in the workspace now is what "
    "counts. If everything the task asks for is in place, end the attempt again; otherwise keep working.";

/* One turn in tool-calling mode. */
static enum mkb_status tools_turn(struct run *r, const json_t *msg, const char *content, const char *finish,
                                  bool *done_pending, int *format_errors) {
    const json_t *calls = json_object_get(msg, "tool_calls");
    size_t ncalls = json_is_array(calls) ? json_array_size(calls) : 0;
    char *summary = NULL;
    if (ncalls == 0) {
        MKB_TRY(convo_push(&r->convo, assistant_entry(r, msg, content), E_ASSISTANT, r->res->turns,
                           action_summary(r->res->turns, "message", content)));
        (*format_errors)++;
        *done_pending = false;
        const char *why = !strcmp(finish, "length")
                              ? "[mkb] Your reply was cut off at the output token limit before any tool call. Be "
                                "shorter, and write large files in several steps."
                              : "[mkb] No tool was called. Keep working on the task with the tools; when "
                                "everything it asks for is in place, call done.";
        MKB_TRY(push_user(r, why, E_NUDGE));
        append_budget(r, NULL);
        return MKB_OK;
    }
    *format_errors = 0;
    r->tool_turns = true;
    /* some local servers send calls without ids; the replies must name one */
    for (size_t i = 0; i < ncalls; i++) {
        json_t *call = json_array_get(calls, i);
        if (!json_string_value(json_object_get(call, "id"))) {
            char id[48];
            snprintf(id, sizeof id, "call_%lld_%zu", (long long)r->res->turns, i);
            json_object_set_new(call, "id", json_string(id));
        }
        if (!json_object_get(call, "type")) json_object_set_new(call, "type", json_string("function"));
    }
    MKB_TRY(convo_push(&r->convo, assistant_entry(r, msg, content), E_ASSISTANT, r->res->turns, NULL));
    int64_t assistant_at = r->convo.n - 1;
    bool done = false, other = false;
    for (size_t i = 0; i < ncalls; i++) {
        const json_t *call = json_array_get(calls, i);
        const char *id = json_string_value(json_object_get(call, "id"));
        const json_t *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args_text = json_string_value(json_object_get(fn, "arguments"));
        json_t *args = NULL;
        char bad[256] = "";
        if (!name) name = "(no name)";
        if (args_text && *args_text) {
            json_error_t je;
            args = json_loads(args_text, JSON_DECODE_ANY, &je);
            if (!json_is_object(args)) snprintf(bad, sizeof bad, "%s", args ? "not an object" : je.text);
        } else if (json_is_object(json_object_get(fn, "arguments"))) {
            args = json_incref(json_object_get(fn, "arguments"));
        } else {
            args = json_object();
        }
        json_t *ev = json_pack("{s:s, s:s?, s:I}", "name", name, "call_id", id, "turn", (json_int_t)r->res->turns);
        if (args && json_is_object(args))
            json_object_set(ev, "arguments", args);
        else
            json_object_set_new(ev, "arguments_text", json_string(args_text ? args_text : ""));
        struct tool_out o;
        enum mkb_status st;
        if (r->time_out) {
            memset(&o, 0, sizeof o);
            o.text = strdup("[mkb] not run: the attempt's time budget has run out");
            st = o.text ? MKB_OK : mkb_error(MKB_ERR_NOMEM, "out of memory");
        } else {
            st = dispatch(r, name, json_is_object(args) ? args : NULL, bad[0] ? bad : NULL, &o, ev, &summary);
        }
        json_decref(args);
        if (st != MKB_OK) {
            json_decref(ev);
            free(summary);
            return st;
        }
        if (summary && !r->convo.v[assistant_at].summary) {
            r->convo.v[assistant_at].summary = summary;
        } else {
            free(summary);
        }
        summary = NULL;
        if (o.done)
            done = true;
        else
            other = true;
        json_object_set_new(ev, "output", json_string(o.text));
        MKB_TRY(mkb_agent_transcript_add(r->tr, "tool", ev));
        st = convo_push(&r->convo,
                        json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", id ? id : "", "content", o.text),
                        E_OBSERVATION, r->res->turns, NULL);
        free(o.text);
        MKB_TRY(st);
        if (o.ran) MKB_TRY(poll_submissions(r));
    }
    if (!r->convo.v[assistant_at].summary)
        r->convo.v[assistant_at].summary = action_summary(r->res->turns, done ? "done" : "tools", "");
    if (done && !other) {
        if (take_done(r, done_pending)) {
            r->res->stop = MKB_AGENT_STOP_DONE;
            r->done = true;
            return MKB_OK;
        }
        append_budget(r, confirm_text);
        return MKB_OK;
    }
    *done_pending = false;
    append_budget(r, done ? "[mkb] done was called together with other tools, so the attempt goes on; call done "
                            "alone to end it."
                          : NULL);
    return MKB_OK;
}

/* One turn in text mode. */
static enum mkb_status text_turn(struct run *r, const json_t *msg, const char *content, bool *done_pending,
                                 int *format_errors) {
    enum mkb_text_action kind;
    char *command = NULL;
    char why[512];
    enum mkb_status ps = mkb_text_parse(content, &kind, &command, why, sizeof why);
    if (ps == MKB_ERR_NOMEM) return mkb_error(MKB_ERR_NOMEM, "out of memory");
    if (ps != MKB_OK) {
        MKB_TRY(convo_push(&r->convo, assistant_entry(r, msg, content), E_ASSISTANT, r->res->turns,
                           action_summary(r->res->turns, "reply without an action", "")));
        (*format_errors)++;
        *done_pending = false;
        char *t = xprintf("[mkb] Format error: %s.\n\n%s", why, mkb_text_protocol_rules());
        if (!t) return mkb_error(MKB_ERR_NOMEM, "out of memory");
        MKB_TRY(mkb_agent_transcript_add(r->tr, "format_error", json_pack("{s:s, s:I}", "error", why, "turn",
                                                                    (json_int_t)r->res->turns)));
        enum mkb_status st = push_user(r, t, E_NUDGE);
        free(t);
        MKB_TRY(st);
        append_budget(r, NULL);
        return MKB_OK;
    }
    *format_errors = 0;
    if (kind == MKB_TEXT_DONE) {
        MKB_TRY(convo_push(&r->convo, assistant_entry(r, msg, content), E_ASSISTANT, r->res->turns,
                           action_summary(r->res->turns, "done", "")));
        MKB_TRY(mkb_agent_transcript_add(r->tr, "tool", json_pack("{s:s, s:I, s:s}", "name", "done", "turn",
                                                            (json_int_t)r->res->turns, "output", "")));
        if (take_done(r, done_pending)) {
            r->res->stop = MKB_AGENT_STOP_DONE;
            r->done = true;
            return MKB_OK;
        }
        MKB_TRY(push_user(r, confirm_text, E_NUDGE));
        append_budget(r, NULL);
        return MKB_OK;
    }
    *done_pending = false;
    MKB_TRY(convo_push(&r->convo, assistant_entry(r, msg, content), E_ASSISTANT, r->res->turns,
                       action_summary(r->res->turns, "bash", command)));
    json_t *ev = json_pack("{s:s, s:I, s:{s:s}}", "name", "bash", "turn", (json_int_t)r->res->turns, "arguments",
                           "command", command);
    struct tool_out o = {0};
    enum mkb_status st = run_command(r, command, 0, &o, ev);
    free(command);
    if (st != MKB_OK) {
        json_decref(ev);
        return st;
    }
    json_object_set_new(ev, "output", json_string(o.text));
    st = mkb_agent_transcript_add(r->tr, "tool", ev);
    if (st == MKB_OK) st = push_user(r, o.text, E_OBSERVATION);
    free(o.text);
    MKB_TRY(st);
    if (o.ran) MKB_TRY(poll_submissions(r));
    append_budget(r, NULL);
    return MKB_OK;
}

static json_t *usage_json(const struct run *r) {
    const struct mkb_agent_result *res = r->res;
    json_t *u = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:s, s:s, s:O}", "tokens_in",
                          (json_int_t)res->tokens_in, "tokens_out", (json_int_t)res->tokens_out, "tokens_cached",
                          (json_int_t)res->tokens_cached, "tokens_reasoning", (json_int_t)res->tokens_reasoning,
                          "agent_s", res->agent_s, "model_s", res->model_s, "turns", (json_int_t)res->turns,
                          "calls", (json_int_t)res->calls, "commands", (json_int_t)res->commands,
                          "submissions_seen", (json_int_t)res->submissions_seen, "stop", mkb_agent_stop_name(res->stop),
                          "protocol", res->protocol, "per_call", r->calls);
    if (!u) return NULL;
    json_object_set_new(u, "cost_usd", res->cost_known ? json_real(res->cost_usd) : json_null());
    json_object_set_new(u, "agent", json_string("builtin"));
    json_object_set_new(u, "model", json_string(r->cfg->target.model_id));
    if (res->stop == MKB_AGENT_STOP_MODEL_ERROR || res->stop == MKB_AGENT_STOP_CONTEXT) {
        json_object_set_new(u, "error", json_string(res->error));
        json_object_set_new(u, "model_fail", json_string(mkb_chat_fail_name(res->model_fail)));
    }
    return u;
}

static enum mkb_status start_event(struct run *r) {
    const struct mkb_agent_config *cfg = r->cfg;
    json_t *ev = json_pack("{s:o, s:s, s:I, s:f, s:I, s:f, s:I, s:I, s:f, s:f, s:I, s:s?}", "target",
                           mkb_model_target_json(&cfg->target), "protocol",
                           cfg->protocol == MKB_AGENT_TEXT ? "text" : cfg->protocol == MKB_AGENT_TOOLS ? "tools" : "auto",
                           "context_tokens", (json_int_t)cfg->context_tokens, "command_timeout_s",
                           cfg->command_timeout_s, "max_command_output", (json_int_t)cfg->max_command_output,
                           "budget_s", time_left(r), "submissions_total", (json_int_t)r->task->submissions_total,
                           "max_turns", (json_int_t)cfg->max_turns, "max_cost", cfg->max_cost, "request_timeout_s",
                           cfg->chat.request_timeout_s, "max_tokens", (json_int_t)cfg->max_tokens, "executor",
                           r->host->exec.describe);
    if (!ev) return mkb_error(MKB_ERR_NOMEM, "out of memory");
    if (cfg->chat.extra_body) json_object_set(ev, "extra_body", (json_t *)cfg->chat.extra_body);
    if (r->task->meta) json_object_set(ev, "meta", r->task->meta);
    json_object_set_new(ev, "workspace", json_string(r->ws_shown));
    time_t now = time(NULL);
    char iso[32];
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_object_set_new(ev, "started_at", json_string(iso));
    return mkb_agent_transcript_add(r->tr, "start", ev);
}

static enum mkb_status agent_loop(struct run *r) {
    const struct mkb_agent_config *cfg = r->cfg;
    struct mkb_agent_result *res = r->res;
    json_t *tools = tool_specs();
    if (!tools) return mkb_error(MKB_ERR_INTERNAL, "the tool specs do not parse");
    bool done_pending = false;
    r->convo.extra_bytes = r->text_mode ? 0 : msg_bytes(tools);
    int format_errors = 0, context_retries = 0;
    int64_t last_req_bytes = 0;
    enum mkb_status st = MKB_OK;
    while (st == MKB_OK) {
        MKB_TRY(mkb_agent_transcript_flush(r->tr));
        if (should_stop(r)) break;
        if (format_errors >= cfg->max_format_errors) {
            res->stop = MKB_AGENT_STOP_FORMAT;
            break;
        }
        /* context: trim before sending when the estimate is near the window */
        int64_t limit = (int64_t)((double)r->window * cfg->context_trigger);
        if (convo_tokens(&r->convo) > limit) {
            struct trim_stats ts;
            fit(&r->convo, (int64_t)((double)r->window * 0.6), &ts);
            st = mkb_agent_transcript_add(r->tr, "context",
                                    json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "action", "trim", "tokens_before",
                                              (json_int_t)ts.tokens_before, "tokens_after", (json_int_t)ts.tokens_after,
                                              "elided", (json_int_t)ts.elided, "dropped", (json_int_t)ts.dropped,
                                              "window", (json_int_t)r->window));
            if (st != MKB_OK) break;
        }
        json_t *req = json_pack("{s:o}", "messages", convo_messages(&r->convo));
        if (!req) {
            st = mkb_error(MKB_ERR_NOMEM, "out of memory building a request");
            break;
        }
        if (!r->text_mode) json_object_set(req, "tools", tools);
        if (cfg->max_output_tokens > 0) json_object_set_new(req, "max_tokens", json_integer(cfg->max_output_tokens));
        r->convo.extra_bytes = r->text_mode ? 0 : msg_bytes(tools);
        int64_t req_bytes = r->convo.extra_bytes;
        for (int64_t i = 0; i < r->convo.n; i++) req_bytes += r->convo.v[i].bytes;
        last_req_bytes = req_bytes;

        res->turns++;
        struct mkb_chat_reply rep;
        mkb_chat_client_set_deadline(r->chat, r->task->deadline);
        enum mkb_status cs = mkb_chat_complete(r->chat, req, &rep);
        json_decref(req);
        json_t *ev = json_pack("{s:I}", "turn", (json_int_t)res->turns);
        account_call(r, &rep, ev);
        if (cs != MKB_OK) json_object_set_new(ev, "error", json_string(mkb_error_message()));
        st = mkb_agent_transcript_add(r->tr, "call", ev);
        if (st != MKB_OK) {
            mkb_chat_reply_release(&rep);
            break;
        }
        if (cs != MKB_OK) {
            enum mkb_chat_fail f = rep.fail;
            mkb_chat_reply_release(&rep);
            res->turns--; /* a failed call is not a turn */
            if (f == MKB_CHAT_CONTEXT && context_retries < CONTEXT_RETRIES) {
                context_retries++;
                /* the estimate was too low: learn the window (and the bytes per token) from the
                 * server's message when it states them, else assume the window is a bit below
                 * what was just sent; then trim harder on each retry */
                int64_t est = convo_tokens(&r->convo), max_tok = 0, sent_tok = 0;
                parse_context_error(mkb_error_message(), &max_tok, &sent_tok);
                if (sent_tok > 0 && last_req_bytes > 0) {
                    r->convo.bytes_per_token = clamp_bpt((double)last_req_bytes / (double)sent_tok);
                    est = convo_tokens(&r->convo);
                }
                if (max_tok > 0 && max_tok < r->window)
                    r->window = max_tok;
                else if (max_tok <= 0 && est < r->window)
                    r->window = est * 9 / 10;
                else if (max_tok <= 0)
                    r->window = r->window * 9 / 10;
                struct trim_stats ts;
                double share = 0.6 - 0.12 * context_retries;
                fit(&r->convo, (int64_t)((double)r->window * share), &ts);
                st = mkb_agent_transcript_add(r->tr, "context",
                                        json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "action", "overflow", "tokens_before",
                                                  (json_int_t)ts.tokens_before, "tokens_after",
                                                  (json_int_t)ts.tokens_after, "elided", (json_int_t)ts.elided,
                                                  "dropped", (json_int_t)ts.dropped, "error", mkb_error_message()));
                mkb_error_clear();
                if (ts.elided == 0 && ts.dropped == 0) {
                    res->stop = MKB_AGENT_STOP_CONTEXT;
                    snprintf(res->error, sizeof res->error,
                             "the conversation does not fit the model's context window even with old turns removed");
                    break;
                }
                continue;
            }
            if (f == MKB_CHAT_CONTEXT) {
                res->stop = MKB_AGENT_STOP_CONTEXT;
                snprintf(res->error, sizeof res->error, "%s", mkb_error_message());
                mkb_error_clear();
                break;
            }
            if (f == MKB_CHAT_TOOLS && cfg->protocol == MKB_AGENT_AUTO && !r->text_mode && !r->tool_turns) {
                st = note_event(r, "the server does not do tool calling (%s); switching to the text protocol",
                                mkb_error_message());
                mkb_error_clear();
                r->text_mode = true;
                snprintf(res->protocol, sizeof res->protocol, "text");
                if (st == MKB_OK) st = set_system(r);
                continue;
            }
            if (f == MKB_CHAT_DEADLINE) {
                res->stop = MKB_AGENT_STOP_TIME;
                mkb_error_clear();
                break;
            }
            if (f == MKB_CHAT_CANCELLED) {
                res->stop = MKB_AGENT_STOP_CANCELLED;
                mkb_error_clear();
                break;
            }
            res->stop = MKB_AGENT_STOP_MODEL_ERROR;
            res->model_fail = f;
            snprintf(res->error, sizeof res->error, "%s", mkb_error_message());
            mkb_error_clear();
            break;
        }
        context_retries = 0;
        if (rep.usage.prompt_tokens > 0 && req_bytes > 0)
            r->convo.bytes_per_token = clamp_bpt((double)req_bytes / (double)rep.usage.prompt_tokens);
        char *content = content_text(rep.message);
        if (!content) {
            mkb_chat_reply_release(&rep);
            st = mkb_error(MKB_ERR_NOMEM, "out of memory");
            break;
        }
        json_t *mev = json_pack("{s:s, s:s, s:I, s:s}", "role", "assistant", "content", content, "turn",
                                (json_int_t)res->turns, "finish_reason", rep.finish_reason);
        const char *reasoning = reasoning_text(rep.message);
        if (mev && reasoning) json_object_set_new(mev, "reasoning", json_string(reasoning));
        const json_t *calls = json_object_get(rep.message, "tool_calls");
        if (mev && json_is_array(calls) && json_array_size(calls)) json_object_set(mev, "tool_calls", (json_t *)calls);
        st = mkb_agent_transcript_add(r->tr, "message", mev);
        if (st == MKB_OK) {
            if (r->text_mode)
                st = text_turn(r, rep.message, content, &done_pending, &format_errors);
            else
                st = tools_turn(r, rep.message, content, rep.finish_reason, &done_pending, &format_errors);
        }
        free(content);
        mkb_chat_reply_release(&rep);
        if (r->done) break;
    }
    json_decref(tools);
    return st;
}

enum mkb_status mkb_agent_run(const struct mkb_agent_config *cfg, const struct mkb_agent_task *task,
                              const struct mkb_agent_host *host, struct mkb_agent_result *out) {
    memset(out, 0, sizeof *out);
    if (!host || !host->exec.exec) return mkb_error(MKB_ERR_INTERNAL, "the agent has no executor");
    if (!task->instruction || !task->workspace || !task->transcript_path)
        return mkb_error(MKB_ERR_INTERNAL, "the agent task lacks an instruction, workspace or transcript path");
    struct run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.task = task;
    r.host = host;
    r.res = out;
    r.t0 = mkb_chat_now();
    r.ws.dir = task->workspace;
    r.ws.sandbox_ws = task->sandbox_workspace;
    r.ws_shown = task->sandbox_workspace ? task->sandbox_workspace : task->workspace;
    r.text_mode = cfg->protocol == MKB_AGENT_TEXT;
    r.convo.bytes_per_token = 3.0;
    r.window = cfg->context_tokens > 0 ? cfg->context_tokens : 131072;
    r.calls = json_array();
    snprintf(out->protocol, sizeof out->protocol, "%s", r.text_mode ? "text" : "tools");
    out->stop = MKB_AGENT_STOP_DONE;
    if (!r.calls) return mkb_error(MKB_ERR_NOMEM, "out of memory");

    enum mkb_status st = mkb_agent_transcript_open(task->transcript_path, task->t0, &r.tr);
    if (st != MKB_OK) {
        json_decref(r.calls);
        return mkb_error_relay(st, __FILE__, __LINE__);
    }
    struct mkb_chat_options copt = cfg->chat;
    copt.deadline = task->deadline;
    copt.stream = copt.stream || cfg->target.stream;
    if (!copt.cancel) copt.cancel = cfg->cancel;
    st = mkb_chat_client_new(&cfg->target, &copt, &r.chat);
    if (st == MKB_OK) st = start_event(&r);
    if (st == MKB_OK) st = set_system(&r);
    if (st == MKB_OK) {
        char *b = budget_line(&r);
        r.convo.instruction = xprintf("%s\n\n%s", task->instruction, b ? b : "");
        free(b);
        if (!r.convo.instruction) st = mkb_error(MKB_ERR_NOMEM, "out of memory");
    }
    if (st == MKB_OK)
        st = convo_push(&r.convo, json_pack("{s:s, s:s}", "role", "user", "content", r.convo.instruction), E_INSTRUCTION,
                        0, NULL);
    if (st == MKB_OK)
        st = mkb_agent_transcript_add(r.tr, "message", json_pack("{s:s, s:s, s:s}", "role", "user", "content",
                                                           r.convo.instruction, "kind", "instruction"));
    if (st == MKB_OK && cfg->max_cost > 0 && cfg->price_in <= 0 && cfg->price_out <= 0 &&
        strcmp(cfg->target.provider, "openrouter"))
        mkb_warn("--max-cost counts only costs the provider reports; %s may report none (give --price)",
                 cfg->target.provider);
    if (st == MKB_OK) st = agent_loop(&r);
    if (st == MKB_OK) st = poll_submissions(&r);

    out->agent_s = mkb_chat_now() - r.t0;
    out->cost_known = !r.cost_unknown;
    out->usage = usage_json(&r);
    if (r.tr) {
        json_t *ev = json_pack("{s:s, s:I, s:I, s:I, s:f}", "reason", mkb_agent_stop_name(out->stop), "turns",
                               (json_int_t)out->turns, "tokens_in", (json_int_t)out->tokens_in, "tokens_out",
                               (json_int_t)out->tokens_out, "agent_s", out->agent_s);
        if (ev) {
            json_object_set_new(ev, "cost_usd", out->cost_known ? json_real(out->cost_usd) : json_null());
            if (out->error[0]) json_object_set_new(ev, "error", json_string(out->error));
            if (st != MKB_OK) json_object_set_new(ev, "mkb_error", json_string(mkb_error_message()));
        }
        enum mkb_status es = mkb_agent_transcript_add(r.tr, "end", ev);
        enum mkb_status cs = mkb_agent_transcript_close(r.tr);
        if (st == MKB_OK) st = es != MKB_OK ? es : cs;
    }
    mkb_chat_client_free(r.chat);
    convo_free(&r.convo);
    json_decref(r.calls);
    if (st == MKB_OK && !out->usage) st = mkb_error(MKB_ERR_NOMEM, "out of memory");
    return st;
}
