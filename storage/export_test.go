package storage

// SetOpenDirHook lets the external tests kill the process at a stage of a
// directory's creation.
func SetOpenDirHook(f func(stage string)) { openDirHook = f }

// SetRollHook lets the external tests stop or kill the process at a stage
// of a roll or a deletion (see rollHook).
func SetRollHook(f func(stage string)) { rollHook = f }

// SetSealedOpenHook lets the external tests hold a reader before it opens
// a sealed segment.
func SetSealedOpenHook(f func(path string)) { sealedOpenHook = f }

// MaxOpenSealed is maxOpenSealed, for the tests.
const MaxOpenSealed = maxOpenSealed

// SegmentFileName is segmentFileName, for the tests.
var SegmentFileName = segmentFileName

// SetActiveNoFreelistSync sets the active segment's NoFreelistSync, for
// the benchmarks that compare both choices; it returns the previous one.
func SetActiveNoFreelistSync(on bool) bool {
	old := activeNoFreelistSync
	activeNoFreelistSync = on
	return old
}

// SetVerifyHook lets the external tests hold the verification that
// follows Open at a stage (see verifyHook).
func SetVerifyHook(f func(stage string)) { verifyHook = f }
