"""The run queue and what runs it: runs recorded and claimed in order per session, the workers and their slots,
pauses, run events, a turn and the commit of its end, and the background jobs. It knows no messaging."""
