package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// A demo whose nodes are all stopped: the control API's routes and errors
// without processes (the end-to-end tests run real ones).
func stoppedDemo() *demo {
	d := &demo{out: &lineWriter{w: io.Discard}, errOut: &lineWriter{w: io.Discard}, children: map[string]*child{}, order: demoIDs}
	for _, id := range demoIDs {
		d.children[id] = &child{id: id, url: "http://" + id + ".test", state: "stopped", lastExit: "signal: killed"}
	}
	return d
}

func TestControlAPI(t *testing.T) {
	h := withCORS(stoppedDemo().controlHandler())
	tests := []struct {
		method, target string
		code           int
	}{
		{"GET", "/nodes", 200},
		{"POST", "/nodes/n2/kill", 200}, // already stopped: nothing to do
		{"POST", "/nodes/n9/kill", 404},
		{"POST", "/nodes/n1/dance", 404},
		{"GET", "/nodes/n1/kill", 405},
		{"GET", "/", 503}, // no node runs: nowhere to redirect
	}
	for _, tt := range tests {
		rec := do(t, h, tt.method, tt.target, "")
		if rec.Code != tt.code {
			t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.target, rec.Code, tt.code, rec.Body)
		}
		if rec.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s %s: no CORS header: the dashboard is served from another origin", tt.method, tt.target)
		}
	}
	rec := do(t, h, "GET", "/nodes", "")
	var states []nodeStateJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &states); err != nil {
		t.Fatal(err)
	}
	if len(states) != 3 || states[0] != (nodeStateJSON{ID: "n1", URL: "http://n1.test", State: "stopped", LastExit: "signal: killed"}) {
		t.Errorf("states %+v", states)
	}

	// With a running node, / redirects to its dashboard.
	d := stoppedDemo()
	d.children["n2"].state = "running"
	rec = do(t, d.controlHandler(), "GET", "/", "")
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "http://n2.test/" {
		t.Errorf("GET /: %d to %q, want 302 to http://n2.test/", rec.Code, rec.Header().Get("Location"))
	}
}
