/* The text protocol (see textproto.h). */
#include "agent/textproto.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mkb_text_protocol_rules(void) {
    return "Your tools are used through plain text. Every reply must contain exactly one action:\n"
           "- to run a shell command, one fenced block:\n"
           "```bash\n"
           "<command>\n"
           "```\n"
           "  (write files with a heredoc, e.g. cat > kernel.py <<'EOF' ... EOF);\n"
           "- to end the attempt, the line " MKB_TEXT_DONE_WORD " on its own, with no block.\n"
           "Inside the block, fences that name a language (```python ... ```) may nest, e.g. in a\n"
           "heredoc that writes Markdown; a bare ``` line closes the innermost open fence.\n"
           "Explain your reasoning before the action if you like. A reply with no action, two\n"
           "actions or an unclosed block is not run: you will be asked to answer again.\n";
}

/* A line [s, e) with trailing spaces and a CR removed equals word. */
static bool line_is(const char *s, const char *e, const char *word) {
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    size_t n = strlen(word);
    return (size_t)(e - s) == n && !memcmp(s, word, n);
}

/* A fence opening line: ```bash or ```sh (optionally ```shell, ```console), nothing after. */
static bool is_open_fence(const char *s, const char *e) {
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    return line_is(s, e, "```bash") || line_is(s, e, "```sh") || line_is(s, e, "```shell");
}

static bool is_fence_line(const char *s, const char *e) {
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    return e - s >= 3 && !memcmp(s, "```", 3);
}

enum mkb_status mkb_text_parse(const char *reply, enum mkb_text_action *kind, char **command, char *why,
                               size_t cap) {
    *command = NULL;
    int blocks = 0, done = 0, unclosed = 0;
    const char *cmd_start = NULL, *cmd_end = NULL;
    bool in_block = false, in_other = false;
    int depth = 0;
    const char *block_start = NULL;
    for (const char *s = reply; *s;) {
        const char *e = strchr(s, '\n');
        if (!e) e = s + strlen(s);
        if (in_block) {
            if (!line_is(s, e, "```") && is_fence_line(s, e)) {
                depth++; /* a fence with a language inside the command (a heredoc of Markdown) */
            } else if (line_is(s, e, "```") && depth > 0) {
                depth--;
            } else if (line_is(s, e, "```")) {
                in_block = false;
                blocks++;
                if (blocks == 1) {
                    cmd_start = block_start;
                    cmd_end = s;
                }
            }
        } else if (in_other) {
            if (line_is(s, e, "```")) in_other = false;
        } else if (is_open_fence(s, e)) {
            in_block = true;
            block_start = *e ? e + 1 : e;
        } else if (is_fence_line(s, e)) {
            in_other = true; /* a block in another language (python, text...) is prose */
        } else if (line_is(s, e, MKB_TEXT_DONE_WORD)) {
            done++;
        }
        s = *e ? e + 1 : e;
    }
    if (in_block) unclosed = 1;
    if (unclosed) {
        snprintf(why, cap, "the ```bash block is not closed: end it with a line holding only ```");
        return MKB_ERR_INVALID;
    }
    if (blocks + (done > 0) == 0) {
        snprintf(why, cap,
                 "your reply has no action: include exactly one ```bash block with the command to run, or the "
                 "line " MKB_TEXT_DONE_WORD " to end the attempt");
        return MKB_ERR_INVALID;
    }
    if (blocks > 1) {
        snprintf(why, cap,
                 "your reply has %d ```bash blocks: send exactly one per reply (join commands with && or put them "
                 "in one block)",
                 blocks);
        return MKB_ERR_INVALID;
    }
    if (blocks == 1 && done) {
        snprintf(why, cap,
                 "your reply has both a ```bash block and " MKB_TEXT_DONE_WORD
                 ": run the command first, then end the attempt in a later reply");
        return MKB_ERR_INVALID;
    }
    if (done) {
        *kind = MKB_TEXT_DONE;
        return MKB_OK;
    }
    size_t n = (size_t)(cmd_end - cmd_start);
    while (n > 0 && (cmd_start[n - 1] == '\n' || cmd_start[n - 1] == '\r')) n--;
    bool blank = true;
    for (size_t i = 0; i < n; i++)
        if (cmd_start[i] != ' ' && cmd_start[i] != '\t' && cmd_start[i] != '\n' && cmd_start[i] != '\r') blank = false;
    if (blank) {
        snprintf(why, cap, "the ```bash block is empty: put the command to run inside it");
        return MKB_ERR_INVALID;
    }
    char *c = malloc(n + 1);
    if (!c) return MKB_ERR_NOMEM;
    memcpy(c, cmd_start, n);
    c[n] = '\0';
    *command = c;
    *kind = MKB_TEXT_COMMAND;
    return MKB_OK;
}
