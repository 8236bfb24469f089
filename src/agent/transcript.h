/* A trial's transcript: JSON lines, one event each ({"type": ..., "t": seconds since the
 * transcript was opened, ...}), compressed with zstd. Events are buffered and written as one
 * zstd frame at each flush (the agent flushes every turn), so a process killed at any moment
 * leaves a readable transcript that ends at the last flush; `zstd -dc` reads it too.
 * Opening appends, so a runner can add events (the final verdict) after the agent closed it.
 *
 * "t" counts from the trial's start when the opener passes it, so these events merge by time with
 * the runner's own transcript.jsonl (mailbox events) in `mkb show`.
 * Event types the agent writes: start, message (role, content, tool_calls, reasoning), call
 * (usage, latency, retries of one model call), tool (a tool's arguments and output), submission,
 * context (trimming), note, end. Readers ignore fields and types they do not know.
 *
 * Writers are thread-safe (a mailbox thread may add submissions while the agent runs).
 * It does not render anything (cmd_show.c does).
 * Ownership: mkb_agent_transcript_add steals the event object; mkb_agent_transcript_read returns a new
 * array reference. */
#ifndef MKB_AGENT_TRANSCRIPT_H
#define MKB_AGENT_TRANSCRIPT_H

#include <stdbool.h>

#include <jansson.h>

#include "core/status.h"

/* The file name of a trial's transcript in its directory. */
#define MKB_TRANSCRIPT_NAME "transcript.jsonl.zst"

struct mkb_agent_transcript;

/* t0: the CLOCK_MONOTONIC time (mkb_chat_now(), mkb_proc_now()) events count "t" from, so they
 * line up with the trial's other logs; 0 for now. */
enum mkb_status mkb_agent_transcript_open(const char *path, double t0, struct mkb_agent_transcript **out);
/* Add an event (stolen; "type" and "t" are set here). Buffered until the next flush; a large
 * buffer flushes by itself. */
enum mkb_status mkb_agent_transcript_add(struct mkb_agent_transcript *t, const char *type, json_t *event);
/* Write the buffered events as one frame and fsync. */
enum mkb_status mkb_agent_transcript_flush(struct mkb_agent_transcript *t);
/* Flush and close; NULL is fine. The status is the flush's. */
enum mkb_status mkb_agent_transcript_close(struct mkb_agent_transcript *t);

/* Every event of a transcript in order. *complete is false when the file ends inside a frame or
 * a line (the writer was killed mid-write): the events before are still returned. Plain
 * (uncompressed) JSON lines are read too. */
enum mkb_status mkb_agent_transcript_read(const char *path, json_t **events, bool *complete);

#endif
