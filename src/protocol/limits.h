/* Size limits of the protocol's files, shared by the task text, the mailbox and the runner. */
#ifndef MKB_PROTOCOL_LIMITS_H
#define MKB_PROTOCOL_LIMITS_H

#define MKB_KERNEL_MAX_BYTES 300000 /* kernel.py, as DESIGN §5 states */
#define MKB_SKILL_MAX_BYTES 12000   /* SKILL.md as passed on to another attempt (and the placebo) */

#endif
