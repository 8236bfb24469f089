/* The built-in agent loop against the scripted loopback server, with commands run directly in a
 * temporary workspace: the tool-call and text protocols, the switch from one to the other,
 * malformed tool arguments, format errors, context overflow and trimming, cost accounting and
 * caps, the budget running out mid-command and during a hanging model call, model errors,
 * submissions interleaved into the transcript, and the transcript itself (compressed, readable
 * after a crash). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/files.h"
#include "agent/textproto.h"
#include "agent/transcript.h"
#include "agent/trial.h"
#include "protocol/sandbox.h"
#include "core/fs.h"
#include "test_chat_server.h"

static struct srv S;
static char dir[256], ws[300], tpath[300];
static struct mkb_local_sandbox sandbox;
static struct mkb_agent_host host;

static void setup(void) {
    cr_assert(srv_start(&S), "cannot start the scripted server");
    snprintf(dir, sizeof dir, "/tmp/mkb-test-agent-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(tpath, sizeof tpath, "%s/transcript.jsonl.zst", dir);
    cr_assert_eq(mkdir(ws, 0755), 0);
    memset(&sandbox, 0, sizeof sandbox);
    sandbox.workspace = ws;
    memset(&host, 0, sizeof host);
    host.exec.exec = mkb_local_exec;
    host.exec.ctx = &sandbox;
    host.exec.describe = "direct, in the test's workspace";
}

static void teardown(void) {
    srv_stop(&S);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void config(struct mkb_agent_config *c) {
    mkb_agent_config_default(c);
    strcpy(c->target.model_id, "custom/scripted");
    strcpy(c->target.provider, "custom");
    strcpy(c->target.model, "scripted");
    snprintf(c->target.base_url, sizeof c->target.base_url, "%s", S.base_url);
    c->chat.retry_scale = 0.001;
    c->chat.request_timeout_s = 5;
    c->chat.max_attempts = 3;
    c->confirm_done = false;
}

static struct mkb_agent_task task(double budget_s) {
    struct mkb_agent_task t = {
        .instruction = "TASK: write kernel.py. This instruction must survive every trim.",
        .workspace = ws,
        .transcript_path = tpath,
        .deadline = mkb_chat_now() + budget_s,
        .submissions_total = 10,
    };
    return t;
}

static json_t *events(bool *complete) {
    json_t *ev = NULL;
    cr_assert_eq(mkb_agent_transcript_read(tpath, &ev, complete), MKB_OK, "%s", mkb_error_message());
    return ev;
}

static int count_type(json_t *ev, const char *type) {
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) n += !strcmp(json_string_value(json_object_get(e, "type")), type);
    return n;
}

static json_t *nth_of_type(json_t *ev, const char *type, int k) {
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) if (!strcmp(json_string_value(json_object_get(e, "type")), type) && k-- == 0) return e;
    return NULL;
}

/* The messages of request i, and the content of its message j (negative from the end). */
static const char *req_content(int i, int j) {
    json_t *msgs = json_object_get(srv_request(&S, i), "messages");
    int n = (int)json_array_size(msgs);
    if (j < 0) j += n;
    return json_string_value(json_object_get(json_array_get(msgs, (size_t)j), "content"));
}

static const char *req_role(int i, int j) {
    json_t *msgs = json_object_get(srv_request(&S, i), "messages");
    int n = (int)json_array_size(msgs);
    if (j < 0) j += n;
    return json_string_value(json_object_get(json_array_get(msgs, (size_t)j), "role"));
}

static char *slurp(const char *name) {
    char p[400], *data = NULL;
    snprintf(p, sizeof p, "%s/%s", ws, name);
    if (mkb_read_file(p, &data, NULL) != MKB_OK) return NULL;
    return data;
}

Test(agent, tool_calls_run_in_the_workspace_and_the_model_sees_results, .init = setup, .fini = teardown) {
    srv_push_tool(&S, "bash", "{\"command\": \"echo hello > a.txt && cat a.txt && pwd\"}", 1000, 50, 0.01);
    srv_push_tool(&S, "write_file", "{\"path\": \"sub/kernel.py\", \"content\": \"def solve(x):\\n    return x\\n\"}",
                  1100, 60, 0.01);
    srv_push_tool(&S, "edit_file",
                  "{\"path\": \"sub/kernel.py\", \"old_text\": \"return x\", \"new_text\": \"return x + 1\"}", 1200,
                  40, 0.01);
    srv_push_tool(&S, "read_file", "{\"path\": \"sub/kernel.py\"}", 1300, 20, 0.01);
    srv_push_tool(&S, "bash", "{\"command\": \"exit 3\"}", 1400, 20, 0.01);
    srv_push_tool(&S, "done", "{\"summary\": \"kernel in place\"}", 1500, 10, 0.01);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert_eq(r.turns, 6);
    cr_assert_eq(r.commands, 2);
    cr_assert_str_eq(r.protocol, "tools");
    /* the system prompt and the instruction open every request */
    cr_assert_eq(srv_count(&S), 6);
    cr_assert_str_eq(req_role(0, 0), "system");
    cr_assert(strstr(req_content(0, 0), ws), "the workspace is named in the system prompt");
    cr_assert(strstr(req_content(5, 1), "TASK: write kernel.py"));
    cr_assert(json_object_get(srv_request(&S, 0), "tools"), "tools are offered");
    /* results come back as tool messages, with the budget */
    cr_assert_str_eq(req_role(1, -1), "tool");
    cr_assert(strstr(req_content(1, -1), "hello\n"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(1, -1), "[exit code 0"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(1, -1), "[mkb] budget left:"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(1, -1), "10 of 10 submissions"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(4, -1), "     1\tdef solve(x):\n     2\t    return x + 1"), "%s", req_content(4, -1));
    cr_assert(strstr(req_content(5, -1), "[exit code 3"), "%s", req_content(5, -1));
    /* the tool call id is answered */
    json_t *msgs = json_object_get(srv_request(&S, 1), "messages");
    json_t *asst = json_array_get(msgs, 2), *tool = json_array_get(msgs, 3);
    cr_assert_str_eq(json_string_value(json_object_get(tool, "tool_call_id")),
                     json_string_value(json_object_get(json_array_get(json_object_get(asst, "tool_calls"), 0), "id")));
    char *k = slurp("sub/kernel.py");
    cr_assert_str_eq(k, "def solve(x):\n    return x + 1\n");
    free(k);
    /* usage */
    cr_assert_eq(r.tokens_in, 1000 + 1100 + 1200 + 1300 + 1400 + 1500);
    cr_assert_eq(r.tokens_out, 50 + 60 + 40 + 20 + 20 + 10);
    cr_assert(r.cost_known);
    cr_assert(fabs(r.cost_usd - 0.06) < 1e-9, "cost %g", r.cost_usd);
    cr_assert_eq(json_integer_value(json_object_get(r.usage, "tokens_in")), r.tokens_in);
    cr_assert(fabs(json_real_value(json_object_get(r.usage, "cost_usd")) - 0.06) < 1e-9);
    cr_assert_eq(json_array_size(json_object_get(r.usage, "per_call")), 6);
    /* the transcript has everything, in order */
    bool complete;
    json_t *ev = events(&complete);
    cr_assert(complete);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 0), "type")), "start");
    cr_assert_eq(count_type(ev, "call"), 6);
    cr_assert_eq(count_type(ev, "tool"), 6);
    json_t *end = json_array_get(ev, json_array_size(ev) - 1);
    cr_assert_str_eq(json_string_value(json_object_get(end, "type")), "end");
    cr_assert_str_eq(json_string_value(json_object_get(end, "reason")), "done");
    json_t *call0 = nth_of_type(ev, "call", 0);
    cr_assert_eq(json_integer_value(json_object_get(call0, "prompt_tokens")), 1000);
    cr_assert(json_real_value(json_object_get(call0, "latency_s")) > 0);
    json_t *tool0 = nth_of_type(ev, "tool", 0);
    cr_assert_eq(json_integer_value(json_object_get(tool0, "exit_code")), 0);
    cr_assert(strstr(json_string_value(json_object_get(tool0, "output")), "hello"));
    json_decref(ev);
    mkb_agent_result_release(&r);
}

Test(agent, text_protocol_with_format_errors_re_asked, .init = setup, .fini = teardown) {
    srv_push_text(&S, "Let me look.\n```bash\nls -a && echo made > t.txt\n```\n", 100, 10, -1);
    srv_push_text(&S, "I think I am nearly there but forgot the action.", 100, 10, -1);
    srv_push_text(&S, "two:\n```bash\necho a\n```\n```bash\necho b\n```\n", 100, 10, -1);
    srv_push_text(&S,
                  "Write a skill file with nested fences:\n```bash\ncat > SKILL.md <<'EOF'\n# Skill\n```python\nx = "
                  "1\n```\nEOF\n```\n",
                  100, 10, -1);
    srv_push_text(&S, "All set.\nTASK_COMPLETE\n", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    c.protocol = MKB_AGENT_TEXT;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert_str_eq(r.protocol, "text");
    cr_assert(!json_object_get(srv_request(&S, 0), "tools"), "no tools in text mode");
    cr_assert(strstr(req_content(0, 0), "TASK_COMPLETE"), "the rules are in the system prompt");
    cr_assert_str_eq(req_role(1, -1), "user");
    cr_assert(strstr(req_content(1, -1), "[exit code 0"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(2, -1), "Format error: your reply has no action"), "%s", req_content(2, -1));
    cr_assert(strstr(req_content(3, -1), "2 ```bash blocks"), "%s", req_content(3, -1));
    char *made = slurp("t.txt"), *skill = slurp("SKILL.md");
    cr_assert_str_eq(made, "made\n");
    cr_assert_str_eq(skill, "# Skill\n```python\nx = 1\n```\n");
    free(made);
    free(skill);
    bool complete;
    json_t *ev = events(&complete);
    cr_assert_eq(count_type(ev, "format_error"), 2);
    json_decref(ev);
    cr_assert(!r.cost_known, "no cost reported and no prices");
    cr_assert(json_is_null(json_object_get(r.usage, "cost_usd")));
    mkb_agent_result_release(&r);
}

Test(agent, a_server_without_tool_calling_gets_the_text_protocol, .init = setup, .fini = teardown) {
    S.reject_tools = true;
    srv_push_text(&S, "```bash\necho switched\n```", 100, 10, -1);
    srv_push_text(&S, "TASK_COMPLETE", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert_str_eq(r.protocol, "text");
    cr_assert_eq(S.tool_rejections, 1);
    cr_assert(strstr(req_content(2, -1), "switched"), "%s", req_content(2, -1));
    cr_assert_eq(r.turns, 2, "the refused call is not a turn");
    mkb_agent_result_release(&r);
    /* with the protocol pinned to tools, the refusal is a model error */
    S.tool_rejections = 0;
    c.protocol = MKB_AGENT_TOOLS;
    unlink(tpath);
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK);
    cr_assert_eq(r.stop, MKB_AGENT_STOP_MODEL_ERROR);
    cr_assert_eq(r.model_fail, MKB_CHAT_TOOLS);
    cr_assert(strstr(r.error, "tool"), "%s", r.error);
    mkb_agent_result_release(&r);
}

Test(agent, malformed_tool_calls_are_answered_not_fatal, .init = setup, .fini = teardown) {
    srv_push_tool(&S, "bash", "{\"command\": \"echo hi\"", 100, 10, -1); /* cut short */
    srv_push_tool(&S, "bash", "[1, 2]", 100, 10, -1);
    srv_push_tool(&S, "bash", "{\"cmd\": \"ls\"}", 100, 10, -1);
    srv_push_tool(&S, "launch_rockets", "{}", 100, 10, -1);
    srv_push_tool(&S, "read_file", "{\"path\": \"../../etc/passwd\"}", 100, 10, -1);
    srv_push_tool(&S, "read_file", "{\"path\": \"/etc/passwd\"}", 100, 10, -1);
    srv_push_tool(&S, "edit_file", "{\"path\": \"nope.py\", \"old_text\": \"a\", \"new_text\": \"b\"}", 100, 10, -1);
    srv_push(&S, 200, "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":", NULL, 0); /* garbage body */
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(strstr(req_content(1, -1), "not valid JSON"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(2, -1), "not valid JSON (not an object)"), "%s", req_content(2, -1));
    cr_assert(strstr(req_content(3, -1), "needs a non-empty string argument \"command\""), "%s", req_content(3, -1));
    cr_assert(strstr(req_content(4, -1), "there is no tool 'launch_rockets'"), "%s", req_content(4, -1));
    cr_assert(strstr(req_content(5, -1), "uses '..'"), "%s", req_content(5, -1));
    cr_assert(strstr(req_content(6, -1), "outside the workspace"), "%s", req_content(6, -1));
    cr_assert(strstr(req_content(7, -1), "does not exist"), "%s", req_content(7, -1));
    cr_assert_eq(r.commands, 0);
    cr_assert_eq(srv_count(&S), 9, "the garbage body was retried by the client");
    mkb_agent_result_release(&r);
}

Test(agent, replies_without_actions_end_after_the_limit, .init = setup, .fini = teardown) {
    for (int i = 0; i < 3; i++) srv_push_text(&S, "Thinking about it...", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    c.max_format_errors = 3;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_FORMAT, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(strstr(req_content(1, -1), "No tool was called"), "%s", req_content(1, -1));
    cr_assert_str_eq(req_role(1, -2), "assistant");
    mkb_agent_result_release(&r);
}

Test(agent, done_is_confirmed_once_while_budget_is_left, .init = setup, .fini = teardown) {
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    srv_push_tool(&S, "bash", "{\"command\": \"true\"}", 100, 10, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    c.confirm_done = true;
    struct mkb_agent_task t = task(600);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE);
    cr_assert_eq(r.turns, 4, "done, work, done (asked again), done");
    cr_assert(strstr(req_content(1, -1), "You asked to end the attempt"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(3, -1), "You asked to end the attempt"), "%s", req_content(3, -1));
    mkb_agent_result_release(&r);
}

Test(agent, context_overflow_drops_old_output_never_the_instruction, .init = setup, .fini = teardown) {
    /* each command prints 6000 bytes; the server refuses requests over 16000 bytes */
    for (int i = 0; i < 6; i++)
        srv_push_tool(&S, "bash", "{\"command\": \"head -c 6000 /dev/zero | tr '\\\\0' x\"}", 0, 10, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    S.context_limit = 16000;
    struct mkb_agent_config c;
    config(&c);
    c.context_tokens = 1000000; /* the estimate never triggers: only the server's 400 does */
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s (%s)", mkb_agent_stop_name(r.stop), r.error);
    cr_assert_eq(S.context_rejections, 1, "the window stated in the first refusal is learnt (%d refusals)",
                 S.context_rejections);
    int n = srv_count(&S);
    /* the last request fits, still opens with the system prompt and the instruction, and the
     * trimmed history says so */
    const char *instr = req_content(n - 1, 1);
    cr_assert(strstr(instr, "TASK: write kernel.py. This instruction must survive every trim."));
    cr_assert_str_eq(req_role(n - 1, 0), "system");
    char *body = json_dumps(srv_request(&S, n - 1), JSON_COMPACT);
    cr_assert_leq(strlen(body), 16000);
    cr_assert(strstr(body, "elided by mkb") || strstr(instr, "oldest turns"), "the trim is visible to the model");
    free(body);
    bool complete;
    json_t *ev = events(&complete);
    cr_assert_gt(count_type(ev, "context"), 0);
    json_t *ctx = nth_of_type(ev, "context", 0);
    cr_assert_str_eq(json_string_value(json_object_get(ctx, "action")), "overflow");
    json_decref(ev);
    /* the tool/assistant pairing survives the trim: every tool message follows its call */
    json_t *msgs = json_object_get(srv_request(&S, n - 1), "messages");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "role")), "tool")) continue;
        const char *id = json_string_value(json_object_get(m, "tool_call_id"));
        bool found = false;
        for (size_t j = 0; j < i && !found; j++) {
            json_t *calls = json_object_get(json_array_get(msgs, j), "tool_calls");
            size_t k;
            json_t *tc;
            json_array_foreach(calls, k, tc) found |= !strcmp(json_string_value(json_object_get(tc, "id")), id);
        }
        cr_assert(found, "tool result %zu answers a call that was dropped", i);
    }
    mkb_agent_result_release(&r);
}

Test(agent, the_estimate_trims_before_the_window_is_reached, .init = setup, .fini = teardown) {
    for (int i = 0; i < 8; i++)
        srv_push_tool(&S, "bash", "{\"command\": \"seq 1 1500\"}", 0, 10, -1); /* ~6.9 KB each; no prompt count */
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    c.context_tokens = 8000; /* about 24 KB at the 3 bytes a token assumed before any count */
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_DONE, "stop: %s (%s)", mkb_agent_stop_name(r.stop), r.error);
    int n = srv_count(&S);
    cr_assert_eq(n, 9, "no request was refused or repeated");
    char *body = json_dumps(json_object_get(srv_request(&S, n - 1), "messages"), JSON_COMPACT);
    cr_assert_lt(strlen(body), 8000 * 3, "the last request fits the window (%zu bytes)", strlen(body));
    cr_assert(strstr(body, "elided by mkb"), "old output was elided");
    free(body);
    cr_assert(strstr(req_content(n - 1, 1), "TASK: write kernel.py"));
    /* the latest output is whole */
    cr_assert(strstr(req_content(n - 1, -1), "\n1500\n"), "%s", req_content(n - 1, -1));
    mkb_agent_result_release(&r);
}

Test(agent, cost_is_summed_and_the_cost_cap_ends_the_attempt, .init = setup, .fini = teardown) {
    for (int i = 0; i < 5; i++) srv_push_tool(&S, "bash", "{\"command\": \"true\"}", 1000, 100, 0.25);
    struct mkb_agent_config c;
    config(&c);
    c.max_cost = 0.6;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_COST, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert_eq(r.calls, 3, "0.25 + 0.25 < 0.6 <= 0.75");
    cr_assert(fabs(r.cost_usd - 0.75) < 1e-9);
    cr_assert(strstr(req_content(1, -1), "$0.35 of $0.60"), "%s", req_content(1, -1));
    mkb_agent_result_release(&r);
}

Test(agent, prices_give_a_cost_when_the_provider_reports_none, .init = setup, .fini = teardown) {
    /* 1M prompt tokens of which 400k cached, 100k completion */
    srv_push_message(&S,
                     json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant", "content",
                               "tool_calls", "id", "c1", "type", "function", "function", "name", "done", "arguments",
                               "{}"),
                     "tool_calls", 1000000, 100000, 400000, -1);
    struct mkb_agent_config c;
    config(&c);
    c.price_in = 0.5;
    c.price_out = 2.0;
    c.price_cached = 0.1;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    /* 600k * 0.5 + 400k * 0.1 + 100k * 2.0, per million */
    cr_assert(fabs(r.cost_usd - (0.30 + 0.04 + 0.20)) < 1e-9, "cost %g", r.cost_usd);
    cr_assert(r.cost_known);
    cr_assert_eq(r.tokens_cached, 400000);
    mkb_agent_result_release(&r);
}

Test(agent, turn_and_token_caps, .init = setup, .fini = teardown) {
    for (int i = 0; i < 6; i++) srv_push_tool(&S, "bash", "{\"command\": \"true\"}", 1000, 100, -1);
    struct mkb_agent_config c;
    config(&c);
    c.max_turns = 2;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_TURNS);
    cr_assert_eq(r.turns, 2);
    mkb_agent_result_release(&r);
    unlink(tpath);
    c.max_turns = 0;
    c.max_tokens = 2500;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_TOKENS);
    cr_assert_eq(r.turns, 3, "1100, 2200, then 3300 >= 2500");
    mkb_agent_result_release(&r);
}

Test(agent, the_budget_runs_out_mid_command, .init = setup, .fini = teardown) {
    srv_push_tool(&S, "bash", "{\"command\": \"sleep 30; echo never\", \"timeout\": 100}", 100, 10, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(1.5);
    struct mkb_agent_result r;
    double t0 = mkb_chat_now();
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    double took = mkb_chat_now() - t0;
    cr_assert_eq(r.stop, MKB_AGENT_STOP_TIME, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(took < 3.5, "took %.2f s", took);
    cr_assert_eq(srv_count(&S), 1, "no model call after the budget ran out");
    bool complete;
    json_t *ev = events(&complete);
    json_t *tool = nth_of_type(ev, "tool", 0);
    cr_assert(json_is_true(json_object_get(tool, "timed_out")));
    cr_assert(strstr(json_string_value(json_object_get(tool, "output")), "time budget ran out"));
    cr_assert(json_real_value(json_object_get(tool, "timeout_s")) < 2, "the timeout was capped by the budget");
    json_decref(ev);
    mkb_agent_result_release(&r);
}

Test(agent, a_hanging_model_ends_at_the_budget, .init = setup, .fini = teardown) {
    srv_push(&S, 200, "{}", NULL, 10.0);
    struct mkb_agent_config c;
    config(&c);
    c.chat.request_timeout_s = 30;
    struct mkb_agent_task t = task(1.0);
    struct mkb_agent_result r;
    double t0 = mkb_chat_now();
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_TIME, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(mkb_chat_now() - t0 < 2.5);
    mkb_agent_result_release(&r);
}

Test(agent, a_rejected_key_is_a_model_error_with_the_reason, .init = setup, .fini = teardown) {
    srv_push(&S, 401, "{\"error\":{\"message\":\"User not found.\",\"code\":401}}", NULL, 0);
    struct mkb_agent_config c;
    config(&c);
    strcpy(c.target.key_env, "OPENROUTER_API_KEY");
    strcpy(c.target.api_key, "sk-bad");
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_MODEL_ERROR);
    cr_assert_eq(r.model_fail, MKB_CHAT_AUTH);
    cr_assert(strstr(r.error, "OPENROUTER_API_KEY") && strstr(r.error, "User not found"), "%s", r.error);
    cr_assert_str_eq(json_string_value(json_object_get(r.usage, "model_fail")), "auth");
    bool complete;
    json_t *ev = events(&complete);
    char *all = json_dumps(ev, 0);
    cr_assert(!strstr(all, "sk-bad"), "the key never reaches the transcript");
    free(all);
    json_decref(ev);
    mkb_agent_result_release(&r);
}

Test(agent, submissions_are_interleaved_into_the_transcript, .init = setup, .fini = teardown) {
    /* the command plays the mailbox: it appends a submission line, as the trial's mailbox does */
    char subs[400];
    snprintf(subs, sizeof subs, "%s/submissions.jsonl", dir);
    host.submissions_path = subs;
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "{\"command\": \"echo '{\\\"index\\\": 1, \\\"verdict\\\": {\\\"passed\\\": true, \\\"speedup\\\": 1.7}}' "
             ">> %s\"}",
             subs);
    srv_push_tool(&S, "bash", cmd, 100, 10, -1);
    srv_push_tool(&S, "bash", "{\"command\": \"echo after\"}", 100, 10, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.submissions_seen, 1);
    cr_assert(strstr(req_content(2, -1), "9 of 10 submissions"), "%s", req_content(2, -1));
    bool complete;
    json_t *ev = events(&complete);
    /* order: tool (the submitting command), submission, then the next call */
    size_t i, at_tool = 0, at_sub = 0, at_call2 = 0;
    json_t *e;
    int calls = 0;
    json_array_foreach(ev, i, e) {
        const char *ty = json_string_value(json_object_get(e, "type"));
        if (!strcmp(ty, "tool") && !at_tool) at_tool = i;
        if (!strcmp(ty, "submission")) at_sub = i;
        if (!strcmp(ty, "call") && ++calls == 2) at_call2 = i;
    }
    cr_assert(at_tool && at_sub > at_tool && at_call2 > at_sub, "tool %zu, submission %zu, call %zu", at_tool, at_sub,
              at_call2);
    json_t *sub = json_array_get(ev, at_sub);
    cr_assert(json_is_true(json_object_get(json_object_get(json_object_get(sub, "submission"), "verdict"), "passed")));
    json_decref(ev);
    mkb_agent_result_release(&r);
}

Test(agent, reasoning_is_replayed_for_providers_that_need_it, .init = setup, .fini = teardown) {
    srv_push_message(&S,
                     json_pack("{s:s, s:n, s:s, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant", "content",
                               "reasoning_content", "I should list files", "tool_calls", "id", "c1", "type",
                               "function", "function", "name", "bash", "arguments", "{\"command\":\"ls\"}"),
                     "tool_calls", 100, 10, 0, -1);
    srv_push_tool(&S, "done", "{}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    strcpy(c.target.reasoning_field, "reasoning_content");
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    json_t *asst = json_array_get(json_object_get(srv_request(&S, 1), "messages"), 2);
    cr_assert_str_eq(json_string_value(json_object_get(asst, "reasoning_content")), "I should list files");
    bool complete;
    json_t *ev = events(&complete);
    json_t *m = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) if (json_object_get(e, "reasoning")) m = e;
    cr_assert(m, "the reasoning is in the transcript");
    json_decref(ev);
    mkb_agent_result_release(&r);
}

Test(transcript, frames_survive_a_crash_and_append) {
    char d[] = "/tmp/mkb-test-transcript-XXXXXX";
    cr_assert(mkdtemp(d));
    char p[200];
    snprintf(p, sizeof p, "%s/t.jsonl.zst", d);
    struct mkb_agent_transcript *t;
    cr_assert_eq(mkb_agent_transcript_open(p, 0, &t), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_add(t, "note", json_pack("{s:s}", "text", "one")), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_flush(t), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_add(t, "note", json_pack("{s:s}", "text", "two")), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_close(t), MKB_OK);
    /* a second writer appends */
    cr_assert_eq(mkb_agent_transcript_open(p, 0, &t), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_add(t, "verdict", json_pack("{s:b}", "passed", 1)), MKB_OK);
    cr_assert_eq(mkb_agent_transcript_close(t), MKB_OK);
    json_t *ev;
    bool complete;
    cr_assert_eq(mkb_agent_transcript_read(p, &ev, &complete), MKB_OK, "%s", mkb_error_message());
    cr_assert(complete);
    cr_assert_eq(json_array_size(ev), 3);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 2), "type")), "verdict");
    json_decref(ev);
    /* cut the file inside its last frame: the earlier frames still read */
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(truncate(p, st.st_size - 5), 0);
    cr_assert_eq(mkb_agent_transcript_read(p, &ev, &complete), MKB_OK, "%s", mkb_error_message());
    cr_assert(!complete);
    cr_assert_geq(json_array_size(ev), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 1), "text")), "two");
    json_decref(ev);
    /* the zstd tool reads it as well */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "zstd -dcq '%s/t.jsonl.zst' 2>/dev/null | grep -c '\"type\":\"note\"' | grep -qx 2", d);
    if (system("command -v zstd >/dev/null") == 0) cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
}

Test(agent, an_instruction_too_long_for_the_window_ends_with_context, .init = setup, .fini = teardown) {
    S.context_limit = 3000;
    char *big = malloc(20000);
    memset(big, 'x', 19999);
    big[19999] = '\0';
    struct mkb_agent_config c;
    config(&c);
    struct mkb_agent_task t = task(60);
    t.instruction = big;
    struct mkb_agent_result r;
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.stop, MKB_AGENT_STOP_CONTEXT, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(strstr(r.error, "context window"), "%s", r.error);
    cr_assert_leq(S.context_rejections, 5, "it gives up instead of retrying forever");
    /* nothing was trimmed out of the instruction */
    const char *sent = req_content(srv_count(&S) - 1, 1);
    cr_assert_geq(strlen(sent), 19999);
    free(big);
    mkb_agent_result_release(&r);
}

/* The runner's hook: the agent in the trial's bubblewrap sandbox, the workspace at /workspace. */
Test(agent, in_a_trial_sandbox_through_the_runner_hook, .init = setup, .fini = teardown) {
    if (mkb_sandbox_check(NULL, false) != MKB_OK) {
        cr_skip_test("bubblewrap cannot create a sandbox here: %s", mkb_error_message());
    }
    srv_push_tool(&S, "bash", "{\"command\": \"pwd; echo x > made.txt; ls /workspace\"}", 300, 30, 0.002);
    srv_push_tool(&S, "read_file", "{\"path\": \"/workspace/made.txt\"}", 400, 30, 0.002);
    srv_push_tool(&S, "write_file", "{\"path\": \"/workspace/sub/k.py\", \"content\": \"a = 1\\n\"}", 0, 0, 0);
    srv_push_tool(&S, "bash", "{\"command\": \"echo 'b = 2' >> sub/k.py && touch sub/new && cat sub/k.py\"}", 0, 0, 0);
    srv_push_tool(&S, "done", "{}", 500, 10, 0.002);
    struct mkb_agent_config c;
    config(&c);
    struct mkb_sandbox sb = {.workspace = ws};
    char subs[400];
    snprintf(subs, sizeof subs, "%s/submissions.jsonl", dir);
    struct mkb_agent_attempt a = {.instruction = "TASK: make a file.",
                                  .workspace = ws,
                                  .trial_dir = dir,
                                  .sandbox = &sb,
                                  .t0 = mkb_chat_now(),
                                  .deadline = mkb_chat_now() + 60,
                                  .submissions_total = 3,
                                  .submissions_path = subs};
    struct mkb_agent_outcome o;
    cr_assert_eq(mkb_agent_trial(&c, &a, &o), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(o.exit_code, 0, "%s", o.error);
    cr_assert_eq(json_integer_value(json_object_get(o.usage, "tokens_in")), 1200);
    cr_assert_str_eq(json_string_value(json_object_get(o.usage, "agent")), "builtin");
    json_decref(o.usage);
    cr_assert(strstr(req_content(1, -1), "/workspace\n"), "the command ran in /workspace: %s", req_content(1, -1));
    cr_assert(strstr(req_content(1, -1), "made.txt"), "%s", req_content(1, -1));
    cr_assert(strstr(req_content(2, -1), "     1\tx"), "read_file maps /workspace to the host: %s", req_content(2, -1));
    cr_assert(strstr(req_content(0, 0), "/workspace"), "the system prompt names the sandbox's workspace path");
    /* what the file tools wrote, the sandbox's commands can change (they run unprivileged as root) */
    cr_assert(strstr(req_content(4, -1), "a = 1\nb = 2\n[exit code 0"), "%s", req_content(4, -1));
    char tp[400];
    snprintf(tp, sizeof tp, "%s/" MKB_TRANSCRIPT_NAME, dir);
    json_t *ev;
    bool complete;
    cr_assert_eq(mkb_agent_transcript_read(tp, &ev, &complete), MKB_OK, "%s", mkb_error_message());
    cr_assert_gt(json_array_size(ev), 5);
    json_decref(ev);
    /* a model that cannot be used is an infrastructure failure: an error record, run again later */
    srv_push(&S, 401, "{\"error\":{\"message\":\"bad key\"}}", NULL, 0);
    cr_assert_eq(mkb_agent_trial(&c, &a, &o), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(o.exit_code, MKB_AGENT_EXIT_INFRA);
    cr_assert(strstr(o.error, "bad key"), "%s", o.error);
    json_decref(o.usage);
}

Test(agent, the_preflight_check_names_what_is_wrong, .init = setup, .fini = teardown) {
    srv_push_text(&S, "pong", 10, 1, -1);
    srv_push(&S, 404, "{\"error\":{\"message\":\"model not found\"}}", NULL, 0);
    srv_push(&S, 400, "{\"message\":\"\\\"auto\\\" tool choice requires --enable-auto-tool-choice\"}", NULL, 0);
    struct mkb_agent_config c;
    config(&c);
    cr_assert_eq(mkb_agent_check(&c), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(mkb_agent_check(&c), MKB_ERR_NOT_FOUND);
    cr_assert(strstr(mkb_error_message(), "checking custom/scripted at http://127.0.0.1"), "%s", mkb_error_message());
    cr_assert_eq(mkb_agent_check(&c), MKB_OK, "a server without tool calling passes: the agent falls back to text");
}

static volatile sig_atomic_t cancel_flag;
static void *raise_cancel(void *arg) {
    (void)arg;
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cancel_flag = 1;
    return NULL;
}

Test(agent, an_interrupt_stops_a_long_command_at_once, .init = setup, .fini = teardown) {
    srv_push_tool(&S, "bash", "{\"command\": \"sleep 30\", \"timeout\": 100}", 100, 10, -1);
    struct mkb_agent_config c;
    config(&c);
    cancel_flag = 0;
    c.cancel = &cancel_flag;
    sandbox.cancel = &cancel_flag;
    struct mkb_agent_task t = task(60);
    struct mkb_agent_result r;
    pthread_t th;
    pthread_create(&th, NULL, raise_cancel, NULL);
    double t0 = mkb_chat_now();
    cr_assert_eq(mkb_agent_run(&c, &t, &host, &r), MKB_OK, "%s", mkb_error_message());
    pthread_join(th, NULL);
    cr_assert_eq(r.stop, MKB_AGENT_STOP_CANCELLED, "stop: %s", mkb_agent_stop_name(r.stop));
    cr_assert(mkb_chat_now() - t0 < 3, "took %.2f s", mkb_chat_now() - t0);
    mkb_agent_result_release(&r);
    /* the same through the trial's sandbox */
    if (mkb_sandbox_check(NULL, false) != MKB_OK) cr_skip_test("bubblewrap cannot create a sandbox here");
    srv_push_tool(&S, "bash", "{\"command\": \"sleep 30\", \"timeout\": 100}", 100, 10, -1);
    cancel_flag = 0;
    struct mkb_sandbox sb = {.workspace = ws};
    struct mkb_agent_attempt a = {.instruction = "TASK", .workspace = ws, .trial_dir = dir, .sandbox = &sb,
                                  .t0 = mkb_chat_now(), .deadline = mkb_chat_now() + 60, .cancel = &cancel_flag};
    struct mkb_agent_outcome o;
    pthread_create(&th, NULL, raise_cancel, NULL);
    t0 = mkb_chat_now();
    cr_assert_eq(mkb_agent_trial(&c, &a, &o), MKB_OK, "%s", mkb_error_message());
    pthread_join(th, NULL);
    cr_assert(mkb_chat_now() - t0 < 3, "took %.2f s", mkb_chat_now() - t0);
    cr_assert_str_eq(json_string_value(json_object_get(o.usage, "stop")), "cancelled");
    json_decref(o.usage);
}

Test(textproto, what_counts_as_one_action) {
    enum mkb_text_action k;
    char *cmd = NULL, why[512];
    cr_assert_eq(mkb_text_parse("Plan.\n```sh\nmake -j\n```\nThen wait.", &k, &cmd, why, sizeof why), MKB_OK);
    cr_assert_eq(k, MKB_TEXT_COMMAND);
    cr_assert_str_eq(cmd, "make -j");
    free(cmd);
    /* a python block is prose; the bash block is the action */
    cr_assert_eq(mkb_text_parse("```python\nprint(1)\n```\n```bash\nls\n```\n", &k, &cmd, why, sizeof why), MKB_OK);
    cr_assert_str_eq(cmd, "ls");
    free(cmd);
    cr_assert_eq(mkb_text_parse("  TASK_COMPLETE  \n", &k, &cmd, why, sizeof why), MKB_OK);
    cr_assert_eq(k, MKB_TEXT_DONE);
    cr_assert_eq(mkb_text_parse("```bash\nls\n", &k, &cmd, why, sizeof why), MKB_ERR_INVALID);
    cr_assert(strstr(why, "not closed"), "%s", why);
    cr_assert_eq(mkb_text_parse("```bash\n\n```", &k, &cmd, why, sizeof why), MKB_ERR_INVALID);
    cr_assert(strstr(why, "empty"), "%s", why);
    cr_assert_eq(mkb_text_parse("```bash\nls\n```\nTASK_COMPLETE", &k, &cmd, why, sizeof why), MKB_ERR_INVALID);
    cr_assert(strstr(why, "both"), "%s", why);
    cr_assert_eq(mkb_text_parse("I am done: TASK_COMPLETE.", &k, &cmd, why, sizeof why), MKB_ERR_INVALID,
                 "the word inside a sentence is not the action");
    cr_assert_null(cmd);
}

Test(files, the_file_tools_stay_in_the_workspace, .init = setup, .fini = teardown) {
    struct mkb_workspace w = {.dir = ws, .sandbox_ws = "/workspace"};
    char *out = NULL;
    char link[400];
    snprintf(link, sizeof link, "%s/etc", ws);
    cr_assert_eq(symlink("/etc", link), 0);
    cr_assert_eq(mkb_ws_read(&w, "etc/passwd", 1, 0, 4096, &out), MKB_ERR_INVALID, "a link to outside is refused");
    cr_assert(strstr(mkb_error_message(), "symbolic link"), "%s", mkb_error_message());
    cr_assert_eq(mkb_ws_write(&w, "etc/evil", "x", 1, &out), MKB_ERR_INVALID);
    snprintf(link, sizeof link, "%s/k.py", ws);
    cr_assert_eq(symlink("/etc/hostname", link), 0);
    cr_assert_eq(mkb_ws_write(&w, "k.py", "x", 1, &out), MKB_ERR_INVALID, "writing through a link is refused");
    cr_assert_eq(mkb_ws_read(&w, "/workspace/../etc/passwd", 1, 0, 4096, &out), MKB_ERR_INVALID);
    cr_assert_eq(mkb_ws_read(&w, "/elsewhere/x", 1, 0, 4096, &out), MKB_ERR_INVALID);
    /* inside, paths are normalised and both workspace spellings work */
    cr_assert_eq(mkb_ws_write(&w, "./a//b/c.txt", "1\n2\n3\n", 6, &out), MKB_OK, "%s", mkb_error_message());
    free(out);
    cr_assert_eq(mkb_ws_read(&w, "/workspace/a/b/c.txt", 2, 1, 4096, &out), MKB_OK, "%s", mkb_error_message());
    cr_assert(strstr(out, "     2\t2\n") && !strstr(out, "\t1\n") && strstr(out, "first_line=3"), "%s", out);
    free(out);
    char host_path[400];
    snprintf(host_path, sizeof host_path, "%s/a/b/c.txt", ws);
    cr_assert_eq(mkb_ws_edit(&w, host_path, "\n", "", &out), MKB_ERR_INVALID, "three matches are ambiguous");
    cr_assert(strstr(mkb_error_message(), "3 times"), "%s", mkb_error_message());
    cr_assert_eq(mkb_ws_edit(&w, "a/b/c.txt", "2\n", "two\n", &out), MKB_OK);
    cr_assert(strstr(out, "line 2"), "%s", out);
    free(out);
    char *data = slurp("a/b/c.txt");
    cr_assert_str_eq(data, "1\ntwo\n3\n");
    free(data);
}
