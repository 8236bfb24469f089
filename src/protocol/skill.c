/* Skill texts and composed instructions (see skill.h). */
#include "protocol/skill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "protocol/files.h"
#include "protocol/strbuf.h"
#include "protocol/limits.h"
#include "protocol/template.h"

/* Bytes read of a source's SKILL.md: enough to know its size class and to cut it. */
#define SKILL_READ_MAX (4 << 20)

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return false;
    return true;
}

static enum mkb_status finish(struct mkb_skill *out, char *text, size_t len, int64_t source_bytes) {
    out->source_bytes = source_bytes;
    if (len > MKB_SKILL_MAX_BYTES) {
        size_t keep = MKB_SKILL_MAX_BYTES - 64;
        /* back to the last line break, else to the start of a UTF-8 character */
        size_t nl = keep;
        while (nl > 0 && text[nl - 1] != '\n') nl--;
        if (nl > keep / 2) keep = nl;
        else
            while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80) keep--;
        char tail[96];
        int tn = snprintf(tail, sizeof tail, "\n[... cut: SKILL.md is limited to %d bytes]\n", MKB_SKILL_MAX_BYTES);
        memcpy(text + keep, tail, (size_t)tn + 1);
        len = keep + (size_t)tn;
        out->cut = true;
    }
    out->text = text;
    out->len = len;
    out->present = true;
    return mkb_sha256_hex(text, len, out->sha256);
}

enum mkb_status mkb_skill_from_file(const char *path, struct mkb_skill *out) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t len;
    bool truncated;
    enum mkb_status s = mkb_read_untrusted(path, SKILL_READ_MAX, &text, &len, &truncated);
    if (s == MKB_ERR_NOT_FOUND) {
        mkb_error_clear();
        return MKB_OK;
    }
    MKB_TRY(s);
    if (blank(text, len)) {
        free(text);
        return MKB_OK;
    }
    /* the read buffer holds SKILL_READ_MAX + 2 bytes: room for the cut note */
    return finish(out, text, len, truncated ? (int64_t)SKILL_READ_MAX : (int64_t)len);
}

enum mkb_status mkb_skill_placebo(struct mkb_skill *out) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t len;
    MKB_TRY(mkb_template_load("placebo_skill.md", &text, &len));
    if (len > MKB_SKILL_MAX_BYTES) {
        free(text);
        return mkb_error(MKB_ERR_INVALID, "templates/placebo_skill.md is %zu bytes, over the %d-byte skill limit", len,
                         MKB_SKILL_MAX_BYTES);
    }
    return finish(out, text, len, (int64_t)len);
}

void mkb_skill_release(struct mkb_skill *s) {
    free(s->text);
    memset(s, 0, sizeof *s);
}

enum mkb_status mkb_instruction_compose(const char *task_instruction, const struct mkb_budget *b,
                                        const struct mkb_skill *skill, char **out) {
    char minutes[32], subs[32];
    double m = b->wall_s / 60.0;
    if (m == (double)(int64_t)m)
        snprintf(minutes, sizeof minutes, "%lld", (long long)m);
    else
        snprintf(minutes, sizeof minutes, "%.1f", m);
    snprintf(subs, sizeof subs, "%lld", (long long)b->submissions);
    const struct mkb_tvar vars[] = {{"budget.wall_minutes", minutes}, {"budget.submissions", subs}};
    char *body;
    MKB_TRY(mkb_template_render("INSTRUCTION.md", task_instruction, vars, 2, NULL, &body));
    if (!skill || !skill->present) {
        *out = body;
        return MKB_OK;
    }
    char *header = NULL, *footer = NULL;
    enum mkb_status s = mkb_template_load("skill_header.md", &header, NULL);
    if (s == MKB_OK) s = mkb_template_load("skill_footer.md", &footer, NULL);
    if (s != MKB_OK) {
        free(body);
        free(header);
        return s;
    }
    struct mkb_strbuf sb = {0};
    mkb_strbuf_puts(&sb, body);
    mkb_strbuf_puts(&sb, header);
    mkb_strbuf_put(&sb, skill->text, skill->len);
    if (skill->len && skill->text[skill->len - 1] != '\n') mkb_strbuf_puts(&sb, "\n");
    mkb_strbuf_puts(&sb, footer);
    free(body);
    free(header);
    free(footer);
    *out = mkb_strbuf_take(&sb);
    if (!*out) return mkb_error(MKB_ERR_NOMEM, "out of memory composing an instruction");
    return MKB_OK;
}
