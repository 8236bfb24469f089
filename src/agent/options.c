/* The built-in agent's command-line options (see options.h). */
#include "agent/options.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"

const char mkb_agent_options_help[] =
    "  --base-url URL        any OpenAI-compatible server (vLLM, llama.cpp, SGLang, a proxy);\n"
    "                        the model id is then sent as written, minus a known provider prefix\n"
    "  --api-key-env VAR     read the API key from VAR (default: the provider's, e.g.\n"
    "                        OPENROUTER_API_KEY; MKB_API_KEY with --base-url, where it is optional)\n"
    "  --env-file PATH       read keys from PATH when not in the environment (default ./.env)\n"
    "  --protocol P          auto (tool calls, falling back to text when the server has none),\n"
    "                        tools, or text (one ```bash block per reply)         [auto]\n"
    "  --context-tokens N    the model's context window; old output is trimmed near it [131072]\n"
    "  --max-turns N         end the attempt after N model replies                  [none]\n"
    "  --max-tokens N        end it after N prompt + completion tokens               [none]\n"
    "  --max-cost USD        end it once the cost reaches USD                        [none]\n"
    "  --price IN,OUT[,CACHED]  USD per million prompt, completion (and cached prompt) tokens,\n"
    "                        for the cost when the provider reports none\n"
    "  --extra-body JSON|@FILE  merged into every request: provider routing (OpenRouter's\n"
    "                        {\"provider\": {\"order\": [...]}}), reasoning effort, sampling\n"
    "  --request-timeout S   one model call, connect to last byte                    [600]\n"
    "  --max-attempts N      tries per model call on 429, 5xx and dropped connections [8]\n"
    "  --command-timeout S   default timeout of one shell command                    [600]\n"
    "  --command-output N    bytes of a command's output shown to the model         [16384]\n"
    "  --max-output-tokens N  max_tokens of each reply                  [the server's default]\n"
    "  --no-confirm-done     end at the first 'done' instead of asking once more\n"
    "  --stream, --no-stream ask for streamed replies (assembled before use), or not\n"
    "                        [on for dashscope/, whose thinking models answer only so; else off]\n"
    "  --system-prompt FILE  replace the built-in system prompt ({WORKSPACE}, {TIMEOUT},\n"
    "                        {OUTPUT} and {DONE} are filled in)\n"
    "  Waits between retries are multiplied by $" MKB_RETRY_SCALE_ENV " (default 1).\n";

void mkb_agent_cli_init(struct mkb_agent_cli *o) {
    memset(o, 0, sizeof *o);
    o->stream = -1;
    mkb_agent_config_default(&o->cfg);
}

void mkb_agent_cli_release(struct mkb_agent_cli *o) {
    json_decref(o->extra_body);
    free(o->system_prompt);
    o->extra_body = NULL;
    o->system_prompt = NULL;
}

bool mkb_agent_is_option(int code) { return code >= MKB_AGENT_OPT_BASE && code < MKB_AGENT_OPT_END; }

static const char *name_of(int code) {
    static const struct option opts[] = {MKB_AGENT_LONG_OPTIONS, {0, 0, 0, 0}};
    for (int i = 0; opts[i].name; i++)
        if (opts[i].val == code) return opts[i].name;
    return "?";
}

static enum mkb_status number(int code, const char *arg, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || errno || !isfinite(v) || v < lo)
        return mkb_error(MKB_ERR_INVALID, "--%s must be a number >= %g, not '%s'", name_of(code), lo, arg);
    *out = v;
    return MKB_OK;
}

static enum mkb_status integer(int code, const char *arg, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end == arg || *end || errno || v < lo)
        return mkb_error(MKB_ERR_INVALID, "--%s must be an integer >= %lld, not '%s'", name_of(code), (long long)lo, arg);
    *out = v;
    return MKB_OK;
}

enum mkb_status mkb_agent_option(struct mkb_agent_cli *o, int code, const char *arg) {
    struct mkb_agent_config *c = &o->cfg;
    int64_t n;
    double d;
    switch ((enum mkb_agent_opt)code) {
    case MKB_AGENT_OPT_BASE_URL: o->model.base_url = arg; return MKB_OK;
    case MKB_AGENT_OPT_API_KEY_ENV: o->model.key_env = arg; return MKB_OK;
    case MKB_AGENT_OPT_ENV_FILE: o->model.env_file = arg; return MKB_OK;
    case MKB_AGENT_OPT_PROTOCOL:
        if (!strcmp(arg, "auto"))
            c->protocol = MKB_AGENT_AUTO;
        else if (!strcmp(arg, "tools"))
            c->protocol = MKB_AGENT_TOOLS;
        else if (!strcmp(arg, "text"))
            c->protocol = MKB_AGENT_TEXT;
        else
            return mkb_error(MKB_ERR_INVALID, "--protocol must be auto, tools or text, not '%s'", arg);
        return MKB_OK;
    case MKB_AGENT_OPT_CONTEXT:
        MKB_TRY(integer(code, arg, 1024, &c->context_tokens));
        return MKB_OK;
    case MKB_AGENT_OPT_MAX_TURNS: MKB_TRY(integer(code, arg, 1, &c->max_turns)); return MKB_OK;
    case MKB_AGENT_OPT_MAX_TOKENS: MKB_TRY(integer(code, arg, 1, &c->max_tokens)); return MKB_OK;
    case MKB_AGENT_OPT_MAX_COST:
        MKB_TRY(number(code, arg, 0, &c->max_cost));
        if (c->max_cost <= 0) return mkb_error(MKB_ERR_INVALID, "--max-cost must be positive, not '%s'", arg);
        return MKB_OK;
    case MKB_AGENT_OPT_PRICE: {
        double v[3] = {0, 0, 0};
        int k = 0;
        const char *p = arg;
        while (k < 3) {
            char *end;
            errno = 0;
            v[k] = strtod(p, &end);
            if (end == p || errno || !isfinite(v[k]) || v[k] < 0) break;
            k++;
            if (*end == '\0') {
                p = end;
                break;
            }
            if (*end != ',') break;
            p = end + 1;
        }
        if (k < 2 || *p)
            return mkb_error(MKB_ERR_INVALID,
                             "--price must be IN,OUT or IN,OUT,CACHED in USD per million tokens, not '%s'", arg);
        c->price_in = v[0];
        c->price_out = v[1];
        c->price_cached = k == 3 ? v[2] : 0;
        return MKB_OK;
    }
    case MKB_AGENT_OPT_EXTRA_BODY: {
        json_error_t je;
        json_t *v;
        if (arg[0] == '@') {
            v = json_load_file(arg + 1, 0, &je);
            if (!v) return mkb_error(MKB_ERR_INVALID, "--extra-body: cannot read '%s': %s", arg + 1, je.text);
        } else {
            v = json_loads(arg, 0, &je);
            if (!v) return mkb_error(MKB_ERR_INVALID, "--extra-body is not valid JSON: %s", je.text);
        }
        if (!json_is_object(v)) {
            json_decref(v);
            return mkb_error(MKB_ERR_INVALID, "--extra-body must be a JSON object");
        }
        static const char *const reserved[] = {"model", "messages", "tools", NULL};
        for (int i = 0; reserved[i]; i++)
            if (json_object_get(v, reserved[i])) {
                json_decref(v);
                return mkb_error(MKB_ERR_INVALID, "--extra-body may not set \"%s\" (mkb sends it)", reserved[i]);
            }
        if (o->extra_body) {
            json_object_update_recursive(o->extra_body, v);
            json_decref(v);
        } else {
            o->extra_body = v;
        }
        return MKB_OK;
    }
    case MKB_AGENT_OPT_REQUEST_TIMEOUT:
        MKB_TRY(number(code, arg, 1, &c->chat.request_timeout_s));
        return MKB_OK;
    case MKB_AGENT_OPT_MAX_ATTEMPTS:
        MKB_TRY(integer(code, arg, 1, &n));
        if (n > 100) return mkb_error(MKB_ERR_INVALID, "--max-attempts must be at most 100, not '%s'", arg);
        c->chat.max_attempts = (int)n;
        return MKB_OK;
    case MKB_AGENT_OPT_COMMAND_TIMEOUT:
        MKB_TRY(number(code, arg, 1, &d));
        c->command_timeout_s = d;
        return MKB_OK;
    case MKB_AGENT_OPT_COMMAND_OUTPUT: MKB_TRY(integer(code, arg, 1024, &c->max_command_output)); return MKB_OK;
    case MKB_AGENT_OPT_MAX_OUTPUT_TOKENS: MKB_TRY(integer(code, arg, 16, &c->max_output_tokens)); return MKB_OK;
    case MKB_AGENT_OPT_NO_CONFIRM_DONE: c->confirm_done = false; return MKB_OK;
    case MKB_AGENT_OPT_SYSTEM_PROMPT: {
        char *text = NULL;
        MKB_TRY(mkb_read_file(arg, &text, NULL));
        free(o->system_prompt);
        o->system_prompt = text;
        return MKB_OK;
    }
    case MKB_AGENT_OPT_STREAM: o->stream = 1; return MKB_OK;
    case MKB_AGENT_OPT_NO_STREAM: o->stream = 0; return MKB_OK;
    case MKB_AGENT_OPT_END: break;
    }
    return mkb_error(MKB_ERR_INTERNAL, "option code %d is not an agent option", code);
}

enum mkb_status mkb_agent_cli_config(struct mkb_agent_cli *o, const char *model_id, struct mkb_agent_config *cfg) {
    *cfg = o->cfg;
    MKB_TRY(mkb_model_resolve(model_id, &o->model, &cfg->target));
    if (o->stream >= 0) cfg->target.stream = o->stream == 1;
    cfg->chat.extra_body = o->extra_body;
    cfg->system_prompt = o->system_prompt;
    return MKB_OK;
}
