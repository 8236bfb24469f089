/* Model ids to endpoints and keys (see provider.h). */
#include "agent/provider.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"

const struct mkb_provider mkb_providers[] = {
    {"openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL",
     "reasoning_details", false},
    {"openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL", NULL, false},
    {"deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "reasoning_content", false},
    /* DashScope's thinking models (Qwen3 in thinking mode, QwQ) answer only as a stream */
    {"dashscope", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY",
     "DASHSCOPE_BASE_URL", NULL, true},
    {NULL, NULL, NULL, NULL, NULL, false},
};

const struct mkb_provider *mkb_provider_find(const char *name) {
    for (const struct mkb_provider *p = mkb_providers; p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

static enum mkb_status copy_str(char *dst, size_t cap, const char *src, const char *what) {
    size_t n = strlen(src);
    if (n >= cap) return mkb_error(MKB_ERR_INVALID, "%s is too long (%zu bytes, at most %zu)", what, n, cap - 1);
    memcpy(dst, src, n + 1);
    return MKB_OK;
}

/* ---- .env ---- */

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

enum mkb_status mkb_dotenv_get(const char *path, const char *name, char *buf, size_t cap, bool *found) {
    *found = false;
    char *data = NULL;
    enum mkb_status st = mkb_read_file(path, &data, NULL);
    if (st == MKB_ERR_NOT_FOUND) {
        mkb_error_clear();
        return MKB_OK;
    }
    MKB_TRY(st);
    int lineno = 0;
    char *save = NULL;
    st = MKB_OK;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        if (!strncmp(s, "export ", 7)) s = trim(s + 7);
        char *eq = strchr(s, '=');
        if (!eq) {
            st = mkb_error(MKB_ERR_INVALID, "'%s' line %d: expected NAME=value", path, lineno);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (strcmp(key, name)) continue;
        size_t n = strlen(val);
        if (n >= 2 && (val[0] == '"' || val[0] == '\'') && val[n - 1] == val[0]) {
            val[n - 1] = '\0';
            val++;
        } else {
            /* an unquoted value ends at a comment that follows a space */
            char *hash = strstr(val, " #");
            if (hash) *hash = '\0';
            val = trim(val);
        }
        if (strlen(val) >= cap) {
            st = mkb_error(MKB_ERR_INVALID, "'%s' line %d: the value of %s is too long", path, lineno, name);
            break;
        }
        strcpy(buf, val);
        *found = true; /* the last assignment wins, as in a shell */
    }
    free(data);
    return st;
}

/* ---- resolution ---- */

static enum mkb_status read_key(const char *var, const char *env_file, struct mkb_model_target *out, bool *found) {
    *found = false;
    const char *v = getenv(var);
    if (v && *v) {
        MKB_TRY(copy_str(out->api_key, sizeof out->api_key, v, var));
        strcpy(out->key_source, "environment");
        *found = true;
        return MKB_OK;
    }
    const char *path = env_file ? env_file : ".env";
    if (env_file && access(env_file, R_OK) != 0)
        return mkb_error(MKB_ERR_NOT_FOUND, "cannot read the env file '%s': %s", env_file, strerror(errno));
    MKB_TRY(mkb_dotenv_get(path, var, out->api_key, sizeof out->api_key, found));
    if (*found && !out->api_key[0]) *found = false;
    if (*found) strcpy(out->key_source, ".env");
    return MKB_OK;
}

enum mkb_status mkb_model_resolve(const char *model_id, const struct mkb_model_options *opt,
                                  struct mkb_model_target *out) {
    static const struct mkb_model_options none = {0};
    if (!opt) opt = &none;
    memset(out, 0, sizeof *out);
    if (!model_id || !*model_id) return mkb_error(MKB_ERR_INVALID, "no model given");
    MKB_TRY(copy_str(out->model_id, sizeof out->model_id, model_id, "the model id"));

    const struct mkb_provider *p = NULL;
    const char *slash = strchr(model_id, '/');
    if (slash) {
        char prefix[32];
        size_t n = (size_t)(slash - model_id);
        if (n < sizeof prefix) {
            memcpy(prefix, model_id, n);
            prefix[n] = '\0';
            p = mkb_provider_find(prefix);
        }
    }
    const char *name = p ? slash + 1 : model_id;
    if (!*name) return mkb_error(MKB_ERR_INVALID, "model id '%s' names a provider but no model", model_id);
    MKB_TRY(copy_str(out->model, sizeof out->model, name, "the model name"));

    if (opt->base_url && *opt->base_url) {
        strcpy(out->provider, p ? p->name : "custom");
        MKB_TRY(copy_str(out->base_url, sizeof out->base_url, opt->base_url, "--base-url"));
        if (p && p->reasoning_field) strcpy(out->reasoning_field, p->reasoning_field);
        out->stream = p && p->stream;
        const char *var = opt->key_env ? opt->key_env : (p ? p->key_env : "MKB_API_KEY");
        MKB_TRY(copy_str(out->key_env, sizeof out->key_env, var, "--api-key-env"));
        bool found;
        MKB_TRY(read_key(var, opt->env_file, out, &found));
        if (!found && opt->key_env)
            return mkb_error(MKB_ERR_INVALID, "no API key: %s is not set in the environment or in %s", var,
                             opt->env_file ? opt->env_file : ".env");
        if (!found) out->key_env[0] = '\0'; /* a local server that needs no key */
    } else {
        if (!p) {
            char known[256] = "";
            for (const struct mkb_provider *q = mkb_providers; q->name; q++) {
                strcat(known, q == mkb_providers ? "" : ", ");
                strcat(known, q->name);
            }
            if (!slash)
                return mkb_error(MKB_ERR_INVALID,
                                 "model id '%s' has no provider prefix; write <provider>/<model> with a provider "
                                 "among %s, or give --base-url for another OpenAI-compatible server",
                                 model_id, known);
            return mkb_error(MKB_ERR_INVALID,
                             "unknown provider '%.*s' in model id '%s'; known providers: %s; give --base-url for "
                             "another OpenAI-compatible server",
                             (int)(slash - model_id), model_id, model_id, known);
        }
        strcpy(out->provider, p->name);
        const char *base = getenv(p->base_url_env);
        MKB_TRY(copy_str(out->base_url, sizeof out->base_url, base && *base ? base : p->base_url, p->base_url_env));
        if (p->reasoning_field) strcpy(out->reasoning_field, p->reasoning_field);
        out->stream = p->stream;
        const char *var = opt->key_env ? opt->key_env : p->key_env;
        MKB_TRY(copy_str(out->key_env, sizeof out->key_env, var, "--api-key-env"));
        bool found;
        MKB_TRY(read_key(var, opt->env_file, out, &found));
        if (!found)
            return mkb_error(MKB_ERR_INVALID, "no API key for %s: set %s in the environment or in %s", p->name, var,
                             opt->env_file ? opt->env_file : "./.env");
    }
    size_t n = strlen(out->base_url);
    while (n > 0 && out->base_url[n - 1] == '/') out->base_url[--n] = '\0';
    if (strncmp(out->base_url, "http://", 7) && strncmp(out->base_url, "https://", 8))
        return mkb_error(MKB_ERR_INVALID, "base URL '%s' must start with http:// or https://", out->base_url);
    for (const char *c = out->api_key; *c; c++)
        if (!isprint((unsigned char)*c))
            return mkb_error(MKB_ERR_INVALID, "the API key in %s holds a non-printable character", out->key_env);
    return MKB_OK;
}

json_t *mkb_model_target_json(const struct mkb_model_target *t) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:b}", "model_id", t->model_id, "provider", t->provider,
                     "model", t->model, "base_url", t->base_url, "key_env", t->key_env[0] ? t->key_env : NULL,
                     "key_source", t->key_source[0] ? t->key_source : NULL, "stream", t->stream);
}
