/* Skills: the text a skill-conditioned trial is given, and the instruction it is appended to.
 *
 * - A skill (<src>2<dst>_skill) or self (self_<dsl>) trial is given its source solo's SKILL.md as
 *   the store holds it, whether or not the source passed. A SKILL.md that is missing or blank
 *   means there is no skill: the trial is a recorded skip. A SKILL.md over MKB_SKILL_MAX_BYTES
 *   is cut at the last line break before the limit (never inside a UTF-8 character) with a note.
 * - A placebo trial is given templates/placebo_skill.md: skill-shaped, no problem knowledge, within
 *   the same length budget.
 * The skill's sha256 is of the exact text given (after any cut): it is the record's
 * stamps.skill_sha256, and a change of it makes the trial STALE.
 *
 * The instruction a trial reads is the task's INSTRUCTION.md with {{budget.*}} filled, followed,
 * for arms given a skill, by templates/skill_header.md, the skill text and
 * templates/skill_footer.md. The header is the same for every arm given a skill (placebo
 * included), so the framing is not a cue.
 *
 * Ownership: struct mkb_skill's text is malloc'ed (mkb_skill_release); composed instructions are
 * malloc'ed and freed by the caller. */
#ifndef MKB_PROTOCOL_SKILL_H
#define MKB_PROTOCOL_SKILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sha256.h"
#include "core/status.h"

struct mkb_skill {
    bool present;              /* there is a skill to give */
    char *text;                /* the text given (NULL when absent) */
    size_t len;
    bool cut;                  /* the source's file was longer than the limit */
    int64_t source_bytes;      /* size of the source's file */
    char sha256[MKB_SHA256_HEX]; /* of text; "" when absent */
};

/* The skill in the file path (a source trial's SKILL.md in the store). Absent file: present false. */
enum mkb_status mkb_skill_from_file(const char *path, struct mkb_skill *out);
/* The placebo skill. */
enum mkb_status mkb_skill_placebo(struct mkb_skill *out);
void mkb_skill_release(struct mkb_skill *s);

struct mkb_budget {
    double wall_s;       /* wall clock per attempt, waits included */
    int64_t submissions; /* counted GPU evaluations per attempt */
};

/* The instruction a trial reads: task_instruction with the budget filled, plus the skill (if
 * skill is non-NULL and present) under the header. */
enum mkb_status mkb_instruction_compose(const char *task_instruction, const struct mkb_budget *b,
                                        const struct mkb_skill *skill, char **out);

#endif
