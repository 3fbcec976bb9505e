package storage

// SetOpenDirHook lets the external tests kill the process at a stage of a
// directory's creation.
func SetOpenDirHook(f func(stage string)) { openDirHook = f }
