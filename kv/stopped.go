package kv

// Done returns a channel closed once the KV stops applying the log: it
// was closed, its Log closed, or a read failed (Err says which). A
// service that keeps a KV running watches it: after ErrStopped (the log
// start passed the KV, say, because the node installed a snapshot its
// leader shipped) it closes this KV and opens another, which restores
// the newest snapshot.
func (k *KV) Done() <-chan struct{} { return k.done }

// Err returns why the KV stopped applying the log: nil while it runs,
// then an error wrapping ErrClosed or ErrStopped (and the read's error).
func (k *KV) Err() error { return k.stopped() }
