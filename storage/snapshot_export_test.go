package storage

// SetSnapshotHook lets the external tests kill the process at a stage of a
// snapshot's save (see snapshotHook).
func SetSnapshotHook(f func(stage string)) { snapshotHook = f }
