/* The chat-completions client and model ids: provider prefixes to base URLs and keys (environment
 * and .env), and every failure a provider produces, against the scripted loopback server: 429
 * with Retry-After, 500s, dropped connections, malformed JSON, a hanging server, rejected keys,
 * unknown models, context overflow, servers without tool calling, an error inside a 200, retries
 * running out and a deadline. Waits are scaled down through retry_scale. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/chat.h"
#include "agent/provider.h"
#include "core/status.h"
#include "test_chat_server.h"

/* ---- model ids ---- */

static void clear_keys(void) {
    for (const struct mkb_provider *p = mkb_providers; p->name; p++) {
        unsetenv(p->key_env);
        unsetenv(p->base_url_env);
    }
    unsetenv("MKB_API_KEY");
}

static char envdir[256];
static void in_empty_dir(void) {
    snprintf(envdir, sizeof envdir, "/tmp/mkb-test-chat-XXXXXX");
    cr_assert(mkdtemp(envdir));
    cr_assert_eq(chdir(envdir), 0);
}
static void leave_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", envdir);
    if (envdir[0]) cr_assert_eq(system(cmd), 0);
}

Test(model_id, openrouter_prefix_maps_to_base_url_model_and_key, .fini = leave_dir) {
    in_empty_dir();
    clear_keys();
    setenv("OPENROUTER_API_KEY", "sk-or-test", 1);
    struct mkb_model_target t;
    cr_assert_eq(mkb_model_resolve("openrouter/z-ai/glm-5.3", NULL, &t), MKB_OK, "%s", mkb_error_message());
    cr_assert_str_eq(t.provider, "openrouter");
    cr_assert_str_eq(t.model, "z-ai/glm-5.3");
    cr_assert_str_eq(t.base_url, "https://openrouter.ai/api/v1");
    cr_assert_str_eq(t.api_key, "sk-or-test");
    cr_assert_str_eq(t.key_source, "environment");
    cr_assert_str_eq(t.reasoning_field, "reasoning_details");
    json_t *j = mkb_model_target_json(&t);
    char *s = json_dumps(j, 0);
    cr_assert(!strstr(s, "sk-or-test"), "the key must not reach transcripts: %s", s);
    free(s);
    json_decref(j);
}

Test(model_id, every_provider_and_its_key_variable, .fini = leave_dir) {
    in_empty_dir();
    clear_keys();
    setenv("DEEPSEEK_API_KEY", "d", 1);
    setenv("DASHSCOPE_API_KEY", "q", 1);
    setenv("OPENAI_API_KEY", "o", 1);
    struct mkb_model_target t;
    cr_assert_eq(mkb_model_resolve("deepseek/deepseek-v4-pro", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.base_url, "https://api.deepseek.com");
    cr_assert_str_eq(t.model, "deepseek-v4-pro");
    cr_assert_str_eq(t.reasoning_field, "reasoning_content");
    cr_assert_eq(mkb_model_resolve("dashscope/qwen3-coder-plus", NULL, &t), MKB_OK);
    cr_assert(strstr(t.base_url, "dashscope"));
    cr_assert_str_eq(t.api_key, "q");
    cr_assert(t.stream, "dashscope streams by default");
    setenv("DASHSCOPE_BASE_URL", "https://dashscope.aliyuncs.com/compatible-mode/v1/", 1);
    cr_assert_eq(mkb_model_resolve("dashscope/qwen3-coder-plus", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.base_url, "https://dashscope.aliyuncs.com/compatible-mode/v1", "trailing slash dropped");
    cr_assert_eq(mkb_model_resolve("openai/gpt-5", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.api_key, "o");
    cr_assert(!t.stream);
}

Test(model_id, unknown_prefix_and_missing_key_name_what_to_do, .fini = leave_dir) {
    in_empty_dir();
    clear_keys();
    struct mkb_model_target t;
    cr_assert_eq(mkb_model_resolve("mistery/model-x", NULL, &t), MKB_ERR_INVALID);
    cr_assert(strstr(mkb_error_message(), "unknown provider 'mistery'"), "%s", mkb_error_message());
    cr_assert(strstr(mkb_error_message(), "--base-url"), "%s", mkb_error_message());
    cr_assert_eq(mkb_model_resolve("bare-model", NULL, &t), MKB_ERR_INVALID);
    cr_assert(strstr(mkb_error_message(), "no provider prefix"), "%s", mkb_error_message());
    cr_assert_eq(mkb_model_resolve("deepseek/deepseek-v4-pro", NULL, &t), MKB_ERR_INVALID);
    cr_assert(strstr(mkb_error_message(), "DEEPSEEK_API_KEY"), "%s", mkb_error_message());
    cr_assert_eq(mkb_model_resolve("deepseek/", NULL, &t), MKB_ERR_INVALID);
}

Test(model_id, keys_from_a_dotenv_file, .fini = leave_dir) {
    in_empty_dir();
    clear_keys();
    FILE *f = fopen(".env", "w");
    fputs("# keys\n\nexport OPENROUTER_API_KEY=\"sk-quoted\"\nDEEPSEEK_API_KEY = plain-key # a comment\n"
          "DASHSCOPE_API_KEY='single'\n",
          f);
    fclose(f);
    struct mkb_model_target t;
    cr_assert_eq(mkb_model_resolve("openrouter/a/b", NULL, &t), MKB_OK, "%s", mkb_error_message());
    cr_assert_str_eq(t.api_key, "sk-quoted");
    cr_assert_str_eq(t.key_source, ".env");
    cr_assert_eq(mkb_model_resolve("deepseek/x", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.api_key, "plain-key");
    cr_assert_eq(mkb_model_resolve("dashscope/x", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.api_key, "single");
    /* the environment wins over .env */
    setenv("DEEPSEEK_API_KEY", "from-env", 1);
    cr_assert_eq(mkb_model_resolve("deepseek/x", NULL, &t), MKB_OK);
    cr_assert_str_eq(t.api_key, "from-env");
    /* an explicit env file that does not exist is an error; a malformed one names its line */
    struct mkb_model_options o = {.env_file = "missing.env"};
    cr_assert_eq(mkb_model_resolve("openrouter/a/b", &o, &t), MKB_ERR_NOT_FOUND);
    f = fopen("bad.env", "w");
    fputs("OK=1\nthis line has no equals sign\n", f);
    fclose(f);
    o.env_file = "bad.env";
    cr_assert_eq(mkb_model_resolve("openrouter/a/b", &o, &t), MKB_ERR_INVALID);
    cr_assert(strstr(mkb_error_message(), "line 2"), "%s", mkb_error_message());
}

Test(model_id, base_url_for_any_openai_compatible_server, .fini = leave_dir) {
    in_empty_dir();
    clear_keys();
    struct mkb_model_target t;
    struct mkb_model_options o = {.base_url = "http://127.0.0.1:8000/v1/"};
    cr_assert_eq(mkb_model_resolve("Qwen/Qwen3-Coder-30B-A3B-Instruct", &o, &t), MKB_OK, "%s", mkb_error_message());
    cr_assert_str_eq(t.model, "Qwen/Qwen3-Coder-30B-A3B-Instruct", "unknown prefixes are part of the name");
    cr_assert_str_eq(t.base_url, "http://127.0.0.1:8000/v1");
    cr_assert_str_eq(t.api_key, "", "a local server needs no key");
    cr_assert_str_eq(t.provider, "custom");
    setenv("MKB_API_KEY", "local-key", 1);
    cr_assert_eq(mkb_model_resolve("local-model", &o, &t), MKB_OK);
    cr_assert_str_eq(t.api_key, "local-key");
    /* a known prefix is still stripped; --api-key-env must exist when named */
    o.key_env = "MY_PROXY_KEY";
    cr_assert_eq(mkb_model_resolve("openrouter/z-ai/glm-5.3", &o, &t), MKB_ERR_INVALID);
    cr_assert(strstr(mkb_error_message(), "MY_PROXY_KEY"), "%s", mkb_error_message());
    setenv("MY_PROXY_KEY", "pk", 1);
    cr_assert_eq(mkb_model_resolve("openrouter/z-ai/glm-5.3", &o, &t), MKB_OK);
    cr_assert_str_eq(t.model, "z-ai/glm-5.3");
    cr_assert_str_eq(t.api_key, "pk");
    o.base_url = "ftp://example";
    cr_assert_eq(mkb_model_resolve("m", &o, &t), MKB_ERR_INVALID);
}

/* ---- the client against the scripted server ---- */

static struct srv S;

static void setup(void) {
    cr_assert(srv_start(&S), "cannot start the scripted server");
    unsetenv(MKB_RETRY_SCALE_ENV);
}
static void teardown(void) { srv_stop(&S); }

static struct mkb_chat_client *client(double request_timeout, int attempts, const json_t *extra) {
    struct mkb_model_target t;
    memset(&t, 0, sizeof t);
    strcpy(t.model_id, "custom/scripted");
    strcpy(t.provider, "custom");
    strcpy(t.model, "scripted");
    strcpy(t.key_env, "TEST_KEY");
    strcpy(t.api_key, "sk-test-123");
    snprintf(t.base_url, sizeof t.base_url, "%s", S.base_url);
    struct mkb_chat_options o;
    mkb_chat_options_default(&o);
    o.retry_scale = 0.001;
    o.request_timeout_s = request_timeout;
    o.max_attempts = attempts;
    o.extra_body = extra;
    struct mkb_chat_client *c;
    cr_assert_eq(mkb_chat_client_new(&t, &o, &c), MKB_OK);
    return c;
}

static json_t *hello(void) { return json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content", "hi"); }

static enum mkb_status call(struct mkb_chat_client *c, struct mkb_chat_reply *r) {
    json_t *req = hello();
    enum mkb_status s = mkb_chat_complete(c, req, r);
    json_decref(req);
    return s;
}

Test(chat, a_reply_its_usage_and_the_request_sent, .init = setup, .fini = teardown) {
    srv_push(&S, 200,
             "{\"id\":\"x1\",\"model\":\"scripted-v2\",\"provider\":\"Up\",\"choices\":[{\"index\":0,\"message\":{"
             "\"role\":\"assistant\",\"content\":\"hello\",\"reasoning_content\":\"thinking\"},\"finish_reason\":"
             "\"stop\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"prompt_tokens_details\":{"
             "\"cached_tokens\":100},\"completion_tokens_details\":{\"reasoning_tokens\":12},\"cost\":0.0042}}",
             NULL, 0);
    json_t *extra = json_pack("{s:{s:[s], s:b}, s:f}", "provider", "order", "deepinfra", "allow_fallbacks", 0,
                              "temperature", 0.2);
    struct mkb_chat_client *c = client(5, 3, extra);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_str_eq(json_string_value(json_object_get(r.message, "content")), "hello");
    cr_assert_str_eq(json_string_value(json_object_get(r.message, "reasoning_content")), "thinking");
    cr_assert_str_eq(r.finish_reason, "stop");
    cr_assert_str_eq(r.model, "scripted-v2");
    cr_assert_str_eq(r.provider, "Up");
    cr_assert_eq(r.usage.prompt_tokens, 120);
    cr_assert_eq(r.usage.completion_tokens, 30);
    cr_assert_eq(r.usage.cached_tokens, 100);
    cr_assert_eq(r.usage.reasoning_tokens, 12);
    cr_assert(r.usage.cost_reported && fabs(r.usage.cost - 0.0042) < 1e-12);
    cr_assert(r.usage.latency_s > 0 && r.usage.latency_s < 5);
    cr_assert_eq(json_array_size(r.attempts), 0);
    json_t *req = srv_request(&S, 0);
    cr_assert_str_eq(json_string_value(json_object_get(req, "model")), "scripted");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(req, "messages"), 0), "content")),
                     "hi");
    json_t *prov = json_object_get(req, "provider");
    cr_assert(json_is_false(json_object_get(prov, "allow_fallbacks")), "routing options pass through");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(prov, "order"), 0)), "deepinfra");
    cr_assert(fabs(json_number_value(json_object_get(req, "temperature")) - 0.2) < 1e-12);
    cr_assert_str_eq(S.auth, "Bearer sk-test-123");
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
    json_decref(extra);
}

Test(chat, deepseek_cache_hit_tokens, .init = setup, .fini = teardown) {
    srv_push(&S, 200,
             "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}],"
             "\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":5,\"prompt_cache_hit_tokens\":32,"
             "\"prompt_cache_miss_tokens\":18}}",
             NULL, 0);
    struct mkb_chat_client *c = client(5, 1, NULL);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_eq(r.usage.cached_tokens, 32);
    cr_assert(!r.usage.cost_reported);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, retry_after_on_429_is_honoured_and_scaled, .init = setup, .fini = teardown) {
    srv_push(&S, 429, "{\"error\":{\"message\":\"rate limited\",\"code\":429}}", "2", 0);
    srv_push_text(&S, "after the wait", 10, 2, -1);
    struct mkb_chat_client *c = client(5, 3, NULL);
    struct mkb_chat_reply r;
    double t0 = mkb_chat_now();
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    double took = mkb_chat_now() - t0;
    cr_assert_eq(srv_count(&S), 2);
    cr_assert_eq(json_array_size(r.attempts), 1);
    json_t *a = json_array_get(r.attempts, 0);
    cr_assert_eq(json_integer_value(json_object_get(a, "http")), 429);
    cr_assert_str_eq(json_string_value(json_object_get(a, "retry_after")), "2");
    cr_assert(fabs(json_real_value(json_object_get(a, "wait_s")) - 0.002) < 1e-9, "Retry-After 2 s scaled by 0.001");
    cr_assert(took < 2, "the test scale applies (took %.2f s)", took);
    cr_assert(r.usage.wall_s >= r.usage.latency_s);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, server_errors_drops_and_garbage_are_retried, .init = setup, .fini = teardown) {
    /* a connection dropped on a fresh connection (libcurl itself retries drops of reused ones) */
    srv_push(&S, 0, "", NULL, 0);
    srv_push(&S, 500, "{\"error\":{\"message\":\"internal\"}}", NULL, 0);
    srv_push(&S, 502, "<html>bad gateway</html>", NULL, 0);
    srv_push(&S, 200, "{\"choices\":[{\"message\":{\"role\":\"assist", NULL, 0); /* cut short */
    srv_push(&S, 200, "{\"choices\":[]}", NULL, 0);
    srv_push(&S, 200, "{\"error\":{\"message\":\"Provider returned error\",\"code\":503}}", NULL, 0);
    srv_push_text(&S, "finally", 10, 2, -1);
    struct mkb_chat_client *c = client(5, 8, NULL);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    cr_assert_str_eq(json_string_value(json_object_get(r.message, "content")), "finally");
    cr_assert_eq(json_array_size(r.attempts), 6, "%s", json_dumps(r.attempts, 0));
    const char *why[6];
    for (int i = 0; i < 6; i++) why[i] = json_string_value(json_object_get(json_array_get(r.attempts, (size_t)i), "error"));
    cr_assert(strstr(why[0], "Server returned nothing"), "%s", why[0]);
    cr_assert(strstr(why[1], "HTTP 500"), "%s", why[1]);
    cr_assert(strstr(why[2], "HTTP 502"), "%s", why[2]);
    cr_assert(strstr(why[3], "not valid JSON"), "%s", why[3]);
    cr_assert(strstr(why[4], "no choices"), "%s", why[4]);
    cr_assert(strstr(why[5], "Provider returned error"), "%s", why[5]);
    /* backoff doubles: 2, 4, 8... s before scaling, with jitter in [0.75, 1.25] */
    double w0 = json_real_value(json_object_get(json_array_get(r.attempts, 0), "wait_s"));
    double w2 = json_real_value(json_object_get(json_array_get(r.attempts, 2), "wait_s"));
    cr_assert(w0 >= 0.0015 && w0 <= 0.0025, "w0 %g", w0);
    cr_assert(w2 >= 0.006 && w2 <= 0.010, "w2 %g", w2);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, a_hanging_server_times_out_and_is_retried, .init = setup, .fini = teardown) {
    srv_push(&S, 200, "{}", NULL, 3.0); /* hangs past the request timeout */
    srv_push_text(&S, "second try", 10, 2, -1);
    struct mkb_chat_client *c = client(0.5, 3, NULL);
    struct mkb_chat_reply r;
    double t0 = mkb_chat_now();
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    double took = mkb_chat_now() - t0;
    cr_assert(took >= 0.45 && took < 2.5, "took %.2f s", took);
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(r.attempts, 0), "error")), "imeout"));
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, rejected_key_is_not_retried_and_names_the_variable, .init = setup, .fini = teardown) {
    srv_push(&S, 401, "{\"error\":{\"message\":\"Incorrect API key provided\",\"code\":\"invalid_api_key\"}}", NULL, 0);
    struct mkb_chat_client *c = client(5, 5, NULL);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_ERR_INVALID);
    cr_assert_eq(r.fail, MKB_CHAT_AUTH);
    cr_assert_eq(srv_count(&S), 1, "a bad key is not retried");
    cr_assert(strstr(mkb_error_message(), "TEST_KEY"), "%s", mkb_error_message());
    cr_assert(strstr(mkb_error_message(), "Incorrect API key"), "%s", mkb_error_message());
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, unknown_model_context_overflow_and_no_tools_are_classified, .init = setup, .fini = teardown) {
    srv_push(&S, 404, "{\"error\":{\"message\":\"The model `nope` does not exist\",\"code\":\"model_not_found\"}}",
             NULL, 0);
    srv_push(&S, 400, "{\"error\":{\"message\":\"nope is not a valid model ID\",\"code\":400}}", NULL, 0);
    srv_push(&S, 400,
             "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\",\"code\":"
             "\"context_length_exceeded\"}}",
             NULL, 0);
    srv_push(&S, 400, "{\"message\":\"\\\"auto\\\" tool choice requires --enable-auto-tool-choice\",\"code\":400}",
             NULL, 0);
    srv_push(&S, 400, "{\"error\":{\"message\":\"temperature must be <= 2\"}}", NULL, 0);
    struct mkb_chat_client *c = client(5, 5, NULL);
    struct mkb_chat_reply r;
    enum mkb_chat_fail want[] = {MKB_CHAT_MODEL, MKB_CHAT_MODEL, MKB_CHAT_CONTEXT, MKB_CHAT_TOOLS, MKB_CHAT_REQUEST};
    for (int i = 0; i < 5; i++) {
        cr_assert_neq(call(c, &r), MKB_OK);
        cr_assert_eq(r.fail, want[i], "reply %d: %s (%s)", i, mkb_chat_fail_name(r.fail), mkb_error_message());
        if (i == 0) cr_assert(strstr(mkb_error_message(), "does not know model 'scripted'"), "%s", mkb_error_message());
        mkb_chat_reply_release(&r);
    }
    cr_assert_eq(srv_count(&S), 5, "none of these is retried");
    mkb_chat_client_free(c);
}

Test(chat, retries_run_out, .init = setup, .fini = teardown) {
    for (int i = 0; i < 3; i++) srv_push(&S, 503, "{\"error\":{\"message\":\"overloaded\"}}", NULL, 0);
    struct mkb_chat_client *c = client(5, 3, NULL);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_ERR_IO);
    cr_assert_eq(r.fail, MKB_CHAT_EXHAUSTED);
    cr_assert(strstr(mkb_error_message(), "3 times"), "%s", mkb_error_message());
    cr_assert(strstr(mkb_error_message(), "overloaded"), "%s", mkb_error_message());
    cr_assert_eq(srv_count(&S), 3);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, nothing_waits_past_the_deadline, .init = setup, .fini = teardown) {
    srv_push(&S, 429, "{\"error\":{\"message\":\"slow down\"}}", "3600", 0);
    srv_push(&S, 200, "{}", NULL, 10.0);
    struct mkb_chat_client *c = client(30, 5, NULL);
    struct mkb_chat_reply r;
    /* a Retry-After past the deadline (3600 s, 3.6 s at the test scale) ends the call at once */
    mkb_chat_client_set_deadline(c, mkb_chat_now() + 0.3);
    double t0 = mkb_chat_now();
    cr_assert_neq(call(c, &r), MKB_OK);
    cr_assert_eq(r.fail, MKB_CHAT_DEADLINE, "%s", mkb_error_message());
    mkb_chat_reply_release(&r);
    /* a hanging server is cut at the deadline, not at the 30 s request timeout */
    mkb_chat_client_set_deadline(c, mkb_chat_now() + 0.8);
    cr_assert_neq(call(c, &r), MKB_OK);
    cr_assert_eq(r.fail, MKB_CHAT_DEADLINE, "%s", mkb_error_message());
    double took = mkb_chat_now() - t0;
    cr_assert(took < 2.5, "took %.2f s", took);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, cancel_flag_stops_a_call, .init = setup, .fini = teardown) {
    srv_push(&S, 200, "{}", NULL, 5.0);
    struct mkb_model_target t;
    memset(&t, 0, sizeof t);
    strcpy(t.provider, "custom");
    strcpy(t.model, "m");
    snprintf(t.base_url, sizeof t.base_url, "%s", S.base_url);
    struct mkb_chat_options o;
    mkb_chat_options_default(&o);
    static volatile sig_atomic_t cancel = 1;
    o.cancel = &cancel;
    struct mkb_chat_client *c;
    cr_assert_eq(mkb_chat_client_new(&t, &o, &c), MKB_OK);
    struct mkb_chat_reply r;
    double t0 = mkb_chat_now();
    cr_assert_neq(call(c, &r), MKB_OK);
    cr_assert_eq(r.fail, MKB_CHAT_CANCELLED);
    cr_assert(mkb_chat_now() - t0 < 2);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

static const char sse_ok[] =
    "data: {\"id\":\"s1\",\"model\":\"qwen-think\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
    "\"reasoning_content\":\"Let me \"}}]}\n\n"
    "data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think.\"}}]}\n\n"
    ": keep-alive comment\n\n"
    "data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Running \"}}]}\n\n"
    "data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ls.\",\"tool_calls\":[{\"index\":0,"
    "\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"comm\"}}]}}]}\n\n"
    "data: {\"id\":\"s1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
    "\"arguments\":\"and\\\": \\\"ls\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: {\"id\":\"s1\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":9,"
    "\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n"
    "data: [DONE]\n\n";

Test(chat, a_streamed_reply_is_assembled, .init = setup, .fini = teardown) {
    srv_push(&S, 200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\"}}]}\n\n", NULL, 0);
    srv_push(&S, 200, "data: {\"error\":{\"message\":\"upstream overloaded\",\"code\":502}}\n\n", NULL, 0);
    srv_push(&S, 200, sse_ok, NULL, 0);
    struct mkb_model_target t;
    memset(&t, 0, sizeof t);
    strcpy(t.provider, "custom");
    strcpy(t.model, "m");
    snprintf(t.base_url, sizeof t.base_url, "%s", S.base_url);
    struct mkb_chat_options o;
    mkb_chat_options_default(&o);
    o.retry_scale = 0.001;
    o.stream = true;
    struct mkb_chat_client *c;
    cr_assert_eq(mkb_chat_client_new(&t, &o, &c), MKB_OK);
    struct mkb_chat_reply r;
    cr_assert_eq(call(c, &r), MKB_OK, "%s", mkb_error_message());
    json_t *req = srv_request(&S, 0);
    cr_assert(json_is_true(json_object_get(req, "stream")));
    cr_assert(json_is_true(json_object_get(json_object_get(req, "stream_options"), "include_usage")));
    cr_assert_eq(json_array_size(r.attempts), 2);
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(r.attempts, 0), "error")), "ended early"));
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(r.attempts, 1), "error")), "upstream overloaded"));
    cr_assert_str_eq(json_string_value(json_object_get(r.message, "content")), "Running ls.");
    cr_assert_str_eq(json_string_value(json_object_get(r.message, "reasoning_content")), "Let me think.");
    json_t *call0 = json_array_get(json_object_get(r.message, "tool_calls"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(call0, "id")), "call_a");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(call0, "function"), "name")), "bash");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(call0, "function"), "arguments")),
                     "{\"command\": \"ls\"}");
    cr_assert_str_eq(r.finish_reason, "tool_calls");
    cr_assert_str_eq(r.model, "qwen-think");
    cr_assert_eq(r.usage.prompt_tokens, 40);
    cr_assert_eq(r.usage.completion_tokens, 9);
    cr_assert_eq(r.usage.cached_tokens, 8);
    mkb_chat_reply_release(&r);
    mkb_chat_client_free(c);
}

Test(chat, retry_after_forms) {
    cr_assert_float_eq(mkb_chat_parse_retry_after("7", 0), 7.0, 1e-9);
    cr_assert_float_eq(mkb_chat_parse_retry_after(" 1.5 ", 0), 1.5, 1e-9);
    /* Wed, 21 Oct 2015 07:28:00 GMT is 1445412480 */
    cr_assert_float_eq(mkb_chat_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0), 10.0, 1e-9);
    cr_assert_float_eq(mkb_chat_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490.0), 0.0, 1e-9);
    cr_assert_lt(mkb_chat_parse_retry_after("soon", 0), 0);
    cr_assert_lt(mkb_chat_parse_retry_after("", 0), 0);
}

Test(chat, retry_scale_from_the_environment) {
    setenv(MKB_RETRY_SCALE_ENV, "0.01", 1);
    struct mkb_chat_options o;
    mkb_chat_options_default(&o);
    cr_assert_float_eq(o.retry_scale, 0.01, 1e-12);
    setenv(MKB_RETRY_SCALE_ENV, "fast", 1);
    mkb_chat_options_default(&o);
    cr_assert_float_eq(o.retry_scale, 1.0, 1e-12);
    unsetenv(MKB_RETRY_SCALE_ENV);
}
