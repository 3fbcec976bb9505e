package replog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestStatusFeatureLevel (R68): Status reports the finalized cluster
// feature level and this node's supported range, in Go and in JSON. This
// release supports only the base level, so a cluster of it stays there
// (no level entry is written) with or without a hold.
func TestStatusFeatureLevel(t *testing.T) {
	for _, hold := range []int{0, protocol.BaseFeatureLevel} {
		l := openSingle(t, Options{MaxFeatureLevel: hold})
		if _, err := l.Append(context.Background(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		st := l.Status()
		if st.FeatureLevel != protocol.BaseFeatureLevel || st.SupportedLevels != [2]int{protocol.MinVersion, protocol.Version} {
			t.Fatalf("hold %d: FeatureLevel %d, SupportedLevels %v; want %d and [%d %d]", hold, st.FeatureLevel, st.SupportedLevels,
				protocol.BaseFeatureLevel, protocol.MinVersion, protocol.Version)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), fmt.Sprintf(`"feature_level":%d`, protocol.BaseFeatureLevel)) ||
			!strings.Contains(string(b), fmt.Sprintf(`"supported_levels":[%d,%d]`, protocol.MinVersion, protocol.Version)) {
			t.Fatalf("JSON status %s lacks the feature level fields", b)
		}
	}
}
