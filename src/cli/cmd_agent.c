/* mkb agent: the built-in agent outside a trial. `--ping` sends one short request to check that
 * the model id, the endpoint and the key work (and shows latency, tokens and cost); otherwise it
 * runs one attempt at an instruction in a workspace directory, in the bubblewrap sandbox trials
 * use (or with --sandbox none, directly), and writes the transcript for `mkb show`.
 *
 * It is for trying a model or a provider setting before a run; it keeps no record, takes no
 * submissions (there is no mailbox outside a trial) and grades nothing: `mkb run` does that. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/agent.h"
#include "agent/chat.h"
#include "agent/options.h"
#include "agent/transcript.h"
#include "agent/trial.h"
#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "protocol/sandbox.h"

static const char *const agent_usage_head =
    "usage: mkb agent --model ID --ping [agent options] [--json]\n"
    "       mkb agent --model ID --workspace DIR (--instruction FILE | --task TEXT)\n"
    "                 [--minutes N] [--transcript PATH] [--sandbox bwrap|none] [agent options] [--json]\n"
    "\n"
    "Try the built-in agent outside a trial. --ping sends one short request and reports whether\n"
    "the model answered, with latency, tokens and cost: use it to check a key, a model id or a\n"
    "local server. Otherwise the agent takes one attempt at the instruction with DIR as its\n"
    "workspace (commands see it as " MKB_SANDBOX_WORKSPACE " inside the sandbox) and writes its transcript\n"
    "(read it with 'mkb show PATH'). No submissions and no grading: 'mkb run' does those.\n"
    "\n"
    "The model id names a provider and a model: openrouter/z-ai/glm-5.3, deepseek/deepseek-v4-pro,\n"
    "dashscope/qwen3-coder-plus, openai/gpt-5; or any name with --base-url.\n"
    "\n"
    "options:\n"
    "  --model ID            the model (required)\n"
    "  --ping                send one short request and report\n"
    "  --workspace DIR       the attempt's workspace (created if missing)\n"
    "  --instruction FILE    the task text\n"
    "  --task TEXT           the task text, inline\n"
    "  --minutes N           wall-clock budget of the attempt                         [40]\n"
    "  --transcript PATH     where the transcript goes       [./agent-<time>.jsonl.zst]\n"
    "  --sandbox S           bwrap (no network, only the workspace writable) or none   [bwrap]\n"
    "  --json                the result (usage, stop reason) as JSON on stdout\n"
    "  -h, --help            this help\n"
    "\n"
    "agent options (the same for 'mkb run'):\n";

static volatile sig_atomic_t cancelled = 0;
static void on_signal(int sig) {
    (void)sig;
    cancelled = 1;
}

static int ping(struct mkb_agent_config *cfg, bool json) {
    struct mkb_chat_client *c;
    struct mkb_chat_options copt = cfg->chat;
    copt.stream = copt.stream || cfg->target.stream;
    enum mkb_status st = mkb_chat_client_new(&cfg->target, &copt, &c);
    if (st != MKB_OK) return mkb_cli_fail("agent", st);
    json_t *req = json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content",
                            "This is a connectivity check. Reply with the single word: pong");
    if (cfg->max_output_tokens > 0) json_object_set_new(req, "max_tokens", json_integer(cfg->max_output_tokens));
    struct mkb_chat_reply r;
    st = mkb_chat_complete(c, req, &r);
    json_decref(req);
    mkb_chat_client_free(c);
    if (st != MKB_OK) {
        int code = mkb_cli_fail("agent", st);
        mkb_chat_reply_release(&r);
        return code;
    }
    const char *content = json_string_value(json_object_get(r.message, "content"));
    if (json) {
        json_t *o = json_pack("{s:o, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:i}", "target",
                              mkb_model_target_json(&cfg->target), "answered_by", r.model, "reply",
                              content ? content : "", "finish_reason", r.finish_reason, "prompt_tokens",
                              (json_int_t)r.usage.prompt_tokens, "completion_tokens",
                              (json_int_t)r.usage.completion_tokens, "cached_tokens", (json_int_t)r.usage.cached_tokens,
                              "reasoning_tokens", (json_int_t)r.usage.reasoning_tokens, "latency_s",
                              r.usage.latency_s, "retries", (int)json_array_size(r.attempts));
        json_object_set_new(o, "cost_usd", r.usage.cost_reported ? json_real(r.usage.cost) : json_null());
        mkb_json_print(o);
        json_decref(o);
    } else {
        printf("ok: %s answered in %.2f s", r.model[0] ? r.model : cfg->target.model, r.usage.latency_s);
        if (r.provider[0]) printf(" (via %s)", r.provider);
        printf(": %lld prompt + %lld completion tokens", (long long)r.usage.prompt_tokens,
               (long long)r.usage.completion_tokens);
        if (r.usage.reasoning_tokens) printf(" (%lld reasoning)", (long long)r.usage.reasoning_tokens);
        if (r.usage.cost_reported) printf(", $%.6f", r.usage.cost);
        if (json_array_size(r.attempts)) printf(", after %zu retries", json_array_size(r.attempts));
        printf("\nreply: %s\n", content && *content ? content : "(empty)");
        printf("endpoint %s, key %s\n", cfg->target.base_url,
               cfg->target.key_env[0] ? cfg->target.key_env : "(none)");
    }
    mkb_chat_reply_release(&r);
    return 0;
}

int cmd_agent(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"ping", no_argument, 0, 'p'},
                                         {"workspace", required_argument, 0, 'w'},
                                         {"instruction", required_argument, 0, 'i'},
                                         {"task", required_argument, 0, 't'},
                                         {"minutes", required_argument, 0, 'M'},
                                         {"transcript", required_argument, 0, 'T'},
                                         {"sandbox", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         MKB_AGENT_LONG_OPTIONS,
                                         {0, 0, 0, 0}};
    if (mkb_cli_wants_help(argc, argv)) {
        fputs(agent_usage_head, stdout);
        fputs(mkb_agent_options_help, stdout);
        return 0;
    }
    struct mkb_agent_cli cli;
    mkb_agent_cli_init(&cli);
    const char *model = NULL, *workspace = NULL, *instruction_file = NULL, *task_text = NULL, *transcript = NULL;
    double minutes = 40;
    bool do_ping = false, json = false, sandboxed = true;
    int rc = -1;
    optind = 1;
    opterr = 0;
    int ch;
    while (rc < 0 && (ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (mkb_agent_is_option(ch)) {
            enum mkb_status st = mkb_agent_option(&cli, ch, optarg);
            if (st == MKB_ERR_INVALID) rc = mkb_cli_usage("agent", "%s", mkb_error_message());
            else if (st != MKB_OK) rc = mkb_cli_fail("agent", st);
            continue;
        }
        switch (ch) {
        case 'm': model = optarg; break;
        case 'p': do_ping = true; break;
        case 'w': workspace = optarg; break;
        case 'i': instruction_file = optarg; break;
        case 't': task_text = optarg; break;
        case 'M': {
            char *end;
            minutes = strtod(optarg, &end);
            if (end == optarg || *end || !(minutes > 0))
                rc = mkb_cli_usage("agent", "--minutes must be a positive number, not '%s'", optarg);
            break;
        }
        case 'T': transcript = optarg; break;
        case 's':
            if (!strcmp(optarg, "bwrap"))
                sandboxed = true;
            else if (!strcmp(optarg, "none"))
                sandboxed = false;
            else
                rc = mkb_cli_usage("agent", "--sandbox must be bwrap or none, not '%s'", optarg);
            break;
        case 'j': json = true; break;
        case ':': rc = mkb_cli_usage("agent", "option '%s' needs a value", argv[optind - 1]); break;
        default: rc = mkb_cli_usage("agent", "unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (rc < 0 && optind < argc) rc = mkb_cli_usage("agent", "unexpected argument '%s'", argv[optind]);
    if (rc < 0 && !model) rc = mkb_cli_usage("agent", "--model is required");
    if (rc < 0 && !do_ping && !workspace) rc = mkb_cli_usage("agent", "give --workspace (or --ping)");
    if (rc < 0 && !do_ping && !instruction_file == !task_text)
        rc = mkb_cli_usage("agent", "give exactly one of --instruction FILE and --task TEXT");
    if (rc >= 0) {
        mkb_agent_cli_release(&cli);
        return rc;
    }

    struct mkb_agent_config cfg;
    enum mkb_status st = mkb_agent_cli_config(&cli, model, &cfg);
    if (st != MKB_OK) {
        rc = mkb_cli_fail("agent", st);
        mkb_agent_cli_release(&cli);
        return rc;
    }
    if (do_ping) {
        rc = ping(&cfg, json);
        mkb_agent_cli_release(&cli);
        return rc;
    }

    char *instruction = NULL;
    char tpath[4096], wsabs[4096];
    if (instruction_file)
        st = mkb_read_file(instruction_file, &instruction, NULL);
    else
        instruction = strdup(task_text);
    if (st == MKB_OK && !instruction) st = mkb_error(MKB_ERR_NOMEM, "out of memory");
    if (st == MKB_OK) st = mkb_mkdir_p(workspace);
    if (st == MKB_OK && !realpath(workspace, wsabs))
        st = mkb_error(MKB_ERR_IO, "cannot resolve the workspace '%s'", workspace);
    if (st == MKB_OK) {
        if (transcript) {
            snprintf(tpath, sizeof tpath, "%s", transcript);
        } else {
            time_t now = time(NULL);
            char stamp[32];
            strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
            snprintf(tpath, sizeof tpath, "agent-%s.jsonl.zst", stamp);
        }
    }
    struct mkb_sandbox sb = {.workspace = wsabs};
    struct mkb_agent_sandbox asb = {.sandbox = &sb, .cancel = &cancelled};
    struct mkb_local_sandbox direct = {.workspace = wsabs, .cancel = &cancelled};
    struct mkb_agent_host host = {0};
    char describe[4200];
    if (st == MKB_OK && sandboxed) {
        st = mkb_sandbox_check(NULL, false);
        host.exec.exec = mkb_agent_sandbox_exec;
        host.exec.ctx = &asb;
        snprintf(describe, sizeof describe, "bubblewrap sandbox, %s at " MKB_SANDBOX_WORKSPACE, wsabs);
    } else {
        host.exec.exec = mkb_local_exec;
        host.exec.ctx = &direct;
        snprintf(describe, sizeof describe, "no sandbox, in %s", wsabs);
    }
    host.exec.describe = describe;
    if (st != MKB_OK) {
        free(instruction);
        mkb_agent_cli_release(&cli);
        return mkb_cli_fail("agent", st);
    }

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    cfg.cancel = &cancelled;

    struct mkb_agent_task task = {
        .instruction = instruction,
        .workspace = wsabs,
        .sandbox_workspace = sandboxed ? MKB_SANDBOX_WORKSPACE : NULL,
        .transcript_path = tpath,
        .deadline = mkb_chat_now() + minutes * 60,
    };
    struct mkb_agent_result res;
    st = mkb_agent_run(&cfg, &task, &host, &res);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(instruction);
    if (st != MKB_OK) {
        mkb_agent_result_release(&res);
        mkb_agent_cli_release(&cli);
        return mkb_cli_fail("agent", st);
    }
    if (json) {
        json_object_set_new(res.usage, "transcript", json_string(tpath));
        mkb_json_print(res.usage);
    } else {
        printf("%s after %lld turns (%lld commands) in %.0f s: %lld tokens in (%lld cached), %lld out", 
               mkb_agent_stop_name(res.stop), (long long)res.turns, (long long)res.commands, res.agent_s,
               (long long)res.tokens_in, (long long)res.tokens_cached, (long long)res.tokens_out);
        if (res.cost_known) printf(", $%.4f", res.cost_usd);
        printf("\ntranscript: %s (mkb show %s)\n", tpath, tpath);
    }
    rc = 0;
    if (res.stop == MKB_AGENT_STOP_MODEL_ERROR || res.stop == MKB_AGENT_STOP_CONTEXT) {
        fprintf(stderr, "mkb agent: %s\n", res.error);
        rc = res.model_fail == MKB_CHAT_AUTH || res.model_fail == MKB_CHAT_MODEL ? MKB_EXIT_USAGE : MKB_EXIT_SYSTEM;
    } else if (res.stop == MKB_AGENT_STOP_CANCELLED) {
        rc = MKB_EXIT_SYSTEM;
    }
    mkb_agent_result_release(&res);
    mkb_agent_cli_release(&cli);
    return rc;
}
