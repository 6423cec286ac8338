#ifndef HAMMOCK_SYSTEM_H
#define HAMMOCK_SYSTEM_H

/// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are
/// re-parented to it instead of init. prctl is variadic, which Swift cannot call directly. Returns 0 on success.
int hammock_become_child_subreaper(void);

#endif
