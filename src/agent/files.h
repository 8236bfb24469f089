/* The agent's file tools, run by the host on the workspace: read (numbered lines, a window),
 * write (creating parent directories) and edit (replace one exact, unique string).
 *
 * Paths are relative to the workspace, or absolute under the workspace as the sandbox shows it
 * (sandbox_ws). Every component is opened without following symbolic links and ".." is refused,
 * so a tool can neither leave the workspace nor be led out of it by a link the command side made.
 * Run as root, new files and directories take the workspace directory's owner (the sandbox's
 * unprivileged uid), so the agent's commands can change what its file tools wrote.
 * Failures are for the model: MKB_ERR_INVALID / MKB_ERR_NOT_FOUND with a message that says what
 * to do instead. It does not run commands (exec.h does).
 * Ownership: *out strings are malloc'ed; the caller frees them. */
#ifndef MKB_AGENT_FILES_H
#define MKB_AGENT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct mkb_workspace {
    const char *dir;        /* host path */
    const char *sandbox_ws; /* the same directory as commands see it; NULL if the same */
};

/* Lines [first, first + count) (1-based; count 0 for all) as "   N\tline", at most max_bytes;
 * *out notes lines left out. */
enum mkb_status mkb_ws_read(const struct mkb_workspace *ws, const char *path, int64_t first, int64_t count,
                            int64_t max_bytes, char **out);
/* Create or replace a file with content; *out says what was written. */
enum mkb_status mkb_ws_write(const struct mkb_workspace *ws, const char *path, const char *content, size_t len,
                             char **out);
/* Replace the one occurrence of old_text with new_text; *out says which lines changed. */
enum mkb_status mkb_ws_edit(const struct mkb_workspace *ws, const char *path, const char *old_text,
                            const char *new_text, char **out);

#endif
