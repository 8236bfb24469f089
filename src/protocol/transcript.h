/* A trial's transcript.jsonl: one JSON object per line, each with "t" (seconds since the trial
 * started) and "type": "start", "output" (a chunk of an agent command's stdout/stderr as text,
 * split at line ends), "submitted", "submission" ({"index", "submission": {"elapsed_s",
 * "verdict"}}, the shape the built-in agent's transcript uses), "refused", "mailbox_error",
 * "end", "final_verdict". Output bytes that are not UTF-8
 * become '?'. Lines are written whole with one write() each; the total of output text kept is
 * capped, after which one "output_dropped" event says how much was left out.
 *
 * Thread-safe: the agent's output arrives on the trial's thread, mailbox events on the mailbox's.
 * It does not interpret output. Ownership: events passed in are stolen (decref'ed here). */
#ifndef MKB_PROTOCOL_TRANSCRIPT_H
#define MKB_PROTOCOL_TRANSCRIPT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct mkb_transcript {
    int fd;
    pthread_mutex_t mu;
    double t0;            /* mkb_proc_now() at the trial's start */
    int64_t kept, max;    /* output bytes written, and the cap */
    int64_t dropped;
    char pending[4096];   /* output not yet ended by a newline */
    size_t npending;
};

enum mkb_status mkb_transcript_open(struct mkb_transcript *t, const char *path, double t0, int64_t max_output);
/* Add "t" and write the event (stolen). */
void mkb_transcript_event(struct mkb_transcript *t, json_t *event);
/* A chunk of agent output (a proc.h on_output callback; ctx is the transcript). */
void mkb_transcript_output(void *ctx, const char *data, int64_t n);
/* Flush pending output and close. */
void mkb_transcript_close(struct mkb_transcript *t);

#endif
