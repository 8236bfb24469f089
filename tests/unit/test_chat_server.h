/* A scripted chat-completions server on loopback for the agent tests (libmicrohttpd, in the test
 * binary). Each POST takes the next scripted reply from a queue: a status and body, an optional
 * Retry-After, a delay (a hanging server), or a dropped connection. Rules that do not consume
 * the queue model a server's limits: a context window (requests larger than N bytes get the
 * OpenAI-style context-length 400) and a server without tool calling (requests with "tools" get
 * vLLM's 400). Every request body and its Authorization header are kept for the test to inspect.
 *
 * Header-only (static functions) so each test file that needs it includes it; nothing here
 * touches the network beyond 127.0.0.1. When the queue is empty the server answers 500
 * "script exhausted", which fails any test that did not expect it. */
#ifndef MKB_TEST_CHAT_SERVER_H
#define MKB_TEST_CHAT_SERVER_H

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SRV_MAX 128

struct srv_reply {
    int status; /* 0: close the connection without answering */
    char *body;
    char retry_after[64];
    double delay_s;
};

struct srv {
    struct MHD_Daemon *d;
    int port;
    char base_url[64];
    pthread_mutex_t lock;
    struct srv_reply q[SRV_MAX];
    int n, next;
    json_t *requests;    /* every request body, parsed (null when it was not JSON) */
    char auth[256];      /* the last Authorization header */
    long context_limit;  /* > 0: larger request bodies get a context-length 400 */
    bool reject_tools;   /* requests carrying "tools" get a 400 */
    int context_rejections, tool_rejections;
    volatile int stopping;
};

struct srv_conn {
    char *data;
    size_t len;
};

static inline void srv_push(struct srv *s, int status, const char *body, const char *retry_after, double delay_s) {
    pthread_mutex_lock(&s->lock);
    if (s->n < SRV_MAX) {
        struct srv_reply *r = &s->q[s->n++];
        r->status = status;
        r->body = strdup(body ? body : "");
        snprintf(r->retry_after, sizeof r->retry_after, "%s", retry_after ? retry_after : "");
        r->delay_s = delay_s;
    }
    pthread_mutex_unlock(&s->lock);
}

/* A chat completion whose message is msg (stolen), with usage; cost < 0 leaves it out. */
static inline void srv_push_message(struct srv *s, json_t *msg, const char *finish, long prompt, long completion, long cached,
                             double cost) {
    json_t *usage = json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", (int)prompt, "completion_tokens",
                              (int)completion, "total_tokens", (int)(prompt + completion), "prompt_tokens_details",
                              "cached_tokens", (int)cached);
    if (cost >= 0) json_object_set_new(usage, "cost", json_real(cost));
    json_t *body = json_pack("{s:s, s:s, s:s, s:[{s:i, s:o, s:s}], s:o}", "id", "chatcmpl-test", "object",
                             "chat.completion", "model", "scripted-model", "choices", "index", 0, "message", msg,
                             "finish_reason", finish, "usage", usage);
    char *text = json_dumps(body, JSON_COMPACT);
    srv_push(s, 200, text, NULL, 0);
    free(text);
    json_decref(body);
}

/* A reply that calls one tool; args is the arguments text exactly as the model sends it. */
static inline void srv_push_tool(struct srv *s, const char *name, const char *args, long prompt, long completion,
                          double cost) {
    static int id = 0;
    char call_id[32];
    snprintf(call_id, sizeof call_id, "call_%d", ++id);
    json_t *msg = json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant", "content",
                            "tool_calls", "id", call_id, "type", "function", "function", "name", name, "arguments",
                            args);
    srv_push_message(s, msg, "tool_calls", prompt, completion, 0, cost);
}

/* A plain text reply. */
static inline void srv_push_text(struct srv *s, const char *content, long prompt, long completion, double cost) {
    srv_push_message(s, json_pack("{s:s, s:s}", "role", "assistant", "content", content), "stop", prompt, completion,
                     0, cost);
}

static inline void srv_sleep(struct srv *s, double secs) {
    double left = secs;
    while (left > 0 && !s->stopping) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        left -= 0.01;
    }
}

static inline enum MHD_Result srv_send(struct MHD_Connection *c, int status, const char *body, const char *retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after && *retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static inline enum MHD_Result srv_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                   const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)url, (void)version;
    struct srv *s = cls;
    struct srv_conn *conn = *con_cls;
    if (!conn) {
        conn = calloc(1, sizeof *conn);
        *con_cls = conn;
        return MHD_YES;
    }
    if (*upload_size) {
        char *d = realloc(conn->data, conn->len + *upload_size + 1);
        if (!d) return MHD_NO;
        conn->data = d;
        memcpy(conn->data + conn->len, upload, *upload_size);
        conn->len += *upload_size;
        conn->data[conn->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "POST")) return srv_send(c, 405, "{\"error\":{\"message\":\"POST only\"}}", NULL);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    json_t *req = conn->data ? json_loadb(conn->data, conn->len, 0, NULL) : NULL;
    pthread_mutex_lock(&s->lock);
    snprintf(s->auth, sizeof s->auth, "%s", auth ? auth : "");
    json_array_append(s->requests, req ? req : json_null());
    bool too_long = s->context_limit > 0 && (long)conn->len > s->context_limit;
    bool tools = s->reject_tools && req && json_object_get(req, "tools");
    if (too_long) s->context_rejections++;
    if (tools && !too_long) s->tool_rejections++;
    struct srv_reply r = {500, NULL, "", 0};
    if (!too_long && !tools) {
        if (s->next < s->n)
            r = s->q[s->next++];
        else
            r.body = (char *)"{\"error\":{\"message\":\"script exhausted\"}}";
    }
    pthread_mutex_unlock(&s->lock);
    json_decref(req);
    if (too_long) { /* OpenAI's words, with a window of 3 bytes a token */
        char msg[512];
        snprintf(msg, sizeof msg,
                 "{\"error\":{\"message\":\"This model's maximum context length is %ld tokens. However, your "
                 "messages resulted in %ld tokens. Please reduce the length of the messages.\",\"type\":"
                 "\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}",
                 s->context_limit / 3, (long)conn->len / 3);
        return srv_send(c, 400, msg, NULL);
    }
    if (tools)
        return srv_send(c, 400,
                        "{\"object\":\"error\",\"message\":\"\\\"auto\\\" tool choice requires "
                        "--enable-auto-tool-choice and --tool-call-parser to be set\",\"type\":\"BadRequestError\","
                        "\"code\":400}",
                        NULL);
    if (r.delay_s > 0) srv_sleep(s, r.delay_s);
    if (r.status == 0) return MHD_NO; /* drop the connection */
    return srv_send(c, r.status, r.body, r.retry_after);
}

static inline void srv_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c, (void)t;
    struct srv_conn *conn = *con_cls;
    if (conn) {
        free(conn->data);
        free(conn);
    }
    *con_cls = NULL;
}

static inline bool srv_start(struct srv *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->requests = json_array();
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, srv_handler, s, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED,
                            srv_completed, s, MHD_OPTION_END);
    if (!s->d) return false;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    snprintf(s->base_url, sizeof s->base_url, "http://127.0.0.1:%d/v1", s->port);
    return s->port > 0;
}

static inline void srv_stop(struct srv *s) {
    s->stopping = 1;
    if (s->d) MHD_stop_daemon(s->d);
    for (int i = 0; i < s->n; i++) free(s->q[i].body);
    json_decref(s->requests);
    pthread_mutex_destroy(&s->lock);
}

static inline int srv_count(struct srv *s) {
    pthread_mutex_lock(&s->lock);
    int n = (int)json_array_size(s->requests);
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Request i (borrowed; valid until srv_stop). */
static json_t *srv_request(struct srv *s, int i) {
    pthread_mutex_lock(&s->lock);
    json_t *r = json_array_get(s->requests, (size_t)i);
    pthread_mutex_unlock(&s->lock);
    return r;
}

#endif
