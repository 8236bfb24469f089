/* Where a model lives: a model id with a provider prefix (openrouter/z-ai/glm-5.3,
 * deepseek/deepseek-v4-pro, dashscope/qwen3-coder-plus, openai/gpt-5) becomes a base URL, the
 * name sent to the API and the API key, read from the environment or a .env file.
 * --base-url points any other OpenAI-compatible server (vLLM, llama.cpp, SGLang) at mkb.
 *
 * It does not talk to the network (chat.h does) and never prints a key: the structs below hold
 * the key only so the client can send it, and mkb_model_target_json() leaves it out.
 * Ownership: plain value structs with fixed buffers; nothing to free. */
#ifndef MKB_AGENT_PROVIDER_H
#define MKB_AGENT_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/status.h"

struct mkb_provider {
    const char *name;         /* the model-id prefix: "openrouter" */
    const char *base_url;     /* default base URL, without the trailing /chat/completions */
    const char *key_env;      /* the variable holding the API key */
    const char *base_url_env; /* a variable that overrides base_url (a regional endpoint) */
    const char *reasoning_field; /* the assistant-message field carrying reasoning to send back
                                    in later requests ("reasoning_details"), or NULL */
    bool stream;              /* ask for streamed replies by default (some of its models answer
                                 only so) */
};

/* The known providers, terminated by a row with name == NULL. */
extern const struct mkb_provider mkb_providers[];
const struct mkb_provider *mkb_provider_find(const char *name);

struct mkb_model_target {
    char model_id[256];  /* as the user wrote it: "openrouter/z-ai/glm-5.3" */
    char provider[32];   /* "openrouter", or "custom" for --base-url */
    char model[256];     /* the name sent in requests: "z-ai/glm-5.3" */
    char base_url[1024]; /* "https://openrouter.ai/api/v1" */
    char key_env[64];    /* where the key came from ("" for none) */
    char key_source[16]; /* "environment", ".env" or "" */
    char api_key[1024];  /* "" when the server needs none (a local server) */
    char reasoning_field[32]; /* see struct mkb_provider; "" for none */
    bool stream;              /* see struct mkb_provider */
};

struct mkb_model_options {
    const char *base_url; /* --base-url: any OpenAI-compatible server; NULL for the provider's */
    const char *key_env;  /* --api-key-env: the variable to read the key from; NULL for default */
    const char *env_file; /* a .env file to read keys from; NULL for "./.env" if it exists */
};

/* Resolve a model id. With a known prefix the prefix picks the provider and is stripped from the
 * name sent. With opt->base_url any id works: a known prefix is still stripped, anything else is
 * sent as written; the key is read from opt->key_env or MKB_API_KEY and may be absent.
 * Errors: an unknown prefix without --base-url, or a missing key for a hosted provider, name the
 * variable to set. */
enum mkb_status mkb_model_resolve(const char *model_id, const struct mkb_model_options *opt,
                                  struct mkb_model_target *out);

/* The target as JSON for transcripts and records: everything but the key. New reference. */
json_t *mkb_model_target_json(const struct mkb_model_target *t);

/* Look NAME up in a .env file (lines NAME=value, optional "export ", quotes, # comments).
 * *found is false when the file or the name is absent; malformed files are an error. */
enum mkb_status mkb_dotenv_get(const char *path, const char *name, char *buf, size_t cap, bool *found);

#endif
