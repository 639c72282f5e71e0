"""The core: the run queue and its workers, the delivery service every transport uses, and the composition root."""
