package simulation

import "runtime/debug"

// buildTags returns the -tags the test binary was built with, so that a
// failure's reproduce line keeps them (the replog_bug_* variants).
func buildTags() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}
