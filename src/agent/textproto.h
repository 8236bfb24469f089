/* The text protocol for models without tool calling. A reply must hold exactly one action:
 *
 *     ```bash            (or ```sh)
 *     <the command>
 *     ```
 *
 * or the line TASK_COMPLETE on its own to end the attempt. Prose around the action is free.
 * Inside the block, fences that name a language (```python) nest until their bare ``` closes
 * them, so a heredoc can write Markdown with code blocks.
 * Anything else (no block, two blocks, a block never closed, a block and TASK_COMPLETE) is a
 * format error whose text tells the model what was wrong; the agent sends it back and asks again.
 *
 * It does not run anything. Ownership: a parsed command is malloc'ed; the caller frees it. */
#ifndef MKB_AGENT_TEXTPROTO_H
#define MKB_AGENT_TEXTPROTO_H

#include <stddef.h>

#include "core/status.h"

#define MKB_TEXT_DONE_WORD "TASK_COMPLETE"

enum mkb_text_action { MKB_TEXT_COMMAND, MKB_TEXT_DONE };

/* On success *kind is set and, for a command, *command is the block's text (malloc'ed).
 * On a format error returns MKB_ERR_INVALID with why filled for the model. */
enum mkb_status mkb_text_parse(const char *reply, enum mkb_text_action *kind, char **command, char *why,
                               size_t cap);

/* The protocol's rules as they are told to the model. */
const char *mkb_text_protocol_rules(void);

#endif
